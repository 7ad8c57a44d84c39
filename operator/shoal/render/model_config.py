"""Triton's model configuration (config.pbtxt) for an InferenceModel.

Built as Triton's own ModelConfig protobuf message (shipped with tritonclient) and
printed in protobuf text format, so whatever we render is, by construction, a config
Triton can parse.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from google.protobuf import text_format

from shoal.api.batchpolicy import BatchPolicySpec, QueuePolicy
from shoal.api.common import parse_duration
from shoal.api.inferencemodel import TENSORS_FROM_FILES, InferenceModel, ModelSource, Tensor
from shoal.render.triton_schema import model_config_schema

if TYPE_CHECKING:
    from tritonclient.grpc import model_config_pb2 as pb
else:
    pb = model_config_schema()


def _microseconds(duration: str) -> int:
    return round(parse_duration(duration) * 1_000_000)


def _queue_policy(policy: QueuePolicy) -> pb.ModelQueuePolicy:
    return pb.ModelQueuePolicy(
        timeout_action=pb.ModelQueuePolicy.REJECT
        if policy.timeout_action == "Reject"
        else pb.ModelQueuePolicy.DELAY,
        default_timeout_microseconds=_microseconds(policy.timeout),
        allow_timeout_override=policy.allow_timeout_override,
        max_queue_size=policy.max_queue_size,
    )


def dynamic_batching(batching: BatchPolicySpec) -> pb.ModelDynamicBatching:
    """Triton's dynamic_batching block for a (merged) BatchPolicy spec."""
    message = pb.ModelDynamicBatching(
        preferred_batch_size=sorted(batching.preferred_batch_sizes),
        max_queue_delay_microseconds=_microseconds(batching.max_queue_delay),
        preserve_ordering=batching.preserve_ordering,
        default_queue_policy=_queue_policy(batching.queue_policy),
    )
    if batching.priority_levels:
        message.priority_levels = batching.priority_levels
        # Triton requires a default level once priorities are on: the lowest one.
        message.default_priority_level = batching.default_priority or batching.priority_levels
        for entry in batching.priority_queue_policies:
            message.priority_queue_policy[entry.priority].CopyFrom(_queue_policy(entry.policy))
    return message


def _tensor(tensor: Tensor, cls: type[pb.ModelInput] | type[pb.ModelOutput]) -> object:
    return cls(
        name=tensor.name,
        data_type=pb.DataType.Value(f"TYPE_{tensor.data_type}"),
        dims=tensor.dims,
    )


# What Triton's vLLM backend takes (vllm_backend r24.10, src/model.py: the config its
# auto_complete_config would write). The operator writes it whole and runs Triton with
# --disable-auto-complete-config for it, so the config is what loads.
# (name, type, dims, optional)
VLLM_INPUTS = (
    ("text_input", "TYPE_STRING", (1,), False),
    ("stream", "TYPE_BOOL", (1,), True),
    ("sampling_parameters", "TYPE_STRING", (1,), True),
    ("exclude_input_in_output", "TYPE_BOOL", (1,), True),
)
VLLM_OUTPUTS = (("text_output", "TYPE_STRING", (-1,)),)


def _vllm(config: pb.ModelConfig) -> None:
    """The vLLM backend's shape: its own tensors; max_batch_size 0, no dynamic batching
    (the engine batches in flight, so Triton hands it each request at once); decoupled,
    as the backend requires (it answers through a response sender, streaming or not);
    one KIND_MODEL instance, an engine that takes every GPU of the pod (the backend
    refuses KIND_GPU for tensor_parallel_size above 1)."""
    for name, data_type, dims, optional in VLLM_INPUTS:
        config.input.add(
            name=name, data_type=pb.DataType.Value(data_type), dims=dims, optional=optional
        )
    for name, data_type, dims in VLLM_OUTPUTS:
        config.output.add(name=name, data_type=pb.DataType.Value(data_type), dims=dims)
    config.max_batch_size = 0
    config.model_transaction_policy.decoupled = True
    config.instance_group.add(kind=pb.ModelInstanceGroup.KIND_MODEL, count=1)


