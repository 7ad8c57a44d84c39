"""InferenceModel: one model served by Triton for one tenant."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Literal, get_args

from pydantic import Field

from shoal.api.batchpolicy import DEFAULT_MAX_BATCH, MAX_BATCH, MAX_PRIORITY_LEVELS, QueueDelay
from shoal.api.byte_size import byte_size_bounds, byte_size_format
from shoal.api.common import (
    Check,
    Conditions,
    DnsSubdomain,
    DurationFormat,
    ObjectMeta,
    Quantity,
    ResourceQuantity,
    Rule,
    SpecModel,
    TextFormat,
    UniqueList,
    cel_string,
    conditions_field,
    matches,
    name_rule,
    unique_by,
)
from shoal.api.formats import ARCHIVE_WORDS, ImageReference, S3Endpoint, StorageUri
from shoal.api.pod_overrides import (
    EnvFromList,
    EnvList,
    ExtraVolumes,
    PodAnnotations,
    PodLabels,
    PullSecrets,
    TritonArgs,
)
from shoal.api.quantity import quantity_value
from shoal.api.scheduling import SPREAD_LIST_TYPE, Affinity, SpreadConstraints
from shoal.api.tenantpool import PoolName
from shoal.api.windows import Window

MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"
TENSOR_NAME_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.:/-]*$"
PARAMETER_KEY_PATTERN = r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$"
DEFAULT_TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-py3"
# The general image has no vLLM: NVIDIA ships Triton's vLLM backend in its own image.
DEFAULT_TRITON_VLLM_IMAGE = "nvcr.io/nvidia/tritonserver:24.10-vllm-python-py3"

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
# The runners whose Triton backend (24.10) reads a model's tensors from its files when
# the config leaves them out ("auto-complete"): a model that declares no inputs or no
# outputs runs on a server that lets it (render.workload.triton_args); a model that
# declares both, and vllm, whose config the operator writes whole, run on one that
# does not. Sources: docs/backends.md.
TENSORS_FROM_FILES = frozenset(
    {
        "python",  # its model.py's auto_complete_config, if it has one
        "onnxruntime",
        "onnxruntime_onnx",
        "tensorflow_savedmodel",
        "tensorrt",
        "tensorrt_plan",
        "openvino",
    }
)
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
    max_queue_delay: QueueDelay | None = Field(
        default=None, description="Override of the policy's maxQueueDelay."
    )
    default_priority: int | None = Field(
        default=None,
        ge=1,
        le=MAX_PRIORITY_LEVELS,
        description="Override of the policy's defaultPriority.",
    )


TensorName = Annotated[
    str,
    TextFormat(
        TENSOR_NAME_PATTERN,
        "a tensor name: letters, digits and _ . : / -, not starting with . : / or -",
        max_length=128,
    ),
]
ModelName = Annotated[
    str,
    TextFormat(
        MODEL_NAME_PATTERN,
        "a model name: letters, digits and _ . -, starting with a letter or digit",
        max_length=128,
    ),
]
ParameterKey = Annotated[
    str,
    Field(min_length=1, max_length=256),
    Check(
        cel=f"self.matches({cel_string(PARAMETER_KEY_PATTERN)})",
        check=lambda key: matches(PARAMETER_KEY_PATTERN, key),
        message="must be a parameter name: letters, digits and _ . -, starting with a letter, "
        "digit or _",
    ),
]


class Tensor(SpecModel):
    """An input or output of the model, as declared in Triton's model config."""

    name: TensorName = Field(description="The tensor's name: letters, digits and _ . : / -.")
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
    latest: int | None = Field(
        default=None, ge=1, le=100, description="For Latest: how many versions (unset: 1)."
    )
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
        # A field of another policy would be silently ignored.
        Rule(
            cel="self.policy == 'Specific' || !has(self.versions) || size(self.versions) == 0",
            check=lambda v: v.policy == "Specific" or not v.versions,
            message="versions applies only to policy Specific",
            field=".versions",
        ),
        # latest: 1 was the default once, so every stored All or Specific policy has it;
        # it is tolerated (it is what an unset latest means) so those are still read.
        Rule(
            cel="self.policy == 'Latest' || !has(self.latest) || self.latest == 1",
            check=lambda v: v.policy == "Latest" or v.latest in (None, 1),
            message="latest applies only to policy Latest",
            field=".latest",
        ),
    )


