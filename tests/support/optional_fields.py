"""Every optional field of the three kinds, with a value to set it to.

``optional_paths`` walks the pydantic models (the single source of the CRDs) and lists
every field a user may leave out; ``CASES`` gives each one a valid value other than its
default, and what else must be set for that value to be valid. A unit test fails when a
field has no case, so a new field cannot skip the set/unset convergence test.

Paths are camelCase below ``spec``; ``a[]`` stands for every item of list ``a``, and
the case then says which list to put the item into.
"""

from __future__ import annotations

import copy
import types
import typing
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.inferencemodel import InferenceModelSpec
from shoal.api.tenantpool import TenantPoolSpec

SPECS: dict[str, type[BaseModel]] = {
    "InferenceModel": InferenceModelSpec,
    "TenantPool": TenantPoolSpec,
    "BatchPolicy": BatchPolicySpec,
}


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds directly (X, X | None)."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _models_in(arg)]
    if origin is typing.Annotated:
        return _models_in(typing.get_args(annotation)[0])
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    return []


def _list_item_models(annotation: Any) -> list[type[BaseModel]]:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _list_item_models(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return [m for arg in typing.get_args(annotation) for m in _list_item_models(arg)]
    if origin is list:
        return _models_in(typing.get_args(annotation)[0])
    return []


def optional_paths(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every field of ``model`` (and of the objects and list items inside it) that a
    user may leave out."""
    out: set[str] = set()
    for name, info in model.model_fields.items():
        path = f"{prefix}{info.alias or name}"
        if not info.is_required():
            out.add(path)
        for inner in _models_in(info.annotation):
            out |= optional_paths(inner, f"{path}.")
        for item in _list_item_models(info.annotation):
            out |= optional_paths(item, f"{path}[].")
    return out


@dataclass(frozen=True)
class FieldCase:
    """Without the field: the base spec with ``context`` applied (a None value removes
    a path) and ``path`` removed. With it: the same, ``path`` set to ``value``, and
    ``also`` applied (for fields that go with or exclude another)."""

    kind: str
    path: str
    value: Any
    context: dict[str, Any] = field(default_factory=dict)
    also: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.kind}.{self.path}"

    def spec(self, base: dict[str, Any], *, with_field: bool) -> dict[str, Any]:
        out = copy.deepcopy(base)
        for path, value in self.context.items():
            _put(out, path, value)
        if with_field:
            _put(out, self.path, self.value)
            for path, value in self.also.items():
                _put(out, path, value)
        else:
            _put(out, self.path, None)
        return out


def _put(spec: dict[str, Any], path: str, value: Any) -> None:
    """Set a dotted path (None: remove it); ``a[]`` means the first item of list ``a``."""
    node: Any = spec
    parts = path.split(".")
    for part in parts[:-1]:
        node = node[part[:-2]][0] if part.endswith("[]") else node.setdefault(part, {})
    if value is None:
        node.pop(parts[-1], None)
    else:
        node[parts[-1]] = copy.deepcopy(value)


IM, TP, BP = "InferenceModel", "TenantPool", "BatchPolicy"
TENSOR = {"name": "x", "dataType": "FP32", "dims": [4]}
TOLERATION = {"key": "shoal.dev/case", "operator": "Exists"}
QUEUE = {"priority": 1, "policy": {"maxQueueSize": 8}}
PRIORITY_LEVELS = {"priorityLevels": 2}
EXISTS_APP = {"key": "app", "operator": "Exists"}
ON = {"enabled": True}
CAPACITY_WINDOW = {"name": "night", "start": "0 22 * * *", "duration": "8h", "gpus": 2}
WINDOW = {
    "name": "always",
    "start": "0 0 * * *",
    "duration": "24h",
    "limits": {"requestsPerSecond": 1000},
}
# An issuer nothing answers for (a refused connection, at once): the pool's gateway then
# trusts it with no keys, which is what the set/unset cases compare.
OIDC = {
    "issuer": "https://127.0.0.1:9/realms/case",
    "audience": "shoal-case",
    "tenantClaim": "shoal_namespace",
}
PROXY = {
    "url": "http://egress-proxy.{gateway}.svc:3128",
    "namespace": "{gateway}",
    "podSelector": {"matchLabels": {"app": "egress-proxy"}},
    "port": 3128,
}

# Pod overrides (shoal.api.pod_overrides): a ConfigMap's and a Secret's key, and a
# volume without its source.
CONFIG_KEY = {"configMapKeyRef": {"name": "model-env", "key": "level"}}
SECRET_KEY = {"secretKeyRef": {"name": "model-keys", "key": "token"}}
SCRATCH = {"name": "extra", "mountPath": "/etc/shoal-extra"}

# Where a model's pods run (shoal.api.scheduling).
AFFINITY = "runtime.affinity"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
NODE_EXISTS = {"key": "example.com/case", "operator": "Exists"}
NODE_REQUIRED = {"nodeSelectorTerms": [{"matchExpressions": [NODE_EXISTS]}]}
NODE_PREFERRED = [{"weight": 10, "preference": {"matchExpressions": [NODE_EXISTS]}}]
HOSTNAME = "kubernetes.io/hostname"
POD_TERM = {"topologyKey": HOSTNAME}
WEIGHTED_POD_TERM = {"weight": 10, "podAffinityTerm": POD_TERM}
SPREAD = {"maxSkew": 1, "topologyKey": HOSTNAME, "whenUnsatisfiable": "ScheduleAnyway"}


def _pod_affinity_cases() -> tuple[FieldCase, ...]:
    """podAffinity and podAntiAffinity, each term (required, and preferred's
    podAffinityTerm) with each of its optional fields."""
    out: list[FieldCase] = []
    for kind in ("podAffinity", "podAntiAffinity"):
        path = f"{AFFINITY}.{kind}"
        out += [
            FieldCase(IM, path, {PREFERRED: [WEIGHTED_POD_TERM]}),
            FieldCase(
                IM, f"{path}.{REQUIRED}", [POD_TERM], {path: {PREFERRED: [WEIGHTED_POD_TERM]}}
            ),
            FieldCase(
                IM, f"{path}.{PREFERRED}", [WEIGHTED_POD_TERM], {path: {REQUIRED: [POD_TERM]}}
            ),
        ]
        for where, wrap in (
            (f"{path}.{REQUIRED}[]", lambda term: {REQUIRED: [term]}),
            (
                f"{path}.{PREFERRED}[].podAffinityTerm",
                lambda term: {PREFERRED: [{"weight": 10, "podAffinityTerm": term}]},
            ),
        ):

            def term(**fields: Any) -> dict[str, Any]:
                return {path: wrap({**POD_TERM, **fields})}  # noqa: B023

            out.append(FieldCase(IM, f"{where}.namespaces", ["{namespace}"], term()))
            for selector in ("labelSelector", "namespaceSelector"):
                at = f"{where}.{selector}"
                by_labels = {"matchLabels": {"app": "case"}}
                by_expression = {"matchExpressions": [EXISTS_APP]}
                out += [
                    FieldCase(IM, at, by_labels, term()),
                    FieldCase(
                        IM, f"{at}.matchLabels", {"app": "case"}, term(**{selector: by_expression})
                    ),
                    FieldCase(
                        IM, f"{at}.matchExpressions", [EXISTS_APP], term(**{selector: by_labels})
                    ),
                    FieldCase(
                        IM,
                        f"{at}.matchExpressions[].values",
                        ["case"],
                        term(**{selector: by_expression}),
                        also={f"{at}.matchExpressions[].operator": "In"},
                    ),
                ]
    return tuple(out)


CASES: tuple[FieldCase, ...] = (
    # ------------------------------------------------------------------ InferenceModel
    FieldCase(IM, "batchPolicy", {"name": "{policy}"}),
    FieldCase(IM, "batchPolicy.maxBatchSize", 16, {"batchPolicy": {"name": "{policy}"}}),
    FieldCase(IM, "batchPolicy.maxQueueDelay", "7ms", {"batchPolicy": {"name": "{policy}"}}),
    FieldCase(IM, "batchPolicy.defaultPriority", 1, {"batchPolicy": {"name": "{policy}"}}),
    FieldCase(
        IM,
        "model.backend",
        "onnxruntime",
        {"model.platform": "onnxruntime_onnx"},
        also={"model.platform": None},
    ),
    FieldCase(IM, "model.platform", "onnxruntime_onnx", also={"model.backend": None}),
    FieldCase(IM, "model.versionPolicy", {"policy": "All"}),
    FieldCase(IM, "model.versionPolicy.policy", "All"),
    FieldCase(IM, "model.versionPolicy.latest", 3),
    FieldCase(
        IM,
        "model.versionPolicy.versions",
        [2, 3],
        {"model.versionPolicy": {"latest": 1}},
        also={"model.versionPolicy.policy": "Specific", "model.versionPolicy.latest": None},
    ),
    FieldCase(IM, "model.inputs", [TENSOR]),
    FieldCase(IM, "model.outputs", [{**TENSOR, "name": "y"}]),
    FieldCase(IM, "model.instances", 2),
    FieldCase(IM, "model.warmup", {"batchSizes": [2]}, {"model.inputs": [TENSOR]}),
    FieldCase(
        IM,
        "model.warmup.batchSizes",
        [1, 4],
        {"model.inputs": [TENSOR], "model.warmup": {"data": "Zero"}},
    ),
    FieldCase(
        IM,
        "model.warmup.data",
        "Random",
        {"model.inputs": [TENSOR], "model.warmup": {"batchSizes": [1]}},
    ),
    FieldCase(IM, "model.responseCache", True),
    FieldCase(IM, "model.s3", {"region": "eu-west-1"}),
    FieldCase(IM, "model.s3.endpoint", "http://minio.storage.svc:9000", {"model.s3": {}}),
    FieldCase(IM, "model.s3.region", "us-east-1", {"model.s3": {"endpoint": "https://s3.example"}}),
    FieldCase(IM, "model.s3.pathStyle", False, {"model.s3": {"region": "us-east-1"}}),
    FieldCase(IM, "model.s3.credentialsSecret", "store-keys", {"model.s3": {}}),
    FieldCase(IM, "model.size", "12Gi"),
    FieldCase(IM, "model.caBundle", {"name": "corporate-ca"}),
    FieldCase(IM, "model.caBundle.key", "bundle.pem", {"model.caBundle": {"name": "corporate-ca"}}),
    FieldCase(IM, "model.parameters", {"EXECUTION_ENV_PATH": "/models/env.tar.gz"}),
    FieldCase(IM, "runtime", {"cpu": "3"}),
    FieldCase(IM, "runtime.image", "registry.example/triton:24.09-py3"),
    FieldCase(IM, "runtime.imagePullPolicy", "Always"),
    FieldCase(IM, "runtime.startupTimeout", "25m"),
    FieldCase(IM, "runtime.gpus", 1),
    FieldCase(IM, "runtime.cpu", "0.5"),
    FieldCase(IM, "runtime.cpuLimit", "3"),
    FieldCase(IM, "runtime.memory", "4Gi"),
    FieldCase(IM, "runtime.shmSize", "2Gi"),
    FieldCase(IM, "runtime.serviceAccountName", "model-reader"),
    FieldCase(IM, "runtime.imagePullSecrets", [{"name": "mirror-pull"}]),
    FieldCase(IM, "runtime.responseCacheSize", "512Mi", {"model.responseCache": True}),
    FieldCase(IM, "runtime.podLabels", {"example.com/team": "search", "tier": "gold"}),
    FieldCase(IM, "runtime.podAnnotations", {"example.com/cost-center": "42"}),
    FieldCase(IM, "runtime.env", [{"name": "LOG_LEVEL", "value": "1"}]),
    FieldCase(
        IM,
        "runtime.env[].value",
        "1",
        {"runtime.env": [{"name": "LOG_LEVEL", "valueFrom": CONFIG_KEY}]},
        also={"runtime.env[].valueFrom": None},
    ),
    FieldCase(
        IM,
        "runtime.env[].valueFrom",
        SECRET_KEY,
        {"runtime.env": [{"name": "LOG_LEVEL", "value": "1"}]},
        also={"runtime.env[].value": None},
    ),
    FieldCase(
        IM,
        "runtime.env[].valueFrom.configMapKeyRef",
        CONFIG_KEY["configMapKeyRef"],
        {"runtime.env": [{"name": "LOG_LEVEL", "valueFrom": SECRET_KEY}]},
        also={"runtime.env[].valueFrom.secretKeyRef": None},
    ),
    FieldCase(
        IM,
        "runtime.env[].valueFrom.secretKeyRef",
        SECRET_KEY["secretKeyRef"],
        {"runtime.env": [{"name": "LOG_LEVEL", "valueFrom": CONFIG_KEY}]},
        also={"runtime.env[].valueFrom.configMapKeyRef": None},
    ),
    FieldCase(
        IM,
        "runtime.env[].valueFrom.configMapKeyRef.optional",
        False,
        {"runtime.env": [{"name": "LOG_LEVEL", "valueFrom": CONFIG_KEY}]},
    ),
    FieldCase(
        IM,
        "runtime.env[].valueFrom.secretKeyRef.optional",
        False,
        {"runtime.env": [{"name": "LOG_LEVEL", "valueFrom": SECRET_KEY}]},
    ),
    FieldCase(IM, "runtime.envFrom", [{"configMapRef": {"name": "model-env", "optional": True}}]),
    FieldCase(
        IM,
        "runtime.envFrom[].prefix",
        "MODEL_",
        {"runtime.envFrom": [{"configMapRef": {"name": "model-env", "optional": True}}]},
    ),
    FieldCase(
        IM,
        "runtime.envFrom[].configMapRef",
        {"name": "model-env", "optional": True},
        {"runtime.envFrom": [{"secretRef": {"name": "model-keys", "optional": True}}]},
        also={"runtime.envFrom[].secretRef": None},
    ),
    FieldCase(
        IM,
        "runtime.envFrom[].secretRef",
        {"name": "model-keys", "optional": True},
        {"runtime.envFrom": [{"configMapRef": {"name": "model-env", "optional": True}}]},
        also={"runtime.envFrom[].configMapRef": None},
    ),
    FieldCase(
        IM,
        "runtime.envFrom[].configMapRef.optional",
        True,
        {"runtime.envFrom": [{"configMapRef": {"name": "model-env"}}]},
    ),
    FieldCase(
        IM,
        "runtime.envFrom[].secretRef.optional",
        True,
        {"runtime.envFrom": [{"secretRef": {"name": "model-keys"}}]},
    ),
    FieldCase(IM, "runtime.extraArgs", ["--log-verbose=1", "--log-format=ISO8601"]),
    FieldCase(IM, "runtime.volumes", [{**SCRATCH, "emptyDir": {"sizeLimit": "1Gi"}}]),
    FieldCase(
        IM,
        "runtime.volumes[].configMap",
        {"name": "model-env"},
        {"runtime.volumes": [{**SCRATCH, "emptyDir": {"sizeLimit": "1Gi"}}]},
        also={"runtime.volumes[].emptyDir": None},
    ),
    FieldCase(
        IM,
        "runtime.volumes[].secret",
        {"secretName": "model-keys"},
        {"runtime.volumes": [{**SCRATCH, "emptyDir": {"sizeLimit": "1Gi"}}]},
        also={"runtime.volumes[].emptyDir": None},
    ),
    FieldCase(
        IM,
        "runtime.volumes[].persistentVolumeClaim",
        {"claimName": "model-extras"},
        {"runtime.volumes": [{**SCRATCH, "emptyDir": {"sizeLimit": "1Gi"}}]},
        also={"runtime.volumes[].emptyDir": None},
    ),
    FieldCase(
        IM,
        "runtime.volumes[].emptyDir",
        {"sizeLimit": "1Gi"},
        {"runtime.volumes": [{**SCRATCH, "configMap": {"name": "model-env"}}]},
        also={"runtime.volumes[].configMap": None},
    ),
    FieldCase(
        IM,
        "runtime.volumes[].emptyDir.medium",
        "Memory",
        {"runtime.volumes": [{**SCRATCH, "emptyDir": {"sizeLimit": "1Gi"}}]},
    ),
    FieldCase(
        IM,
        "runtime.volumes[].readOnly",
        False,
        {"runtime.volumes": [{**SCRATCH, "configMap": {"name": "model-env"}}]},
    ),
    FieldCase(
        IM,
        "runtime.volumes[].subPath",
        "server.json",
        {"runtime.volumes": [{**SCRATCH, "configMap": {"name": "model-env"}}]},
    ),
    FieldCase(IM, AFFINITY, {"nodeAffinity": {REQUIRED: NODE_REQUIRED}}),
    FieldCase(IM, f"{AFFINITY}.nodeAffinity", {PREFERRED: NODE_PREFERRED}),
    FieldCase(
        IM,
        f"{AFFINITY}.nodeAffinity.{REQUIRED}",
        NODE_REQUIRED,
        {f"{AFFINITY}.nodeAffinity": {PREFERRED: NODE_PREFERRED}},
    ),
    FieldCase(
        IM,
        f"{AFFINITY}.nodeAffinity.{REQUIRED}.nodeSelectorTerms[].matchExpressions[].values",
        ["a", "b"],
        {f"{AFFINITY}.nodeAffinity": {REQUIRED: NODE_REQUIRED}},
        also={
            f"{AFFINITY}.nodeAffinity.{REQUIRED}.nodeSelectorTerms[].matchExpressions[]"
            ".operator": "NotIn"
        },
    ),
    FieldCase(
        IM,
        f"{AFFINITY}.nodeAffinity.{PREFERRED}",
        NODE_PREFERRED,
        {f"{AFFINITY}.nodeAffinity": {REQUIRED: NODE_REQUIRED}},
    ),
    FieldCase(
        IM,
        f"{AFFINITY}.nodeAffinity.{PREFERRED}[].preference.matchExpressions[].values",
        ["8"],
        {f"{AFFINITY}.nodeAffinity": {PREFERRED: NODE_PREFERRED}},
        also={
            f"{AFFINITY}.nodeAffinity.{PREFERRED}[].preference.matchExpressions[].operator": "Gt"
        },
    ),
    *_pod_affinity_cases(),
    FieldCase(
        IM,
        "runtime.topologySpreadConstraints",
        [{**SPREAD, "topologyKey": "topology.kubernetes.io/zone"}],
    ),
    FieldCase(
        IM,
        "runtime.topologySpreadConstraints[].labelSelector",
        {"matchLabels": {"app": "case"}},
        {"runtime.topologySpreadConstraints": [SPREAD]},
    ),
    FieldCase(
        IM,
        "runtime.topologySpreadConstraints[].labelSelector.matchLabels",
        {"app": "case"},
        {
            "runtime.topologySpreadConstraints": [
                {**SPREAD, "labelSelector": {"matchExpressions": [EXISTS_APP]}}
            ]
        },
    ),
    FieldCase(
        IM,
        "runtime.topologySpreadConstraints[].labelSelector.matchExpressions",
        [EXISTS_APP],
        {
            "runtime.topologySpreadConstraints": [
                {**SPREAD, "labelSelector": {"matchLabels": {"app": "case"}}}
            ]
        },
    ),
    FieldCase(
        IM,
        "runtime.topologySpreadConstraints[].labelSelector.matchExpressions[].values",
        ["case"],
        {
            "runtime.topologySpreadConstraints": [
                {**SPREAD, "labelSelector": {"matchExpressions": [EXISTS_APP]}}
            ]
        },
        also={
            "runtime.topologySpreadConstraints[].labelSelector.matchExpressions[].operator": "In"
        },
    ),
    FieldCase(
        IM,
        "runtime.topologySpreadConstraints[].matchLabelKeys",
        ["pod-template-hash"],
        {"runtime.topologySpreadConstraints": [SPREAD]},
    ),
    FieldCase(
        IM,
        "runtime.topologySpreadConstraints[].minDomains",
        2,
        {"runtime.topologySpreadConstraints": [{**SPREAD, "whenUnsatisfiable": "DoNotSchedule"}]},
    ),
    FieldCase(IM, "routing", {"timeout": "5s"}),
    FieldCase(IM, "routing.timeout", "90s"),
    FieldCase(IM, "routing.stickyHeader", "X-Session-ID"),
    FieldCase(IM, "overflow", {"pool": "{overflow_pool}"}),
    FieldCase(
        IM, "overflow.minReplicas", 2, {"overflow": {"pool": "{overflow_pool}", "maxReplicas": 3}}
    ),
    FieldCase(IM, "overflow.maxReplicas", 3, {"overflow": {"pool": "{overflow_pool}"}}),
    FieldCase(IM, "scaling", {"maxReplicas": 3}),
    FieldCase(IM, "scaling.minReplicas", 2),
    FieldCase(IM, "scaling.maxReplicas", 6),
    FieldCase(IM, "scaling.targetQueueDepth", 5),
    FieldCase(IM, "scaling.targetP95Latency", "2s"),
    FieldCase(IM, "scaling.predictive", {"enabled": True}),
    FieldCase(IM, "scaling.predictive.headroomPercent", 50, {"scaling.predictive": ON}),
    FieldCase(IM, "scaling.predictive.warmPool", True, {"scaling.predictive": ON}),
    FieldCase(IM, "scaling.scaleUp", {"stabilizationWindow": "30s"}),
    FieldCase(
        IM,
        "scaling.scaleUp.maxReplicasPerStep",
        2,
        {"scaling.scaleUp": {"stabilizationWindow": "0s"}},
    ),
    FieldCase(IM, "scaling.scaleDown", {"stabilizationWindow": "10m"}),
    FieldCase(
        IM,
        "scaling.scaleDown.maxReplicasPerStep",
        1,
        {"scaling.scaleDown": {"stabilizationWindow": "5m"}},
    ),
    FieldCase(
        IM,
        "scaling.schedules",
        [{"name": "always", "start": "0 0 * * *", "duration": "24h", "minReplicas": 2}],
        {"scaling.maxReplicas": 4},
    ),
    FieldCase(
        IM,
        "scaling.schedules[].timeZone",
        "Europe/Paris",
        {
            "scaling.maxReplicas": 4,
            "scaling.schedules": [
                {"name": "always", "start": "0 0 * * *", "duration": "24h", "minReplicas": 2}
            ],
        },
    ),
    # ------------------------------------------------------------------ TenantPool
    FieldCase(
        TP,
        "tenants.namespaces",
        ["{namespace}", "{other}"],
        {"tenants.selector": {"matchLabels": {"kubernetes.io/metadata.name": "{namespace}"}}},
    ),
    FieldCase(
        TP,
        "tenants.selector",
        {"matchLabels": {"kubernetes.io/metadata.name": "{other}"}},
    ),
    FieldCase(
        TP,
        "tenants.selector.matchLabels",
        {"kubernetes.io/metadata.name": "{other}"},
        {
            "tenants.selector": {
                "matchExpressions": [{"key": "shoal.dev/none", "operator": "DoesNotExist"}]
            }
        },
    ),
    FieldCase(
        TP,
        "tenants.selector.matchExpressions",
        [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["{other}"]}],
        {"tenants.selector": {"matchLabels": {"shoal.dev/test": "1"}}},
    ),
    FieldCase(
        TP,
        "tenants.selector.matchExpressions[].values",
        ["{other}"],
        {
            "tenants.selector": {
                "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "Exists"}]
            }
        },
        also={"tenants.selector.matchExpressions[].operator": "In"},
    ),
    FieldCase(TP, "placement", {"gpuProduct": "NVIDIA-A100-SXM4-80GB"}),
    FieldCase(TP, "placement.nodeSelector", {"shoal.dev/node-group": "shared-gpu", "zone": "a"}),
    FieldCase(TP, "placement.tolerations", [TOLERATION]),
    FieldCase(
        TP,
        "placement.tolerations[].key",
        "shoal.dev/case",
        {"placement.tolerations": [{"operator": "Exists"}]},
    ),
    FieldCase(
        TP, "placement.tolerations[].operator", "Exists", {"placement.tolerations": [{"key": "k"}]}
    ),
    FieldCase(TP, "placement.tolerations[].value", "v", {"placement.tolerations": [{"key": "k"}]}),
    FieldCase(
        TP, "placement.tolerations[].effect", "NoSchedule", {"placement.tolerations": [TOLERATION]}
    ),
    FieldCase(
        TP,
        "placement.tolerations[].tolerationSeconds",
        30,
        {"placement.tolerations": [{**TOLERATION, "effect": "NoExecute"}]},
    ),
    FieldCase(TP, "placement.gpuProduct", "NVIDIA-A100-SXM4-80GB"),
    FieldCase(TP, "quota.models", 3),
    FieldCase(TP, "quota.replicas", 8),
    FieldCase(TP, "capacity", {"gpus": 4}),
    FieldCase(TP, "capacity.cohort", "{namespace}", {"capacity": {"gpus": 4}}),
    FieldCase(TP, "capacity.weight", 3, {"capacity": {"gpus": 4, "cohort": "{namespace}"}}),
    FieldCase(TP, "capacity.borrowingLimit", 2, {"capacity": {"gpus": 4, "cohort": "{namespace}"}}),
    FieldCase(TP, "capacity.lendingLimit", 2, {"capacity": {"gpus": 4, "cohort": "{namespace}"}}),
    FieldCase(TP, "capacity.windows", [CAPACITY_WINDOW], {"capacity": {"gpus": 4}}),
    FieldCase(
        TP,
        "capacity.windows[].timeZone",
        "Asia/Tokyo",
        {"capacity": {"gpus": 4, "windows": [CAPACITY_WINDOW]}},
    ),
    FieldCase(TP, "priority", {"value": 5000}),
    FieldCase(TP, "priority.value", 5000),
    FieldCase(TP, "priority.preemptionPolicy", "Never"),
    FieldCase(TP, "access", {"allowSameNamespace": False}),
    FieldCase(TP, "access.gatewayNamespaces", ["{gateway}"]),
    FieldCase(TP, "access.monitoringNamespaces", ["{gateway}"]),
    FieldCase(TP, "access.allowSameNamespace", False),
    FieldCase(TP, "gateway", {"replicas": 1}),
    FieldCase(TP, "gateway.enabled", False),
    FieldCase(TP, "gateway.replicas", 3),
    FieldCase(TP, "gateway.cpu", "250m"),
    FieldCase(TP, "gateway.memory", "512Mi"),
    FieldCase(TP, "gateway.maxRequestBody", "1Mi"),
    FieldCase(TP, "gateway.limits", {"requestsPerSecond": 100}),
    FieldCase(TP, "gateway.limits.requestsPerSecond", 50),
    FieldCase(TP, "gateway.limits.burst", 20),
    FieldCase(TP, "gateway.limits.concurrency", 8),
    FieldCase(TP, "gateway.limits.queueTimeout", "250ms"),
    FieldCase(TP, "gateway.tenants", [{"namespace": "{namespace}", "requestsPerSecond": 10}]),
    FieldCase(
        TP,
        "gateway.tenants[].requestsPerSecond",
        10,
        {"gateway.tenants": [{"namespace": "{namespace}", "burst": 5}]},
    ),
    FieldCase(
        TP,
        "gateway.tenants[].burst",
        5,
        {"gateway.tenants": [{"namespace": "{namespace}", "requestsPerSecond": 10}]},
    ),
    FieldCase(
        TP,
        "gateway.tenants[].concurrency",
        4,
        {"gateway.tenants": [{"namespace": "{namespace}", "requestsPerSecond": 10}]},
    ),
    FieldCase(
        TP,
        "gateway.tenants[].queueTimeout",
        "2s",
        {"gateway.tenants": [{"namespace": "{namespace}", "requestsPerSecond": 10}]},
    ),
    FieldCase(TP, "gateway.windows", [WINDOW]),
    FieldCase(TP, "gateway.windows[].timeZone", "Asia/Tokyo", {"gateway.windows": [WINDOW]}),
    FieldCase(
        TP,
        "gateway.windows[].limits.requestsPerSecond",
        5,
        {"gateway.windows": [{**WINDOW, "limits": {"concurrency": 2}}]},
    ),
    FieldCase(
        TP,
        "gateway.windows[].limits.burst",
        5,
        {"gateway.windows": [WINDOW]},
    ),
    FieldCase(
        TP,
        "gateway.windows[].limits.concurrency",
        2,
        {"gateway.windows": [WINDOW]},
    ),
    FieldCase(
        TP,
        "gateway.windows[].limits.queueTimeout",
        "3s",
        {"gateway.windows": [WINDOW]},
    ),
    FieldCase(TP, "gateway.oidc", [OIDC]),
    FieldCase(TP, "gateway.oidc[].jwksURI", "https://127.0.0.1:9/certs", {"gateway.oidc": [OIDC]}),
    FieldCase(
        TP,
        "gateway.oidc[].certificateAuthority",
        "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n",
        {"gateway.oidc": [OIDC]},
    ),
    FieldCase(TP, "access.modelDownload", {"mode": "None"}),
    FieldCase(TP, "access.modelDownload.mode", "None"),
    FieldCase(TP, "access.modelDownload.clusterCIDRs", ["10.0.0.0/8", "fd00::/8"]),
    FieldCase(
        TP, "access.modelDownload.extraDestinations", [{"cidr": "169.254.170.23/32", "port": 80}]
    ),
    FieldCase(
        TP,
        "access.modelDownload.extraDestinations[].protocol",
        "UDP",
        {"access.modelDownload.extraDestinations": [{"cidr": "10.1.0.0/16", "port": 9000}]},
    ),
    FieldCase(TP, "access.modelDownload.proxy", PROXY, also={"access.modelDownload.mode": "Proxy"}),
    FieldCase(
        TP,
        "access.modelDownload.proxy.noProxy",
        [".example.com", "10.1.0.0/16"],
        {"access.modelDownload": {"mode": "Proxy", "proxy": PROXY}},
    ),
    FieldCase(
        TP,
        "access.modelDownload.proxy.podSelector.matchLabels",
        {"app": "proxy"},
        {
            "access.modelDownload": {
                "mode": "Proxy",
                "proxy": {**PROXY, "podSelector": {"matchExpressions": [EXISTS_APP]}},
            }
        },
    ),
    FieldCase(
        TP,
        "access.modelDownload.proxy.podSelector.matchExpressions",
        [EXISTS_APP],
        {"access.modelDownload": {"mode": "Proxy", "proxy": PROXY}},
    ),
    FieldCase(
        TP,
        "access.modelDownload.proxy.podSelector.matchExpressions[].values",
        ["proxy"],
        {
            "access.modelDownload": {
                "mode": "Proxy",
                "proxy": {**PROXY, "podSelector": {"matchExpressions": [EXISTS_APP]}},
            }
        },
        also={"access.modelDownload.proxy.podSelector.matchExpressions[].operator": "In"},
    ),
    # ------------------------------------------------------------------ BatchPolicy
    FieldCase(BP, "maxBatchSize", 16),
    FieldCase(BP, "maxQueueDelay", "10ms"),
    FieldCase(BP, "preferredBatchSizes", [4, 8]),
    FieldCase(BP, "priorityLevels", 2),
    FieldCase(BP, "defaultPriority", 1, PRIORITY_LEVELS),
    FieldCase(BP, "queuePolicy", {"maxQueueSize": 64}),
    FieldCase(BP, "queuePolicy.maxQueueSize", 64),
    FieldCase(BP, "queuePolicy.timeout", "1s"),
    FieldCase(BP, "queuePolicy.timeoutAction", "Delay"),
    FieldCase(BP, "queuePolicy.allowTimeoutOverride", True),
    FieldCase(BP, "priorityQueuePolicies", [QUEUE], PRIORITY_LEVELS),
    FieldCase(
        BP,
        "priorityQueuePolicies[].policy.maxQueueSize",
        4,
        {**PRIORITY_LEVELS, "priorityQueuePolicies": [{"priority": 1, "policy": {}}]},
    ),
    FieldCase(
        BP,
        "priorityQueuePolicies[].policy.timeout",
        "50ms",
        {**PRIORITY_LEVELS, "priorityQueuePolicies": [{"priority": 1, "policy": {}}]},
    ),
    FieldCase(
        BP,
        "priorityQueuePolicies[].policy.timeoutAction",
        "Delay",
        {**PRIORITY_LEVELS, "priorityQueuePolicies": [{"priority": 1, "policy": {}}]},
    ),
    FieldCase(
        BP,
        "priorityQueuePolicies[].policy.allowTimeoutOverride",
        True,
        {**PRIORITY_LEVELS, "priorityQueuePolicies": [{"priority": 1, "policy": {}}]},
    ),
    FieldCase(BP, "preserveOrdering", True),
)


def resolve(value: Any, names: dict[str, str]) -> Any:
    """``value`` with ``{placeholder}`` strings filled in from ``names``."""
    if isinstance(value, str):
        return value.format(**names) if "{" in value else value
    if isinstance(value, list):
        return [resolve(v, names) for v in value]
    if isinstance(value, dict):
        return {resolve(k, names): resolve(v, names) for k, v in value.items()}
    return value