def triton_completes_tensors(source: ModelSource) -> bool:
    """Whether Triton is to read the model's tensors from its files (auto-complete):
    the model declares no inputs or no outputs, and its backend can read them (the API
    refuses the others). A model that declares both loads exactly as rendered."""
    return source.runner in TENSORS_FROM_FILES and not (source.inputs and source.outputs)


def _instance_kind(model: InferenceModel) -> int:
    """Where a batched model's instances run: on the pod's GPUs when it has some, except
    for OpenVINO, which runs on CPUs only (its backend refuses any other kind)."""
    if model.spec.runtime.gpus and model.spec.model.backend != "openvino":
        return int(pb.ModelInstanceGroup.KIND_GPU)
    return int(pb.ModelInstanceGroup.KIND_CPU)


def executors(model: InferenceModel) -> int:
    """How many batches one replica executes at once: its model instances, on each of
    its GPUs for KIND_GPU (Triton places an instance group's count on every GPU it is
    given), else on the CPU; a vLLM model's one engine."""
    if model.spec.model.backend == "vllm":
        return 1
    instances = model.spec.model.instances
    if _instance_kind(model) == pb.ModelInstanceGroup.KIND_GPU:
        return instances * model.spec.runtime.gpus
    return instances


def _batched(config: pb.ModelConfig, model: InferenceModel, batching: BatchPolicySpec) -> None:
    """Every other backend's shape: the declared tensors, Triton's dynamic batcher from
    the BatchPolicy, the model's instances on the pod's devices, warm-up and cache."""
    source = model.spec.model
    config.max_batch_size = batching.max_batch_size
    config.input.extend(_tensor(t, pb.ModelInput) for t in source.inputs)
    config.output.extend(_tensor(t, pb.ModelOutput) for t in source.outputs)
    config.dynamic_batching.CopyFrom(dynamic_batching(batching))
    # No explicit gpus list: inside the pod, every visible GPU is one the pod was given.
    config.instance_group.append(
        pb.ModelInstanceGroup(kind=_instance_kind(model), count=source.instances)
    )

    if source.warmup:
        for size in source.warmup.batch_sizes:
            warmup = config.model_warmup.add(name=f"warmup-batch-{size}", batch_size=size)
            for tensor in source.inputs:
                data = warmup.inputs[tensor.name]
                data.data_type = pb.DataType.Value(f"TYPE_{tensor.data_type}")
                data.dims.extend(max(d, 1) for d in tensor.dims)
                if source.warmup.data == "Zero":
                    data.zero_data = True
                else:
                    data.random_data = True

    if source.response_cache:
        config.response_cache.enable = True


def model_config(model: InferenceModel, batching: BatchPolicySpec) -> pb.ModelConfig:
    """The ModelConfig message for ``model`` gathered by ``batching`` (which a backend
    that batches by itself, vllm, does not use)."""
    source = model.spec.model
    config = pb.ModelConfig(name=source.name)
    if source.backend:
        config.backend = source.backend
    if source.platform:
        config.platform = source.platform
    if source.backend == "vllm":
        _vllm(config)
    else:
        _batched(config, model, batching)

    policy = source.version_policy
    if policy.policy == "Latest":
        config.version_policy.latest.num_versions = policy.latest or 1
    elif policy.policy == "All":
        config.version_policy.all.SetInParent()
    else:
        config.version_policy.specific.versions.extend(sorted(policy.versions))

    for key, value in sorted(source.parameters.items()):
        config.parameters[key].string_value = value
    return config


def render_config_pbtxt(model: InferenceModel, batching: BatchPolicySpec) -> str:
    """config.pbtxt text, deterministic for equal inputs."""
    text: str = text_format.MessageToString(model_config(model, batching))
    return text
