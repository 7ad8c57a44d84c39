"""Every backend the API accepts renders a config its Triton backend loads, or is refused.

The shapes checked here are the backends' own, read from their sources at the 24.10
release (docs/backends.md names them): the vLLM backend's config, the kinds of instance
the TensorRT and OpenVINO backends accept, which backends read a model's tensors from
its files. Nothing here runs a backend; the e2e tier loads the vLLM config into the real
tritonserver with a stand-in of the backend (tests/e2e/test_vllm_config_on_triton.py),
and a Python model that declares no tensors with the rendered flags
(tests/e2e/test_auto_complete_on_triton.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any, get_args

import pytest
from google.protobuf import text_format
from pydantic import ValidationError
from tritonclient.grpc import model_config_pb2 as pb

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.inferencemodel import (
    DEFAULT_TRITON_IMAGE,
    DEFAULT_TRITON_VLLM_IMAGE,
    TENSORS_FROM_FILES,
    Backend,
    InferenceModel,
    Platform,
)
from shoal.api.tenantpool import TenantPool
from shoal.render.batching import effective_batching
from shoal.render.desired import model_objects
from shoal.render.model_config import model_config, render_config_pbtxt
from shoal.settings import Settings
from tests.support.malformed import BACKENDS, Case
from tests.support.resources import example

BATCHED_KINDS = {0: "KIND_CPU", 1: "KIND_GPU"}
# What each runner the API accepts renders, by runtime.gpus (0 or 1): the kind of its
# instances (KIND_MODEL: the vLLM engine's shape), or "refused". A backend or platform
# added to the API fails here until it is given its row.
EXPECTED: dict[str, dict[int, str]] = {
    "python": BATCHED_KINDS,
    "onnxruntime": BATCHED_KINDS,
    "pytorch": BATCHED_KINDS,
    "tensorflow": BATCHED_KINDS,
    "fil": BATCHED_KINDS,
    # Its backend refuses any instance kind but GPU.
    "tensorrt": {0: "refused", 1: "KIND_GPU"},
    # Its backend refuses any instance kind but CPU.
    "openvino": {0: "KIND_CPU", 1: "refused"},
    "vllm": {0: "refused", 1: "KIND_MODEL"},
    # Not rendered yet (docs/backends.md says why).
    "tensorrtllm": {0: "refused", 1: "refused"},
    "onnxruntime_onnx": BATCHED_KINDS,
    "pytorch_libtorch": BATCHED_KINDS,
    "tensorflow_savedmodel": BATCHED_KINDS,
    "tensorflow_graphdef": BATCHED_KINDS,
    "tensorrt_plan": {0: "refused", 1: "KIND_GPU"},
}


# What Triton does with a runner's tensors when the spec declares none (docs/backends.md
# names each backend's source): "completes" them from the model's files (the server
# runs without --disable-auto-complete-config), or the API refuses the model until they
# are declared ("required"); vllm's the operator renders; tensorrtllm is refused. A
# runner added to the API fails here until it is given its row.
COMPLETES, REQUIRED = "completes", "required"
TENSORS: dict[str, str] = {
    "python": COMPLETES,  # with its model.py's auto_complete_config
    "onnxruntime": COMPLETES,
    "onnxruntime_onnx": COMPLETES,
    "tensorrt": COMPLETES,
    "tensorrt_plan": COMPLETES,
    "openvino": COMPLETES,
    "tensorflow_savedmodel": COMPLETES,
    # A GraphDef has no signature to read; backend tensorflow may find one.
    "tensorflow": REQUIRED,
    "tensorflow_graphdef": REQUIRED,
    # The PyTorch backend's auto-complete only logs "not supported".
    "pytorch": REQUIRED,
    "pytorch_libtorch": REQUIRED,
    # Built on rapids-triton, which has no auto-complete.
    "fil": REQUIRED,
    "vllm": "rendered",
    "tensorrtllm": "refused",
}
STRICT = "--disable-auto-complete-config"
_INPUT = {"name": "INPUT0", "dataType": "FP32", "dims": [4]}
_OUTPUT = {"name": "OUTPUT0", "dataType": "FP32", "dims": [4]}


def runner_doc(runner: str, gpus: int, **model: Any) -> dict[str, Any]:
    """The Python example model without its BatchPolicy, run by ``runner``."""
    doc = example("InferenceModel", "ads-ctr")
    doc["metadata"]["uid"] = "00000000-0000-0000-0000-000000000001"
    del doc["spec"]["batchPolicy"]
    del doc["spec"]["model"]["backend"]
    key = "backend" if runner in get_args(Backend) else "platform"
    doc["spec"]["model"][key] = runner
    doc["spec"]["model"].update(model)
    doc["spec"]["runtime"] = {"gpus": gpus}
    return doc


def config_of(model: InferenceModel) -> pb.ModelConfig:
    config: pb.ModelConfig = text_format.Parse(
        render_config_pbtxt(model, effective_batching(model, None)), pb.ModelConfig()
    )
    return config


def triton_container(model: InferenceModel, settings: Settings | None = None) -> dict[str, Any]:
    pool = TenantPool.model_validate(example("TenantPool", model.spec.pool))
    images = (settings or Settings.from_env({})).serving_images
    objects = model_objects(model, None, pool, None, images)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    container: dict[str, Any] = deployment["spec"]["template"]["spec"]["containers"][0]
    return container


def test_every_backend_and_platform_has_its_expected_shape() -> None:
    assert set(EXPECTED) == set(TENSORS) == {*get_args(Backend), *get_args(Platform)}
    assert {r for r, t in TENSORS.items() if t == COMPLETES} == TENSORS_FROM_FILES


def _args(doc: dict[str, Any]) -> list[str]:
    args: list[str] = triton_container(InferenceModel.model_validate(doc))["args"]
    assert not [a for a in args if a.startswith("--strict-model-config")], "deprecated"
    return args


@pytest.mark.parametrize("runner", sorted(TENSORS))
def test_each_runner_leaves_its_tensors_to_triton_or_requires_them(runner: str) -> None:
    """A runner whose backend reads a model's tensors may leave out its inputs or its
    outputs (or both), and its server then completes them; one whose backend cannot is
    refused without them, in the field's words. Whatever declares both loads as
    rendered, under --disable-auto-complete-config."""
    gpus = next((g for g in (1, 0) if EXPECTED[runner][g] != "refused"), 0)
    both = runner_doc(runner, gpus, inputs=[_INPUT], outputs=[_OUTPUT])
    partial = {
        "inputs": runner_doc(runner, gpus, outputs=[_OUTPUT]),  # no inputs
        "outputs": runner_doc(runner, gpus, inputs=[_INPUT]),  # no outputs
        "both": runner_doc(runner, gpus),
    }
    expected = TENSORS[runner]
    if expected == "refused":
        for doc in (both, *partial.values()):
            with pytest.raises(ValidationError):
                InferenceModel.model_validate(doc)
    elif expected == "rendered":  # vllm: its own tensors, strictly
        assert STRICT in _args(partial["both"])
        with pytest.raises(ValidationError, match="inputs do not apply"):
            InferenceModel.model_validate(both)
    elif expected == REQUIRED:
        assert STRICT in _args(both)
        for missing, doc in partial.items():
            field = "inputs" if missing == "both" else missing
            with pytest.raises(ValidationError) as refused:
                InferenceModel.model_validate(doc)
            (error,) = refused.value.errors()
            assert error["loc"] == ("spec", "model")
            message = error["msg"].removeprefix("Value error, ")
            assert message.startswith(f"{field}: {field} are required for "), message
            assert runner in message.split(": ")[1], message
    else:
        assert STRICT in _args(both)
        for doc in partial.values():
            assert STRICT not in _args(doc)
            model = InferenceModel.model_validate(doc)
            # What is declared is rendered; Triton fills in the rest. The backends fill
            # max_batch_size and dynamic_batching only where a config has none, and the
            # rendered one always has both, from the BatchPolicy: Triton batches as the
            # gateway and the autoscaler expect.
            config = config_of(model)
            assert [i.name for i in config.input] == [t.name for t in model.spec.model.inputs]
            assert [o.name for o in config.output] == [t.name for t in model.spec.model.outputs]
            assert config.max_batch_size == BatchPolicySpec().max_batch_size > 0
            assert config.HasField("dynamic_batching")


@pytest.mark.parametrize("gpus", [0, 1])
@pytest.mark.parametrize("runner", sorted(EXPECTED))
def test_each_runner_renders_its_backends_shape_or_is_refused(runner: str, gpus: int) -> None:
    expected = EXPECTED[runner][gpus]
    tensors = {"inputs": [_INPUT], "outputs": [_OUTPUT]} if TENSORS[runner] == REQUIRED else {}
    doc = runner_doc(runner, gpus, **tensors)
    if expected == "refused":
        with pytest.raises(ValidationError):
            InferenceModel.model_validate(doc)
        return
    model = InferenceModel.model_validate(doc)
    config = config_of(model)
    (group,) = config.instance_group
    assert pb.ModelInstanceGroup.Kind.Name(group.kind) == expected
    assert not group.gpus
    image = triton_container(model)["image"]
    if expected == "KIND_MODEL":  # the vLLM engine: it batches, Triton does not
        assert config.backend == "vllm"
        assert config.max_batch_size == 0
        assert not config.HasField("dynamic_batching")
        assert config.model_transaction_policy.decoupled
        assert group.count == 1
        assert image == DEFAULT_TRITON_VLLM_IMAGE
    else:  # Triton's dynamic batcher gathers the requests
        assert config.max_batch_size == BatchPolicySpec().max_batch_size
        assert config.HasField("dynamic_batching")
        assert not config.model_transaction_policy.decoupled
        assert image == DEFAULT_TRITON_IMAGE


# What the vLLM backend's auto_complete_config writes (vllm_backend r24.10, src/model.py),
# spelled out again here so that a change of the renderer's table shows.
VLLM_INPUTS = [
    ("text_input", pb.TYPE_STRING, [1], False),
    ("stream", pb.TYPE_BOOL, [1], True),
    ("sampling_parameters", pb.TYPE_STRING, [1], True),
    ("exclude_input_in_output", pb.TYPE_BOOL, [1], True),
]


@pytest.mark.parametrize("gpus", [1, 4])
def test_the_vllm_config_is_the_one_its_backend_completes(gpus: int) -> None:
    model = InferenceModel.model_validate(
        runner_doc("vllm", gpus, name="llama", parameters={"REPORT_CUSTOM_METRICS": "yes"})
    )
    text = render_config_pbtxt(model, effective_batching(model, None))
    config = text_format.Parse(text, pb.ModelConfig())
    assert config.name == "llama"
    assert config.backend == "vllm"
    assert config.platform == ""
    # max_batch_size 0: Triton hands every request to the engine as it comes.
    assert config.max_batch_size == 0
    assert "max_batch_size" not in text
    assert "dynamic_batching" not in text
    assert not config.HasField("sequence_batching")
    # The backend asserts it is decoupled: it answers through a response sender.
    assert config.model_transaction_policy.decoupled
    assert [(i.name, i.data_type, list(i.dims), i.optional) for i in config.input] == VLLM_INPUTS
    assert not any(i.HasField("reshape") or i.allow_ragged_batch for i in config.input)
    assert [(o.name, o.data_type, list(o.dims)) for o in config.output] == [
        ("text_output", pb.TYPE_STRING, [-1])
    ]
    # One engine over all of the pod's GPUs: KIND_MODEL (the backend refuses KIND_GPU
    # with tensor_parallel_size above 1), one instance, no device list.
    assert [(g.kind, g.count, list(g.gpus)) for g in config.instance_group] == [
        (pb.ModelInstanceGroup.KIND_MODEL, 1, [])
    ]
    assert len(config.model_warmup) == 0
    assert not config.HasField("response_cache")
    assert config.version_policy.latest.num_versions == 1
    assert {k: v.string_value for k, v in config.parameters.items()} == {
        "REPORT_CUSTOM_METRICS": "yes"
    }


def test_a_vllm_models_batching_never_reaches_its_config() -> None:
    """Whatever batching the gateway and autoscaler work with, the engine batches."""
    model = InferenceModel.model_validate(runner_doc("vllm", 1))
    wide = BatchPolicySpec(max_batch_size=64, preferred_batch_sizes=[16, 64])
    assert model_config(model, wide) == model_config(model, BatchPolicySpec())


def test_an_openvino_model_runs_on_cpus_whatever_the_pod_has() -> None:
    """The API refuses GPUs for it; the renderer still never asks its backend for one."""
    model = InferenceModel.model_validate(runner_doc("openvino", 0))
    runtime = model.spec.runtime.model_copy(update={"gpus": 1})
    given_a_gpu = model.model_copy(
        update={"spec": model.spec.model_copy(update={"runtime": runtime})}
    )
    (group,) = model_config(given_a_gpu, BatchPolicySpec()).instance_group
    assert group.kind == pb.ModelInstanceGroup.KIND_CPU


def test_the_vllm_image_has_a_setting_of_its_own() -> None:
    """A mirror of the general image has no vLLM: overriding it leaves vllm models on
    their own image; SHOAL_TRITON_VLLM_IMAGE moves those; a model's image wins."""
    vllm = InferenceModel.model_validate(runner_doc("vllm", 1))
    python = InferenceModel.model_validate(runner_doc("python", 1))
    assert triton_container(vllm)["image"] == DEFAULT_TRITON_VLLM_IMAGE
    assert triton_container(python)["image"] == DEFAULT_TRITON_IMAGE

    general = Settings.from_env({"SHOAL_TRITON_IMAGE": "mirror.internal/tritonserver:24.10-py3"})
    assert triton_container(vllm, general)["image"] == DEFAULT_TRITON_VLLM_IMAGE
    assert triton_container(python, general)["image"] == "mirror.internal/tritonserver:24.10-py3"

    own = Settings.from_env({"SHOAL_TRITON_VLLM_IMAGE": "mirror.internal/triton-vllm:24.10"})
    assert triton_container(vllm, own)["image"] == "mirror.internal/triton-vllm:24.10"
    assert triton_container(python, own)["image"] == DEFAULT_TRITON_IMAGE

    doc = runner_doc("vllm", 1)
    doc["spec"]["runtime"]["image"] = "registry.example/triton-vllm:custom"
    named = InferenceModel.model_validate(doc)
    assert triton_container(named, own)["image"] == "registry.example/triton-vllm:custom"

    with pytest.raises(ValidationError, match="triton_vllm_image"):
        Settings.from_env({"SHOAL_TRITON_VLLM_IMAGE": "not an image"})


