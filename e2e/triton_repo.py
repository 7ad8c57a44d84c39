"""Model repositories of rendered configs, runnable by the real tritonserver on a CPU.

What runs on a CPU differs from what a GPU node runs in these ways only, each a
substitution for something these machines lack: instance groups become KIND_CPU; the
backend becomes Triton's Python backend running a stand-in model.py (the real model
files, ONNX or TensorRT engines, are not here); BF16 tensors become FP16 (numpy, which
the stand-in computes with, has no bfloat16); a model declaring no tensors gets one.
Everything else in the rendered config, batching, queue policies, priorities, version
policy, warm-up, cache, parameters and tensors, is loaded as rendered, under
--disable-auto-complete-config.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as pb

MODELS = Path(__file__).resolve().parent / "models"


def for_cpu(config_pbtxt: str, name: str | None = None) -> str:
    config = text_format.Parse(config_pbtxt, pb.ModelConfig())
    if name:
        config.name = name
    config.platform = ""
    config.backend = "python"
    for group in config.instance_group:
        group.kind = pb.ModelInstanceGroup.KIND_CPU
        del group.gpus[:]
    # numpy, which the stand-in model computes with, has no bfloat16: it serves FP16.
    for tensor in [*config.input, *config.output]:
        if tensor.data_type == pb.TYPE_BF16:
            tensor.data_type = pb.TYPE_FP16
    for warmup in config.model_warmup:
        for data in warmup.inputs.values():
            if data.data_type == pb.TYPE_BF16:
                data.data_type = pb.TYPE_FP16
    if not config.input:
        # A model whose backend would describe its own tensors: give the stand-in one.
        config.input.add(name="INPUT0", data_type=pb.TYPE_FP32, dims=[4])
        config.output.add(name="OUTPUT0", data_type=pb.TYPE_FP32, dims=[4])
    text: str = text_format.MessageToString(config)
    return text


def add_model(repo: Path, config_pbtxt: str, model_py: str = "generic.py") -> str:
    """Write one model (config, version 1 and any other versions it names)."""
    config = text_format.Parse(config_pbtxt, pb.ModelConfig())
    versions = {1}
    if config.version_policy.WhichOneof("policy_choice") == "specific":
        versions = set(config.version_policy.specific.versions)
    model_dir = repo / config.name
    for version in versions:
        (model_dir / str(version)).mkdir(parents=True, exist_ok=True)
        shutil.copy(MODELS / model_py, model_dir / str(version) / "model.py")
    (model_dir / "config.pbtxt").write_text(config_pbtxt)
    return config.name
