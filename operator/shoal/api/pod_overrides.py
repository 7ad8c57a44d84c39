"""What a model's owner may add to the pods Shoal renders: labels and annotations (cost
allocation, a mesh's selectors), environment (plain, or from Secrets and ConfigMaps),
more Triton arguments, and volumes mounted into Triton's container.

Each value is checked as the Pod API checks it, and nothing may replace what Shoal
itself sets: the labels NetworkPolicies and Services select on, the flags that make
Triton serve the rendered repository on Shoal's ports, the volumes and mount points
the model's files come through. The reserved names are listed here, beside the API;
a unit test renders models of every shape and fails when Shoal sets a name that is
not reserved, so a new one cannot slip past the refusal.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from shoal.api.common import (
    Check,
    DnsLabel,
    DnsSubdomain,
    LabelKey,
    LabelValue,
    Quantity,
    Rule,
    SpecModel,
    TextFormat,
    cel_string,
    matches,
    unique_by,
)
from shoal.api.constants import GROUP, KUEUE_GROUP

# Label prefixes and keys Shoal's pods carry: Services, NetworkPolicies, the gateway,
# PodMonitors and Kueue select on them.
RESERVED_LABEL_PREFIXES = (f"{GROUP}/", f"{KUEUE_GROUP}/")
RESERVED_LABELS = (
    "app.kubernetes.io/name",
    "app.kubernetes.io/instance",
    "app.kubernetes.io/component",
    "app.kubernetes.io/managed-by",
)
RESERVED_ANNOTATION_PREFIXES = (f"{GROUP}/", f"{KUEUE_GROUP}/")
# Triton's flags Shoal sets or that would undo what it sets (the repository, the model
# control, the ports and listeners, readiness, metrics, shutdown and the cache).
RESERVED_TRITON_FLAGS = (
    "model-repository",
    "model-store",
    "model-control-mode",
    "load-model",
    "repository-poll-secs",
    "strict-model-config",
    "disable-auto-complete-config",
    "strict-readiness",
    "http-port",
    "grpc-port",
    "metrics-port",
    "http-address",
    "grpc-address",
    "metrics-address",
    "allow-http",
    "allow-grpc",
    "allow-metrics",
    "allow-gpu-metrics",
    "metrics-config",
    "exit-timeout-secs",
    "cache-config",
)
RESERVED_ENV = ("HOME",)
RESERVED_VOLUMES = ("model-repository", "model-config", "model-source", "model-ca", "dshm", "tmp")
# Where Shoal mounts into Triton's container; a volume may be mounted neither there,
# nor above (it would hide them) nor below (it would change the model's files).
RESERVED_MOUNT_PATHS = ("/models", "/dev/shm", "/tmp")

ENV_NAME_PATTERN = r"^[-._a-zA-Z][-._a-zA-Z0-9]*$"
EnvName = Annotated[
    str,
    TextFormat(
        ENV_NAME_PATTERN,
        "an environment variable name: letters, digits, '_', '-' and '.', not starting "
        "with a digit",
        min_length=1,
        max_length=256,
    ),
    Check(
        cel=f"!(self in {list(RESERVED_ENV)!r})",
        check=lambda name: name not in RESERVED_ENV,
        message=f"must not be one Shoal sets on Triton's container ({', '.join(RESERVED_ENV)})",
    ),
]
ConfigKey = Annotated[
    str,
    TextFormat(
        r"^[-._a-zA-Z0-9]+$",
        "a Secret or ConfigMap key: letters, digits, '-', '_' and '.'",
        min_length=1,
        max_length=253,
    ),
]
# An absolute path without '..' segments, ':' or a trailing '/': as a container's
# mountPath must be, and comparable with the reserved ones as text.
_MOUNT_PATH = r"^(/[^/:\x00]+)+$"
_RELATIVE_PATH = r"^[^/:\x00]+(/[^/:\x00]+)*$"


def _clashes(path: str) -> bool:
    return any(
        path == reserved or reserved.startswith(f"{path}/") or path.startswith(f"{reserved}/")
        for reserved in RESERVED_MOUNT_PATHS
    )


def _no_dot_dot(path: str) -> bool:
    return ".." not in path.split("/")


_CLASH_CEL = " || ".join(
    f"self == '{p}' || '{p}'.startsWith(self + '/') || self.startsWith('{p}/')"
    for p in RESERVED_MOUNT_PATHS
)
MountPath = Annotated[
    str,
    TextFormat(
        _MOUNT_PATH,
        "an absolute path such as /etc/triton/extra, without ':' or a trailing '/'",
        min_length=2,
        max_length=1024,
    ),
    Check(
        cel="!self.split('/').exists(part, part == '..')",
        check=_no_dot_dot,
        message="must not contain '..'",
    ),
    Check(
        cel=f"!({_CLASH_CEL})",
        check=lambda path: not _clashes(path),
        message="must be apart from where Shoal mounts the model's files, shared memory and "
        f"scratch space ({', '.join(RESERVED_MOUNT_PATHS)}): not one of them, above or "
        "below one",
    ),
]
SubPath = Annotated[
    str,
    TextFormat(
        _RELATIVE_PATH,
        "a relative path inside the volume, such as conf/server.json",
        min_length=1,
        max_length=1024,
    ),
    Check(
        cel="!self.split('/').exists(part, part == '..')",
        check=_no_dot_dot,
        message="must not contain '..'",
    ),
]

_FLAG_NAMES = "|".join(RESERVED_TRITON_FLAGS)
_ARG_PATTERN = r"^--[a-z][a-z0-9-]*(=.*)?$"
TritonArg = Annotated[
    str,
    TextFormat(
        _ARG_PATTERN,
        "a Triton flag written --name or --name=value, such as --log-verbose=1",
        min_length=3,
        max_length=1024,
    ),
    Check(
        cel=f"!self.matches({cel_string(f'^--({_FLAG_NAMES})(=|$)')})",
        check=lambda arg: not matches(rf"^--({_FLAG_NAMES})(=.*)?", arg),
        message="must not be a flag Shoal sets: the repository, model control, ports, "
        "listeners, readiness, metrics, exit timeout and cache are rendered from the spec",
    ),
]
PodLabelKey = Annotated[
    LabelKey,
    Check(
        cel=f"!(self in {list(RESERVED_LABELS)!r}) && "
        + " && ".join(f"!self.startsWith('{p}')" for p in RESERVED_LABEL_PREFIXES),
        check=lambda key: (
            key not in RESERVED_LABELS and not key.startswith(RESERVED_LABEL_PREFIXES)
        ),
        message="must not be a label Shoal sets on the model's pods "
        f"({', '.join(RESERVED_LABELS)}, or one under {', '.join(RESERVED_LABEL_PREFIXES)}): "
        "Services, NetworkPolicies and the gateway select on them",
    ),
]
PodAnnotationKey = Annotated[
    LabelKey,
    Check(
        cel=" && ".join(f"!self.startsWith('{p}')" for p in RESERVED_ANNOTATION_PREFIXES),
        check=lambda key: not key.startswith(RESERVED_ANNOTATION_PREFIXES),
        message="must not be under a prefix Shoal or Kueue annotates the pods with "
        f"({', '.join(RESERVED_ANNOTATION_PREFIXES)})",
    ),
]


class KeyReference(SpecModel):
    """One key of a Secret or ConfigMap in the model's namespace."""

    name: DnsSubdomain = Field(description="The Secret's or ConfigMap's name.")
    key: ConfigKey = Field(description="The key whose value becomes the variable's.")
    optional: bool | None = Field(
        default=None,
        description="Start the container even when the object or key is missing. Unset: "
        "the container waits for it (CreateContainerConfigError).",
    )