class Warmup(SpecModel):
    """Requests Triton runs through the model before it reports ready."""

    batch_sizes: list[Annotated[int, Field(ge=1, le=MAX_BATCH)]] = Field(
        default_factory=lambda: [1],
        min_length=1,
        max_length=8,
        description="One warm-up request per batch size.",
        # pydantic leaves a default_factory out of the schema: the server must default it.
        json_schema_extra={"default": [1]},
    )
    data: Literal["Zero", "Random"] = Field(
        default="Zero", description="Fill the warm-up inputs with zeros or random data."
    )


S3_REGION_PATTERN = r"^[a-z0-9]([-_a-z0-9]*[a-z0-9])?$"
S3Region = Annotated[
    str,
    TextFormat(
        S3_REGION_PATTERN,
        "a region name such as us-east-1: lowercase letters, digits, '-' and '_'",
        max_length=63,
        example="us-east-1",
    ),
]
# The keys of a credentials Secret: the names every S3 client reads from its environment.
S3_ACCESS_KEY = "AWS_ACCESS_KEY_ID"
S3_SECRET_KEY = "AWS_SECRET_ACCESS_KEY"


class S3Storage(SpecModel):
    """How to reach an s3:// storage URI's store when it is not AWS S3 reached with the
    pods' cloud identity: an S3-compatible endpoint (MinIO, Ceph RGW, ...) and keys."""

    endpoint: S3Endpoint | None = Field(
        default=None,
        description="The store's endpoint, e.g. http://minio.storage.svc:9000. Unset: AWS "
        "S3. A store in the cluster or outside port 443 must also be reachable under the "
        "pool's spec.access.modelDownload (extraDestinations).",
    )
    region: S3Region | None = Field(
        default=None, description="The bucket's region. Unset: the store's default."
    )
    path_style: bool = Field(
        default=True,
        description="Address buckets by path (http://host/bucket/key), as MinIO and Ceph "
        "RGW expect; false: by host name (http://bucket.host/key).",
    )
    credentials_secret: DnsSubdomain | None = Field(
        default=None,
        description=f"A Secret in the model's namespace with the keys {S3_ACCESS_KEY} and "
        f"{S3_SECRET_KEY}; the fetch container reads them from its environment, never "
        "from its arguments. Unset: the pods' cloud identity (IRSA, ...) or no "
        "credentials.",
    )


# The model's files' size: a whole number of bytes with an optional suffix, so that CEL
# can compare it as a quantity (a schema that also took numbers could not be typed).
MODEL_SIZE_MIN, MODEL_SIZE_MAX = "1Mi", "1Pi"
ModelSize = Annotated[
    str, byte_size_format("12Gi"), byte_size_bounds(MODEL_SIZE_MIN, MODEL_SIZE_MAX)
]
# A ConfigMap's key, as the API server checks one (IsConfigMapKey).
ConfigMapKey = Annotated[
    str,
    TextFormat(
        r"^[-._a-zA-Z0-9]+$",
        "a ConfigMap key: letters, digits, '-', '_' and '.'",
        min_length=1,
        max_length=253,
    ),
    Check(
        cel="self != '.' && !self.startsWith('..')",
        check=lambda key: key != "." and not key.startswith(".."),
        message="must not be '.' nor start with '..'",
    ),
]
CA_BUNDLE_KEY = "ca.crt"


class CaBundle(SpecModel):
    """The certificates that the model's downloads trust: a key of a ConfigMap in the
    model's namespace (such as one trust-manager writes), mounted into the fetch
    container and handed to rclone (--ca-cert)."""

    name: DnsSubdomain = Field(description="The ConfigMap, in the model's namespace.")
    key: ConfigMapKey = Field(
        default=CA_BUNDLE_KEY,
        description="Its key holding the PEM certificates. Unset: ca.crt.",
    )


def _not_for_vllm(cel: str, check: Callable[[ModelSource], bool], message: str, field: str) -> Rule:
    """A rule on a field the vLLM backend has no use for: ``cel`` and ``check`` say the
    field is left as it is by default."""
    return Rule(
        cel=f"!has(self.backend) || self.backend != 'vllm' || {cel}",
        check=lambda m: m.backend != "vllm" or check(m),
        message=message,
        field=field,
    )


