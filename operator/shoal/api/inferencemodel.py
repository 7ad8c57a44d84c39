"""InferenceModel: one model served by Triton for one tenant."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from shoal.api.batchpolicy import MAX_BATCH, MAX_PRIORITY_LEVELS
from shoal.api.common import (
    Conditions,
    DnsSubdomain,
    Duration,
    KopfState,
    ObjectMeta,
    Quantity,
    Rule,
    SpecModel,
    UniqueList,
    conditions_field,
    name_rule,
    unique_by,
)
from shoal.api.quantity import quantity_value
from shoal.api.tenantpool import POOL_NAME_MAX, POOL_NAME_PATTERN

MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
TENSOR_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$"
PARAMETER_KEY_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
STORAGE_URI_PATTERN = (
    # Printable ASCII only ([!-~]): no spaces, no look-alike Unicode.
    r"^((s3|gs|pvc)://[a-z0-9]([-a-z0-9.]*[a-z0-9])?(/[!-~]*)?|https://[!-.0-~]+(/[!-~]*)?)$"
)
DEFAULT_TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"

Backend = Literal[
    "python",
    "onnxruntime",
    "pytorch",
    "tensorflow",
    "tensorrt",
    "openvino",
    "fil",
    "vllm",
    "tensorrtllm",
]
Platform = Literal[
    "tensorrt_plan",
    "onnxruntime_onnx",
    "pytorch_libtorch",
    "tensorflow_savedmodel",
    "tensorflow_graphdef",
]
DataType = Literal[
    "BOOL",
    "UINT8",
    "UINT16",
    "UINT32",
    "UINT64",
    "INT8",
    "INT16",
    "INT32",
    "INT64",
    "FP16",
    "FP32",
    "FP64",
    "BF16",
    "STRING",
]


class BatchPolicyRef(SpecModel):
    """Which BatchPolicy gathers this model's requests, and what to change for this model."""

    name: DnsSubdomain = Field(description="A BatchPolicy in the model's namespace.")
    max_batch_size: int | None = Field(
        default=None, ge=1, le=MAX_BATCH, description="Override of the policy's maxBatchSize."
    )
    max_queue_delay: Duration | None = Field(
        default=None, description="Override of the policy's maxQueueDelay."
    )
    default_priority: int | None = Field(
        default=None,
        ge=1,
        le=MAX_PRIORITY_LEVELS,
        description="Override of the policy's defaultPriority.",
    )


class Tensor(SpecModel):
    """An input or output of the model, as declared in Triton's model config."""

    name: str = Field(
        pattern=TENSOR_NAME_PATTERN,
        max_length=128,
        description="The tensor's name: letters, digits and _ . : / -.",
    )
    data_type: DataType = Field(description="Element type, e.g. FP32, FP16, INT8, STRING.")
    dims: list[Annotated[int, Field(ge=-1, le=2**31 - 1)]] = Field(
        min_length=1,
        max_length=16,
        description="Shape without the batch dimension; -1 for a variable size.",
    )

    rules = (
        Rule(
            cel="self.dims.all(d, d == -1 || d >= 1)",
            check=lambda t: all(d == -1 or d >= 1 for d in t.dims),
            message="each dimension must be at least 1, or -1 for a variable size",
            field=".dims",
        ),
    )