class EnvVarSource(SpecModel):
    """Where a variable's value comes from: a Secret's key or a ConfigMap's."""

    secret_key_ref: KeyReference | None = Field(default=None, description="A Secret's key.")
    config_map_key_ref: KeyReference | None = Field(default=None, description="A ConfigMap's key.")

    rules = (
        Rule(
            cel="has(self.secretKeyRef) != has(self.configMapKeyRef)",
            check=lambda s: (s.secret_key_ref is None) != (s.config_map_key_ref is None),
            message="exactly one of secretKeyRef and configMapKeyRef must be set",
        ),
    )


class EnvVar(SpecModel):
    """An environment variable of Triton's container."""

    name: EnvName = Field(description="The variable's name.")
    value: Annotated[str, Field(max_length=32768)] | None = Field(
        default=None, description="Its value."
    )
    value_from: EnvVarSource | None = Field(
        default=None, description="Or where its value comes from."
    )

    rules = (
        Rule(
            cel="has(self.value) != has(self.valueFrom)",
            check=lambda e: (e.value is None) != (e.value_from is None),
            message="exactly one of value and valueFrom must be set",
        ),
    )


class ObjectReference(SpecModel):
    """A Secret or ConfigMap in the model's namespace, all of whose keys become
    variables."""

    name: DnsSubdomain = Field(description="Its name.")
    optional: bool | None = Field(
        default=None, description="Start the container even when it is missing."
    )