# What Triton's vLLM backend takes is fixed by the backend (docs/backends.md): the
# operator renders it whole, so a field that would change it is refused, not ignored.
_VLLM_MODEL_RULES = (
    _not_for_vllm(
        "!has(self.inputs) || size(self.inputs) == 0",
        lambda m: not m.inputs,
        "inputs do not apply to backend vllm: the operator declares the tensors its "
        "backend takes (text_input, stream, sampling_parameters, exclude_input_in_output)",
        ".inputs",
    ),
    _not_for_vllm(
        "!has(self.outputs) || size(self.outputs) == 0",
        lambda m: not m.outputs,
        "outputs do not apply to backend vllm: the operator declares the tensor its "
        "backend returns (text_output)",
        ".outputs",
    ),
    _not_for_vllm(
        "!has(self.warmup)",
        lambda m: m.warmup is None,
        "warmup does not apply to backend vllm: a zero or random prompt warms nothing, "
        "and the engine captures its CUDA graphs as it loads",
        ".warmup",
    ),
    _not_for_vllm(
        "!has(self.responseCache) || !self.responseCache",
        lambda m: not m.response_cache,
        "responseCache does not apply to backend vllm: Triton caches no responses of a "
        "decoupled (streaming) model",
        ".responseCache",
    ),
    _not_for_vllm(
        "!has(self.instances) || self.instances == 1",
        lambda m: m.instances == 1,
        "instances must be 1 for backend vllm: one engine per replica batches all of its "
        "requests and takes its GPUs' memory; add replicas instead",
        ".instances",
    ),
)


def _tensors_required(runners: tuple[str, ...], why: str) -> tuple[Rule, Rule]:
    """Rules refusing a model of ``runners`` without inputs, and without outputs: Triton
    cannot complete them from its files (``why``), and its backend loads no model
    without them."""
    backends = [r for r in runners if r in get_args(Backend)]
    platforms = [r for r in runners if r in get_args(Platform)]
    runs = " || ".join(
        [f"(has(self.backend) && self.backend == '{b}')" for b in backends]
        + [f"(has(self.platform) && self.platform == '{p}')" for p in platforms]
    )
    names = " and ".join([f"backend {b}" for b in backends] + [f"platform {p}" for p in platforms])

    def rule(field: str) -> Rule:
        return Rule(
            cel=f"!({runs}) || (has(self.{field}) && size(self.{field}) > 0)",
            check=lambda m: m.runner not in runners or bool(getattr(m, field)),
            message=f"{field} are required for {names}: {why}",
            field=f".{field}",
        )

    return rule("inputs"), rule("outputs")


# The runners whose backend cannot read a model's tensors (docs/backends.md): a model
# must declare them, or Triton would not load it.
_TENSORS_REQUIRED_RULES = (
    # pytorch_backend r24.10 src/libtorch.cc: auto-complete "not supported", and a
    # model's config must have at least one input and one output.
    *_tensors_required(
        ("pytorch", "pytorch_libtorch"), "Triton cannot read a TorchScript model's tensors"
    ),
    # Built on rapids-triton, which has no auto-complete; it reads input__0 and output__0.
    *_tensors_required(
        ("fil",),
        "Triton cannot read a tree model's tensors (input__0, FP32, one dimension per "
        "feature; output__0)",
    ),
    # tensorflow_backend r24.10: a SavedModel's signature is read, a GraphDef's cannot be;
    # backend tensorflow finds its platform from the files, so it may be either.
    *_tensors_required(
        ("tensorflow", "tensorflow_graphdef"),
        "Triton cannot read a GraphDef's tensors; for a SavedModel, set platform "
        "tensorflow_savedmodel instead to have them read from it",
    ),
)