def test_only_the_vllm_engine_gets_a_writable_home() -> None:
    vllm = InferenceModel.model_validate(runner_doc("vllm", 1))
    assert triton_container(vllm)["env"] == [{"name": "HOME", "value": "/tmp"}]
    # /tmp is the pod's own emptyDir, mounted in the Triton container.
    mounts = {m["mountPath"] for m in triton_container(vllm)["volumeMounts"]}
    assert "/tmp" in mounts
    python = InferenceModel.model_validate(runner_doc("python", 1))
    assert "env" not in triton_container(python)


@pytest.mark.parametrize("case", BACKENDS, ids=lambda c: c.id)
def test_each_backend_refusal_is_its_own_rule(case: Case) -> None:
    """The corpus case breaks one rule (tests/unit/test_malformed_models.py sees it
    refused); the reason the models give is that rule's, in the field's words."""
    with pytest.raises(ValidationError) as refused:
        InferenceModel.model_validate(case.build())
    path, *words = case.expect
    (error,) = refused.value.errors()
    where = ".".join(str(part) for part in error["loc"])
    # The rule names its field relative to the object it is on, as the API server does.
    assert f"{where}.{error['msg'].removeprefix('Value error, ').split(': ')[0]}" == path
    for fragment in words:
        assert fragment in error["msg"], error["msg"]


@pytest.mark.parametrize("case", BACKENDS, ids=lambda c: c.id)
def test_each_backend_case_is_valid_without_its_last_change(case: Case) -> None:
    """So the refusal above is that of the rule the last change breaks, not of the base
    the case starts from."""
    InferenceModel.model_validate(dataclasses.replace(case, changes=case.changes[:-1]).build())