class VersionPolicy(SpecModel):
    """Which versions in the model repository Triton serves."""

    policy: Literal["Latest", "All", "Specific"] = Field(
        default="Latest", description="Latest n versions, all of them, or the listed ones."
    )
    latest: int = Field(default=1, ge=1, le=100, description="For Latest: how many versions.")
    versions: Annotated[list[Annotated[int, Field(ge=1, le=2**31 - 1)]], UniqueList] = Field(
        default_factory=list,
        max_length=64,
        description="For Specific: the version numbers.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )

    rules = (
        Rule(
            cel="self.policy != 'Specific' || (has(self.versions) && size(self.versions) > 0)",
            check=lambda v: v.policy != "Specific" or bool(v.versions),
            message="versions must list at least one version when policy is Specific",
            field=".versions",
        ),
    )


class Warmup(SpecModel):
    """Requests Triton runs through the model before it reports ready."""

    batch_sizes: list[Annotated[int, Field(ge=1, le=MAX_BATCH)]] = Field(
        default_factory=lambda: [1],
        min_length=1,
        max_length=8,
        description="One warm-up request per batch size.",
    )
    data: Literal["Zero", "Random"] = Field(
        default="Zero", description="Fill the warm-up inputs with zeros or random data."
    )


class ModelSource(SpecModel):
    """The model: its name in Triton, how it runs, and where its files are."""

    name: str = Field(
        pattern=MODEL_NAME_PATTERN,
        max_length=128,
        description="The model's name in Triton (its directory in the model repository).",
    )
    backend: Backend | None = Field(
        default=None, description="The Triton backend that runs it, e.g. onnxruntime, python."
    )
    platform: Platform | None = Field(
        default=None, description="Alternatively, the Triton platform, e.g. tensorrt_plan."
    )
    storage_uri: str = Field(
        pattern=STORAGE_URI_PATTERN,
        max_length=2048,
        description="Where the model's version directories are: s3://bucket/path, "
        "gs://bucket/path, pvc://claim-name/path or an https:// archive.",
    )
    version_policy: VersionPolicy = Field(
        default_factory=VersionPolicy, description="Which versions Triton serves."
    )
    inputs: list[Tensor] = Field(
        default_factory=list,
        max_length=64,
        description="Input tensors. Optional for backends that describe their own model.",
    )
    outputs: list[Tensor] = Field(
        default_factory=list, max_length=64, description="Output tensors."
    )
    instances: int = Field(
        default=1, ge=1, le=64, description="Model instances per replica (per GPU)."
    )
    warmup: Warmup | None = Field(default=None, description="Warm-up before ready.")
    response_cache: bool = Field(
        default=False, description="Cache responses to identical requests in Triton."
    )
    parameters: dict[str, Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=dict,
        description="Backend parameters, passed to the model config's parameters as strings.",
    )

    rules = (
        Rule(
            cel=f"!has(self.parameters) || "
            f"self.parameters.all(k, k.matches('{PARAMETER_KEY_PATTERN}'))",
            check=lambda m: all(re.fullmatch(PARAMETER_KEY_PATTERN, k) for k in m.parameters),
            message="parameter names may use letters, digits and _ . - only",
            field=".parameters",
        ),
        Rule(
            cel="has(self.backend) != has(self.platform)",
            check=lambda m: (m.backend is None) != (m.platform is None),
            message="set exactly one of backend and platform",
        ),
        Rule(
            cel="!has(self.warmup) || (has(self.inputs) && size(self.inputs) > 0)",
            check=lambda m: m.warmup is None or bool(m.inputs),
            message="warmup needs the model's inputs to be declared",
            field=".inputs",
        ),
    )


# A whole number of bytes, with an optional decimal or binary suffix.
CACHE_SIZE_PATTERN = r"^[1-9][0-9]{0,12}(Ki|Mi|Gi|Ti|k|M|G|T)?$"
CACHE_SIZE_MIN, CACHE_SIZE_MAX = "1Mi", "1Ti"
# A memory quantity whose value the cache size is compared with: no sign, and an
# exponent of at most three digits. The API server's quantity parser takes seconds to
# minutes on an exponent such as e-99999999, which the general quantity pattern allows;
# a rule must never hand it one.
# ([.] rather than an escaped dot: the pattern is also a CEL string literal.)
COMPARABLE_MEMORY = (
    r"^([0-9]+([.][0-9]*)?|[.][0-9]+)(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]{1,3})?$"
)


def _cache_within_memory(runtime: Runtime) -> bool:
    size = runtime.response_cache_size
    if size is None:
        return True
    memory = str(runtime.memory)
    if re.fullmatch(COMPARABLE_MEMORY, memory) is None:
        return False
    return 2 * quantity_value(size) <= quantity_value(memory)


class Runtime(SpecModel):
    """The Triton server each replica runs."""

    image: str = Field(
        default=DEFAULT_TRITON_IMAGE,
        min_length=1,
        max_length=512,
        description="The Triton Inference Server image.",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="When the kubelet pulls the image."
    )
    gpus: int = Field(default=1, ge=0, le=16, description="nvidia.com/gpu per replica.")
    cpu: Quantity = Field(default="2", description="CPU requested per replica.")
    memory: Quantity = Field(default="8Gi", description="Memory requested per replica.")
    shm_size: Quantity = Field(
        default="1Gi", description="Size of /dev/shm (Python backend and large tensors use it)."
    )
    response_cache_size: str | None = Field(
        default=None,
        pattern=CACHE_SIZE_PATTERN,
        max_length=15,
        description="Memory for Triton's response cache, in bytes with an optional suffix, "
        f"e.g. 512Mi; from {CACHE_SIZE_MIN} to {CACHE_SIZE_MAX} and at most half of "
        "memory, which it is part of. Used only when model.responseCache is true. Unset: "
        "256Mi, or a quarter of memory when that is less.",
    )

    rules = (
        Rule(
            cel=f"!has(self.responseCacheSize) || "
            f"(quantity(self.responseCacheSize).compareTo(quantity('{CACHE_SIZE_MIN}')) >= 0 "
            f"&& quantity(self.responseCacheSize).compareTo(quantity('{CACHE_SIZE_MAX}')) <= 0)",
            check=lambda r: (
                r.response_cache_size is None
                or quantity_value(CACHE_SIZE_MIN)
                <= quantity_value(r.response_cache_size)
                <= quantity_value(CACHE_SIZE_MAX)
            ),
            message=f"responseCacheSize must be from {CACHE_SIZE_MIN} to {CACHE_SIZE_MAX}",
            field=".responseCacheSize",
        ),
        Rule(
            # The conditional, unlike &&, never evaluates its branch when the test fails.
            cel=f"!has(self.responseCacheSize) || "
            f"(string(self.memory).matches('{COMPARABLE_MEMORY}') ? "
            f"quantity(self.responseCacheSize).add(quantity(self.responseCacheSize))"
            f".compareTo(quantity(string(self.memory))) <= 0 : false)",
            check=_cache_within_memory,
            message="responseCacheSize must be at most half of memory (the cache is "
            "allocated from the replica's memory), and memory then a plain quantity such "
            "as 16Gi",
            field=".responseCacheSize",
        ),
    )


class ScalingPolicy(SpecModel):
    """How fast the replica count may change in one direction."""

    stabilization_window: Duration = Field(
        description="How long the autoscaler looks back before changing replicas in this "
        "direction; for scale-down this is the cool-down."
    )
    max_replicas_per_step: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="Most replicas added or removed per 15 s; unset: no limit.",
    )