class ModelSource(SpecModel):
    """The model: its name in Triton, how it runs, and where its files are."""

    name: ModelName = Field(
        description="The model's name in Triton (its directory in the model repository)."
    )
    backend: Backend | None = Field(
        default=None,
        description="The Triton backend that runs it, e.g. onnxruntime, python or vllm "
        "(tensorrtllm is refused: not supported yet).",
    )
    platform: Platform | None = Field(
        default=None, description="Alternatively, the Triton platform, e.g. tensorrt_plan."
    )
    storage_uri: StorageUri = Field(
        description="Where the model's version directories are: s3://bucket/path, "
        "gs://bucket/path, pvc://claim-name/path (served from the claim, read-only), an "
        "https:// directory listing, or an https:// archive ending in "
        f"{ARCHIVE_WORDS} that holds them at its root.",
    )
    s3: S3Storage | None = Field(
        default=None,
        description="For an s3:// storageUri: the S3-compatible store and the Secret "
        "holding its keys. Unset: AWS S3 with the pods' cloud identity.",
    )
    size: ModelSize | None = Field(
        default=None,
        description="The model's files' total size (an archive's unpacked), e.g. 12Gi, "
        f"from {MODEL_SIZE_MIN} to {MODEL_SIZE_MAX}. Each replica's copy then has that room "
        "reserved and no more: its emptyDir is limited to it plus a 5% margin (at least "
        "64Mi), twice that for an archive, which is downloaded beside its files; the "
        "fetch and Triton containers request it as ephemeral-storage, so the scheduler "
        "places replicas on nodes with the disk for them. Unset: the copy is unbounded "
        "and unrequested, and a large model can fill a node's disk. Refused for pvc://, "
        "which is not copied.",
    )
    ca_bundle: CaBundle | None = Field(
        default=None,
        description="Certificates the download trusts, instead of the fetch image's own: "
        "for a store or https:// server with a private CA, or a TLS-inspecting proxy. "
        "They replace the public CAs, so list every CA the download meets. Refused for "
        "pvc://, which is not downloaded.",
    )
    version_policy: VersionPolicy = Field(
        default_factory=VersionPolicy, description="Which versions Triton serves."
    )
    inputs: Annotated[list[Tensor], unique_by("name")] = Field(
        default_factory=list,
        max_length=64,
        description="Input tensors, as the model has them; Triton checks them against "
        "the model's files as it loads. Left out (with outputs, or either of them), "
        "Triton reads them from the files: for python (its auto_complete_config), "
        "onnxruntime, tensorrt, openvino and platform tensorflow_savedmodel. Required for "
        "pytorch, fil, tensorflow and tensorflow_graphdef. Refused for vllm, whose own "
        "the operator declares.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    outputs: Annotated[list[Tensor], unique_by("name")] = Field(
        default_factory=list,
        max_length=64,
        description="Output tensors, as the model has them (see inputs).",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    instances: int = Field(
        default=1, ge=1, le=64, description="Model instances per replica (per GPU)."
    )
    warmup: Warmup | None = Field(default=None, description="Warm-up before ready.")
    response_cache: bool = Field(
        default=False, description="Cache responses to identical requests in Triton."
    )
    parameters: dict[ParameterKey, Annotated[str, Field(max_length=4096)]] = Field(
        default_factory=dict,
        max_length=128,
        description="Backend parameters, passed to the model config's parameters as strings.",
    )

    @property
    def runner(self) -> str:
        """The backend, or else the platform (the API takes exactly one)."""
        return self.backend or self.platform or ""

    rules = (
        *_VLLM_MODEL_RULES,
        *_TENSORS_REQUIRED_RULES,
        Rule(
            cel="!has(self.backend) || self.backend != 'tensorrtllm'",
            check=lambda m: m.backend != "tensorrtllm",
            message="backend tensorrtllm is not supported: the operator cannot yet render a "
            "TensorRT-LLM model Triton loads (an engine directory per version, a launch "
            "under MPI for more than one GPU, tokenizer models around it); serve LLMs "
            "with backend vllm",
            field=".backend",
        ),
        Rule(
            cel="!has(self.inputs) || !has(self.outputs) || "
            "self.inputs.all(i, !self.outputs.exists(o, o.name == i.name))",
            check=lambda m: not {t.name for t in m.inputs} & {t.name for t in m.outputs},
            message="an output may not have the name of an input: Triton needs every tensor "
            "name once",
            field=".outputs",
        ),
        Rule(
            cel="!has(self.s3) || self.storageUri.startsWith('s3://')",
            check=lambda m: m.s3 is None or m.storage_uri.startswith("s3://"),
            message="s3 applies to an s3:// storageUri only",
            field=".s3",
        ),
        Rule(
            cel="!has(self.size) || !self.storageUri.startsWith('pvc://')",
            check=lambda m: m.size is None or not m.storage_uri.startswith("pvc://"),
            message="size applies to a copied model (s3://, gs://, https://): a pvc:// "
            "model is read from its claim, not copied into the pod",
            field=".size",
        ),
        Rule(
            cel="!has(self.caBundle) || !self.storageUri.startsWith('pvc://')",
            check=lambda m: m.ca_bundle is None or not m.storage_uri.startswith("pvc://"),
            message="caBundle applies to a downloaded model (s3://, gs://, https://): a "
            "pvc:// model is read from its claim",
            field=".caBundle",
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
CacheSize = Annotated[
    str,
    TextFormat(
        CACHE_SIZE_PATTERN,
        "a whole number of bytes with an optional suffix, such as 512Mi",
        max_length=15,
        example="512Mi",
    ),
]


StartupTimeout = Annotated[str, DurationFormat("10s", "24h", example="10m")]


class Runtime(SpecModel):
    """The Triton server each replica runs."""

    image: ImageReference | None = Field(
        default=None,
        description="The Triton Inference Server image. Unset: the operator's default "
        f"(its setting tritonImage; {DEFAULT_TRITON_IMAGE} unless changed), or for "
        f"backend vllm its setting tritonVllmImage ({DEFAULT_TRITON_VLLM_IMAGE} unless "
        "changed): the general image has no vLLM.",
    )
    image_pull_policy: Literal["Always", "IfNotPresent", "Never"] = Field(
        default="IfNotPresent", description="When the kubelet pulls the image."
    )
    startup_timeout: StartupTimeout = Field(
        default="10m",
        description="How long a replica may take from Triton's start to the model loaded "
        "(rounded up to 10 s); a replica still loading then is restarted. Copying the "
        "model's files before Triton starts does not count.",
    )
    gpus: int = Field(default=1, ge=0, le=16, description="nvidia.com/gpu per replica.")
    cpu: ResourceQuantity = Field(default="2", description="CPU requested per replica.")
    cpu_limit: ResourceQuantity | None = Field(
        default=None,
        description="The most CPU Triton's container may use, at least cpu. Unset: no limit. "
        "The API server cannot compare the two (cpu also takes numbers): a model whose "
        "cpuLimit is below its cpu is refused by the operator: Ready=False and Stalled=True, "
        "reason InvalidResources.",
    )
    memory: ResourceQuantity = Field(default="8Gi", description="Memory requested per replica.")
    shm_size: Quantity = Field(
        default="1Gi", description="Size of /dev/shm (Python backend and large tensors use it)."
    )
    service_account_name: DnsSubdomain | None = Field(
        default=None,
        description="The ServiceAccount the replicas run as, in the model's namespace: one "
        "bound to a cloud identity (IRSA, Workload Identity) that may read the model's "
        "storage. Unset: the namespace's default. No API token is mounted either way.",
    )
    image_pull_secrets: PullSecrets | None = Field(
        default=None,
        description="Secrets in the model's namespace for pulling the Triton and model-fetch "
        "images from a private registry, as a pod spec names them: [{name: mirror}].",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    response_cache_size: CacheSize | None = Field(
        default=None,
        description="Memory for Triton's response cache, in bytes with an optional suffix, "
        f"e.g. 512Mi; from {CACHE_SIZE_MIN} to {CACHE_SIZE_MAX}. Added to memory in the "
        "replica's request and limit. Used only when model.responseCache is true. Unset: "
        "256Mi.",
    )
    pod_labels: PodLabels | None = Field(
        default=None,
        description="More labels on the replicas' pods (cost allocation, a mesh's "
        "selectors); none of those Shoal sets.",
    )
    pod_annotations: PodAnnotations | None = Field(
        default=None, description="More annotations on the replicas' pods."
    )
    env: EnvList | None = Field(
        default=None,
        description="More environment variables of Triton's container: a value, or a key "
        "of a Secret or ConfigMap in the model's namespace.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    env_from: EnvFromList | None = Field(
        default=None,
        description="Every key of these Secrets and ConfigMaps, as environment variables of "
        "Triton's container.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    extra_args: TritonArgs | None = Field(
        default=None,
        description="More tritonserver flags, after Shoal's, such as --log-verbose=1 or "
        "--backend-config=python,shm-default-byte-size=16777216; none Shoal sets.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    volumes: ExtraVolumes | None = Field(
        default=None,
        description="Volumes mounted into Triton's container: ConfigMaps, Secrets, claims "
        "or scratch space.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    affinity: Affinity | None = Field(
        default=None,
        description="The replicas' affinity to nodes and to other pods, as a Pod's "
        "spec.affinity. The scheduler requires it and the pool's placement (nodeSelector, "
        "gpuProduct, tolerations) both.",
    )
    topology_spread_constraints: SpreadConstraints | None = Field(
        default=None,
        description="How the replicas spread over nodes or zones, in place of Shoal's: a "
        "constraint without labelSelector counts the model's own replicas. [] spreads them "
        "by no rule. Unset: at most one more replica on a node than on another where "
        "possible (maxSkew 1 on kubernetes.io/hostname, ScheduleAnyway).",
        json_schema_extra=SPREAD_LIST_TYPE,
    )

    rules = (
        Rule(
            cel="!has(self.volumes) || "
            "self.volumes.all(v, self.volumes.exists_one(w, w.mountPath == v.mountPath))",
            check=lambda r: (
                r.volumes is None or len({v.mount_path for v in r.volumes}) == len(r.volumes)
            ),
            message="volumes must each have their own mountPath",
            field=".volumes",
        ),
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
    )


# The HorizontalPodAutoscaler takes at most 3600 s.
StabilizationWindow = Annotated[str, DurationFormat("0s", "1h", example="5m")]
# The P95 target becomes a quantity in milliseconds that must be positive.
LatencyTarget = Annotated[str, DurationFormat("1ms", "1h", example="200ms")]


class ScalingPolicy(SpecModel):
    """How fast the replica count may change in one direction."""

    stabilization_window: StabilizationWindow = Field(
        description="How long the autoscaler looks back before changing replicas in this "
        "direction; for scale-down this is the cool-down."
    )
    max_replicas_per_step: int | None = Field(
        default=None,
        ge=1,
        le=1000,
        description="Most replicas added or removed per 15 s; unset: no limit.",
    )


class Schedule(Window):
    """A time window with a higher warm-pool floor, for known peaks."""

    min_replicas: int = Field(ge=1, le=1000, description="The warm-pool floor while open.")


class Predictive(SpecModel):
    """Scaling ahead of demand, from what the operator measures of the model.

    The operator forecasts the model's arrival rate one cold start plus the metric lag
    ahead, adds the largest amount its forecasts of the last hours fell short by (their
    0.99 quantile), divides by what one replica sustains (measured from Triton's own
    counters) and publishes the replicas that needs; the HPA scales on that beside the
    reactive metrics, which stay as a safety net."""

    enabled: bool = Field(
        description="Whether the operator scales the model ahead of demand. Required, so "
        "the object is never empty: server-side apply turns a changed-to-empty object into "
        "null, which the API server then refuses.",
    )
    headroom_percent: int = Field(
        default=0,
        ge=0,
        le=400,
        description="Capacity kept beyond the forecast and its learned error, in percent "
        "of them (the forecast already covers its own past misses).",
    )
    warm_pool: bool = Field(
        default=False,
        description="Size the warm pool from what the forecast has missed by within one "
        "cold start: minReplicas rises to the replicas that error needs (never below "
        "spec.scaling.minReplicas), so the capacity a surprise needs is already standing.",
    )


# minReplicas <= maxReplicas, of the model's own replicas and of its overflow's.
ORDERED_REPLICAS = Rule(
    # has(): a null (refused by its own rule) must not make this one fail to run.
    cel="!has(self.minReplicas) || !has(self.maxReplicas) || self.minReplicas <= self.maxReplicas",
    check=lambda s: s.min_replicas <= s.max_replicas,
    message="minReplicas must not exceed maxReplicas",
    field=".minReplicas",
)


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
    target_p95_latency: LatencyTarget | None = Field(
        default=None,
        description="P95 request latency to aim for, e.g. 200ms (the autoscaler works in "
        "whole milliseconds: a sub-millisecond part is dropped).",
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
    predictive: Predictive | None = Field(
        default=None,
        description="Scale ahead of demand: forecast arrivals divided by the measured "
        "capacity of a replica (needs the operator's Prometheus, and Prometheus scraping "
        "the operator). Unset: reactive only.",
    )
    schedules: Annotated[list[Schedule], unique_by("name")] = Field(
        default_factory=list,
        max_length=16,
        description="Windows that raise minReplicas ahead of known peaks.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    rules = (
        ORDERED_REPLICAS,
        Rule(
            cel="!has(self.schedules) || !has(self.maxReplicas) || "
            "self.schedules.all(w, w.minReplicas <= self.maxReplicas)",
            check=lambda s: all(w.min_replicas <= s.max_replicas for w in s.schedules),
            message="a schedule's minReplicas must not exceed maxReplicas",
            field=".schedules",
        ),
    )


# An HTTP header name: letters, digits and '-' (of RFC 9110's token, what headers use).
HeaderName = Annotated[
    str,
    TextFormat(
        r"^([A-Za-z0-9][A-Za-z0-9-]*)$",
        "an HTTP header name of letters, digits and '-', such as X-Session-ID",
        max_length=64,
        example="X-Session-ID",
    ),
]
RequestTimeout = Annotated[str, DurationFormat("1ms", "1h", example="60s")]


class Routing(SpecModel):
    """How the pool's gateway sends the model's requests to its replicas."""

    timeout: RequestTimeout = Field(
        default="60s",
        description="A request still running after this gets 504 from the gateway, and "
        "its slot is freed.",
    )
    sticky_header: HeaderName | None = Field(
        default=None,
        description="A request header whose value keeps a client on one replica (e.g. a "
        "session id); unset: the least busy ready replica.",
    )


class Overflow(SpecModel):
    """A second, small Deployment of the model in another pool, for the requests its own
    replicas have no slot for."""

    pool: PoolName = Field(
        description="A TenantPool other than spec.pool that also admits the model's "
        "namespace. The overflow replicas run on its GPUs, under its quota and its "
        "network policies; the model's own pool's gateway sends them the requests that "
        "find every one of the model's replicas busy."
    )
    min_replicas: int = Field(
        default=1,
        ge=1,
        le=1000,
        description="Overflow replicas kept running, even idle, so a spill is served at once.",
    )
    max_replicas: int = Field(
        default=2,
        ge=1,
        le=1000,
        description="Most overflow replicas. They scale on their own queue depth: the load "
        "the spill brings them.",
    )

    rules = (ORDERED_REPLICAS,)


# runtime.gpus, as its default when unset (or null, which its own rule refuses).
_CEL_GPUS = (
    "(has(self.runtime) && has(self.runtime.gpus) ? self.runtime.gpus : "
    f"{Runtime.model_fields['gpus'].default})"
)


class InferenceModelSpec(SpecModel):
    """One model, served by Triton, in one TenantPool."""

    pool: PoolName = Field(description="The TenantPool the model runs in.")
    batch_policy: BatchPolicyRef | None = Field(
        default=None,
        description="The BatchPolicy that gathers requests, with per-model overrides. "
        "Unset: the defaults of a BatchPolicy with an empty spec.",
    )
    model: ModelSource = Field(description="The model and where its files are.")
    runtime: Runtime = Field(default_factory=Runtime, description="The Triton server.")
    scaling: Scaling = Field(default_factory=Scaling, description="Autoscaling and warm pool.")
    routing: Routing = Field(default_factory=Routing, description="Routing at the gateway.")
    overflow: Overflow | None = Field(
        default=None,
        description="Requests beyond the model's replicas go to a few replicas in another "
        "pool instead of waiting (needs the gateway of spec.pool). Unset: they wait in the "
        "gateway's queue.",
    )

    rules = (
        Rule(
            cel="!has(self.model.backend) || self.model.backend != 'vllm' || "
            "!has(self.batchPolicy)",
            check=lambda s: s.model.backend != "vllm" or s.batch_policy is None,
            message="batchPolicy does not apply to backend vllm: the vLLM engine batches "
            "requests itself (max_num_seqs in its model.json)",
            field=".batchPolicy",
        ),
        Rule(
            cel=f"!has(self.model.backend) || self.model.backend != 'vllm' || {_CEL_GPUS} >= 1",
            check=lambda s: s.model.backend != "vllm" or s.runtime.gpus >= 1,
            message="runtime.gpus must be at least 1 for backend vllm: the vLLM engine runs "
            "on GPUs",
            field=".runtime.gpus",
        ),
        Rule(
            cel="!((has(self.model.backend) && self.model.backend == 'tensorrt') || "
            "(has(self.model.platform) && self.model.platform == 'tensorrt_plan')) || "
            f"{_CEL_GPUS} >= 1",
            check=lambda s: (
                (s.model.backend != "tensorrt" and s.model.platform != "tensorrt_plan")
                or s.runtime.gpus >= 1
            ),
            message="runtime.gpus must be at least 1 for backend tensorrt and platform "
            "tensorrt_plan: Triton's TensorRT backend runs on GPUs only",
            field=".runtime.gpus",
        ),
        Rule(
            cel=f"!has(self.model.backend) || self.model.backend != 'openvino' || {_CEL_GPUS} == 0",
            check=lambda s: s.model.backend != "openvino" or s.runtime.gpus == 0,
            message="runtime.gpus must be 0 for backend openvino: Triton's OpenVINO backend "
            "runs on CPUs only",
            field=".runtime.gpus",
        ),
        Rule(
            cel="!has(self.overflow) || !has(self.overflow.pool) || "
            "self.overflow.pool != self.pool",
            check=lambda s: s.overflow is None or s.overflow.pool != s.pool,
            message="overflow.pool must name a pool other than spec.pool",
            field=".overflow.pool",
        ),
        # Where the model alone decides its maxBatchSize (an override, or no BatchPolicy
        # and so the default), a larger warm-up batch would never load in Triton. With a
        # BatchPolicy and no override, the operator checks it (InvalidBatching).
        Rule(
            cel="!has(self.model.warmup) || !has(self.model.warmup.batchSizes) || "
            "(has(self.batchPolicy) ? (!has(self.batchPolicy.maxBatchSize) || "
            "self.model.warmup.batchSizes.all(b, b <= self.batchPolicy.maxBatchSize)) : "
            f"self.model.warmup.batchSizes.all(b, b <= {DEFAULT_MAX_BATCH}))",
            check=lambda s: (
                s.model.warmup is None
                or all(b <= _own_max_batch(s) for b in s.model.warmup.batch_sizes)
            ),
            message="warm-up batch sizes must be at most the model's maxBatchSize (the "
            f"batchPolicy override, or {DEFAULT_MAX_BATCH} without a batchPolicy)",
            field=".model.warmup.batchSizes",
        ),
    )


def _own_max_batch(spec: InferenceModelSpec) -> int:
    """The maxBatchSize the model itself fixes; MAX_BATCH where its BatchPolicy decides."""
    if spec.batch_policy is None:
        return DEFAULT_MAX_BATCH
    return spec.batch_policy.max_batch_size or MAX_BATCH


class Endpoints(SpecModel):
    """Where clients reach the model inside the cluster."""

    gateway: str | None = Field(
        default=None,
        description="The model's KServe v2 HTTP URL through its pool's gateway, where "
        "tenants call it (with a ServiceAccount token for the gateway's audience).",
    )
    gateway_grpc: str | None = Field(
        default=None, description="The pool gateway's gRPC endpoint, for this model."
    )
    http: str | None = Field(
        default=None, description="The model's own Service, HTTP (the gateway's way in)."
    )
    grpc: str | None = Field(default=None, description="The model's own Service, gRPC.")


class OverflowStatus(SpecModel):
    """The overflow replicas, as their Deployment reports them."""

    pool: str = Field(description="The pool they run in.")
    replicas: int = Field(default=0, ge=0, description="Overflow replicas that exist.")
    ready_replicas: int = Field(
        default=0, ge=0, description="Overflow replicas ready to take spilled requests."
    )


class InferenceModelStatus(SpecModel):
    """What the operator observed about the model."""

    observed_generation: int | None = Field(
        default=None, ge=0, description="The .metadata.generation last acted upon."
    )
    conditions: Conditions = conditions_field()
    replicas: int | None = Field(default=None, ge=0, description="Replicas that exist.")
    ready_replicas: int | None = Field(default=None, ge=0, description="Replicas ready to serve.")
    replica_states: dict[str, int] | None = Field(
        default=None,
        description="While not every replica serves: replicas per state (Pending, "
        "Fetching, Loading, Ready, FailedToFetch, FailedToLoad, or the kubelet's reason "
        "such as ImagePullBackOff). The Ready condition quotes the most telling one.",
    )
    queue_depth: float | None = Field(
        default=None, ge=0, description="Requests waiting, across replicas."
    )
    p95_latency: str | None = Field(default=None, description="P95 request latency, e.g. 12ms.")
    average_batch_size: float | None = Field(
        default=None, ge=0, description="Requests per execution."
    )
    request_rate: float | None = Field(default=None, ge=0, description="Requests per second.")
    batch_fill: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="How full batches run: averageBatchSize over the effective "
        "maxBatchSize, 0 to 1.",
    )
    p99_latency: str | None = Field(
        default=None, description="P99 request latency (the slowest replica's), e.g. 40ms."
    )
    mean_queue_time: str | None = Field(
        default=None, description="Mean time a request waited in Triton's queue, e.g. 3ms."
    )
    gpu_utilization: float | None = Field(
        default=None, ge=0, le=1, description="Mean utilisation of the model's GPUs, 0 to 1."
    )
    gpu_memory: str | None = Field(
        default=None, description="GPU memory the model's replicas hold, e.g. 20.5Gi."
    )
    gpu_seconds_per1k_requests: float | None = Field(
        default=None,
        ge=0,
        alias="gpuSecondsPer1kRequests",
        description="Cost per request: GPU-seconds held per 1,000 requests served.",
    )
    capacity_per_replica: float | None = Field(
        default=None,
        ge=0,
        description="Requests per second one replica sustains within the latency target, "
        "measured from Triton's counters (the last good estimate while traffic is low).",
    )
    cold_start: str | None = Field(
        default=None,
        description="How long the model's latest replicas took from created to Ready, e.g. "
        "45s (the median of the pods the operator saw start).",
    )
    forecast_rate: float | None = Field(
        default=None,
        ge=0,
        description="Arrivals per second the model is provisioned for one cold start plus "
        "the metric lag ahead: the forecast and its learned error (with "
        "spec.scaling.predictive).",
    )
    required_replicas: int | None = Field(
        default=None,
        ge=0,
        description="Replicas the forecast needs, as published to the autoscaler (with "
        "spec.scaling.predictive).",
    )
    endpoints: Endpoints | None = Field(default=None, description="Where clients reach the model.")
    warm_pool: int | None = Field(
        default=None,
        ge=0,
        description="The warm pool now: minReplicas, or more while a schedule is open or "
        "the predictive warm pool asks for more.",
    )
    open_schedules: list[str] = Field(
        default_factory=list, description="Scheduled windows open now."
    )
    overflow: OverflowStatus | None = Field(
        default=None, description="The overflow replicas (with spec.overflow)."
    )


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