class EnvFromSource(SpecModel):
    """Every key of a Secret or ConfigMap, as environment variables."""

    prefix: (
        Annotated[
            str,
            TextFormat(
                r"^[-._a-zA-Z][-._a-zA-Z0-9]*$",
                "a prefix of environment variable names: letters, digits, '_', '-' and "
                "'.', not starting with a digit",
                min_length=1,
                max_length=128,
            ),
        ]
        | None
    ) = Field(default=None, description="Put before every key's name.")
    secret_ref: ObjectReference | None = Field(default=None, description="A Secret.")
    config_map_ref: ObjectReference | None = Field(default=None, description="A ConfigMap.")

    rules = (
        Rule(
            cel="has(self.secretRef) != has(self.configMapRef)",
            check=lambda s: (s.secret_ref is None) != (s.config_map_ref is None),
            message="exactly one of secretRef and configMapRef must be set",
        ),
    )


class ConfigMapVolume(SpecModel):
    name: DnsSubdomain = Field(description="The ConfigMap, in the model's namespace.")


class SecretVolume(SpecModel):
    secret_name: DnsSubdomain = Field(description="The Secret, in the model's namespace.")


class ClaimVolume(SpecModel):
    claim_name: DnsSubdomain = Field(
        description="The PersistentVolumeClaim, in the model's namespace."
    )


class EmptyDirVolume(SpecModel):
    # Required: scratch space without a bound can fill the node's disk (and an empty
    # object here is one server-side apply turns into null when a field is removed).
    size_limit: Quantity = Field(description="The most it may hold, such as 1Gi.")
    medium: Annotated[str, TextFormat(r"^Memory$", "Memory (a tmpfs)", max_length=16)] | None = (
        Field(default=None, description="Memory: a tmpfs, counted against the container's memory.")
    )


class ExtraVolume(SpecModel):
    """A volume mounted into Triton's container: a ConfigMap, a Secret, a claim, or an
    empty directory."""

    name: DnsLabel = Field(description="The volume's name in the pod.")
    mount_path: MountPath = Field(description="Where Triton's container sees it.")
    sub_path: SubPath | None = Field(
        default=None, description="Mount only this path inside the volume."
    )
    read_only: bool | None = Field(
        default=None, description="Mount it read-only. Unset: read-only, but for emptyDir."
    )
    config_map: ConfigMapVolume | None = Field(
        default=None, description="A ConfigMap's keys as files."
    )
    secret: SecretVolume | None = Field(default=None, description="A Secret's keys as files.")
    persistent_volume_claim: ClaimVolume | None = Field(default=None, description="A claim.")
    empty_dir: EmptyDirVolume | None = Field(default=None, description="Scratch space.")

    rules = (
        Rule(
            cel="[has(self.configMap), has(self.secret), has(self.persistentVolumeClaim), "
            "has(self.emptyDir)].filter(x, x).size() == 1",
            check=lambda v: (
                sum(
                    source is not None
                    for source in (v.config_map, v.secret, v.persistent_volume_claim, v.empty_dir)
                )
                == 1
            ),
            message="exactly one of configMap, secret, persistentVolumeClaim and emptyDir "
            "must be set",
        ),
        Rule(
            cel=f"!(self.name in {list(RESERVED_VOLUMES)!r})",
            check=lambda v: v.name not in RESERVED_VOLUMES,
            message=f"must not be one of the volumes Shoal renders ({', '.join(RESERVED_VOLUMES)})",
            field=".name",
        ),
    )


class LocalObjectReference(SpecModel):
    """A Secret in the model's namespace, named as a pod spec names it."""

    name: DnsSubdomain = Field(description="The Secret's name.")


PullSecrets = Annotated[
    list[LocalObjectReference],
    unique_by("name"),
    Field(max_length=16),
]
PodLabels = Annotated[dict[PodLabelKey, LabelValue], Field(max_length=32)]
PodAnnotations = Annotated[
    dict[PodAnnotationKey, Annotated[str, Field(max_length=4096)]], Field(max_length=32)
]
EnvList = Annotated[list[EnvVar], unique_by("name"), Field(max_length=64)]
EnvFromList = Annotated[list[EnvFromSource], Field(max_length=16)]
TritonArgs = Annotated[list[TritonArg], Field(max_length=32)]
ExtraVolumes = Annotated[list[ExtraVolume], unique_by("name"), Field(max_length=16)]