class Schedule(SpecModel):
    """A time window with a higher warm-pool floor, for known peaks."""

    name: str = Field(
        pattern=r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
        max_length=63,
        description="Names the window in status and Events.",
    )
    start: str = Field(
        pattern=r"^([!-~]+ +){4}[!-~]+$",
        max_length=128,
        description="When the window opens, as a five-field cron expression, e.g. '0 8 * * 1-5'.",
    )
    duration: Duration = Field(description="How long the window stays open, e.g. 10h.")
    time_zone: str = Field(
        default="UTC", max_length=64, description="IANA time zone of start, e.g. Europe/Paris."
    )
    min_replicas: int = Field(ge=1, le=1000, description="The warm-pool floor while open.")


class Scaling(SpecModel):
    """Autoscaling on what users feel: waiting requests and tail latency."""

    min_replicas: int = Field(
        default=1,
        ge=1,
        le=1000,
        description="The warm pool: replicas kept running even without traffic, so slow-"
        "starting models answer at once.",
    )
    max_replicas: int = Field(
        default=4, ge=1, le=1000, description="Most replicas; also capped by the pool's quota."
    )
    target_queue_depth: int | None = Field(
        default=None,
        ge=1,
        le=100_000,
        description="Waiting requests per replica to aim for. Unset: a quarter of a batch "
        "(maxBatchSize / 4, at least 1).",
    )
    target_p95_latency: Duration | None = Field(
        default=None, description="P95 request latency to aim for, e.g. 200ms."
    )
    scale_up: ScalingPolicy = Field(
        default_factory=lambda: ScalingPolicy(stabilization_window="0s"),
        description="Scale-up behaviour: fast by default.",
        json_schema_extra={"default": {"stabilizationWindow": "0s"}},
    )
    scale_down: ScalingPolicy = Field(
        default_factory=lambda: ScalingPolicy(stabilization_window="5m"),
        description="Scale-down behaviour: the cool-down.",
        json_schema_extra={"default": {"stabilizationWindow": "5m"}},
    )
    schedules: Annotated[list[Schedule], unique_by("name")] = Field(
        default_factory=list,
        max_length=16,
        description="Windows that raise minReplicas ahead of known peaks.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    rules = (
        Rule(
            cel="self.minReplicas <= self.maxReplicas",
            check=lambda s: s.min_replicas <= s.max_replicas,
            message="minReplicas must not exceed maxReplicas",
            field=".minReplicas",
        ),
        Rule(
            cel="!has(self.schedules) || self.schedules.all(w, w.minReplicas <= self.maxReplicas)",
            check=lambda s: all(w.min_replicas <= s.max_replicas for w in s.schedules),
            message="a schedule's minReplicas must not exceed maxReplicas",
            field=".schedules",
        ),
    )


class InferenceModelSpec(SpecModel):
    """One model, served by Triton, in one TenantPool."""

    pool: str = Field(
        pattern=POOL_NAME_PATTERN,
        max_length=POOL_NAME_MAX,
        description="The TenantPool the model runs in.",
    )
    batch_policy: BatchPolicyRef | None = Field(
        default=None,
        description="The BatchPolicy that gathers requests, with per-model overrides. "
        "Unset: the defaults of a BatchPolicy with an empty spec.",
    )
    model: ModelSource = Field(description="The model and where its files are.")
    runtime: Runtime = Field(default_factory=Runtime, description="The Triton server.")
    scaling: Scaling = Field(default_factory=Scaling, description="Autoscaling and warm pool.")


class Endpoints(SpecModel):
    """Where clients reach the model inside the cluster."""

    http: str | None = Field(default=None, description="KServe v2 HTTP/REST endpoint.")
    grpc: str | None = Field(default=None, description="KServe v2 gRPC endpoint.")


class InferenceModelStatus(SpecModel):
    """What the operator observed about the model."""

    observed_generation: int | None = Field(
        default=None, ge=0, description="The .metadata.generation last acted upon."
    )
    conditions: Conditions = conditions_field()
    replicas: int | None = Field(default=None, ge=0, description="Replicas that exist.")
    ready_replicas: int | None = Field(default=None, ge=0, description="Replicas ready to serve.")
    queue_depth: float | None = Field(
        default=None, ge=0, description="Requests waiting, across replicas."
    )
    p95_latency: str | None = Field(default=None, description="P95 request latency, e.g. 12ms.")
    average_batch_size: float | None = Field(
        default=None, ge=0, description="Requests per execution."
    )
    request_rate: float | None = Field(default=None, ge=0, description="Requests per second.")
    endpoints: Endpoints | None = Field(default=None, description="Where clients reach the model.")
    warm_pool: int | None = Field(
        default=None,
        ge=0,
        description="The warm pool now: minReplicas, or more while a schedule is open.",
    )
    open_schedules: list[str] = Field(
        default_factory=list, description="Scheduled windows open now."
    )
    kopf: KopfState | None = Field(default=None, description="Operator framework bookkeeping.")


class InferenceModel(SpecModel):
    """InferenceModel is one model served by NVIDIA Triton for a tenant: where its files
    are, which TenantPool runs it, which BatchPolicy gathers its requests, and how it
    scales. The operator turns it into a Triton Deployment, Service, autoscaler and
    disruption budget."""

    api_version: Literal["shoal.dev/v1alpha1"] = "shoal.dev/v1alpha1"
    kind: Literal["InferenceModel"] = "InferenceModel"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: InferenceModelSpec
    status: InferenceModelStatus | None = None

    # The name becomes the name of the model's Service and Deployment (DNS-1035 labels);
    # a few characters are left for suffixes.
    rules = (
        name_rule(
            "^[a-z]([-a-z0-9]*[a-z0-9])?$",
            52,
            "metadata.name must be a DNS-1035 label (lowercase letters, digits and "
            "'-', starting with a letter) of at most 52 characters: it names the model's "
            "Service",
        ),
    )
