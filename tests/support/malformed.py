"""A corpus of malformed custom resources, each with what the rejection must say.

Every case starts from a valid example, breaks one thing, and lists fragments the API
server's message must contain: always the path of the offending field, and a word of
the reason. The same objects must be refused by the pydantic models too.

A case with a ``pool`` is refused by the admission policy against that TenantPool
(created for the case, admitting the case's namespace), and by
``shoal.api.admission.refusals`` in Python.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from tests.support.resources import example

DELETE = object()


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    example: str
    changes: tuple[tuple[str, Any], ...]
    expect: tuple[str, ...]
    pool: dict[str, Any] | None = None

    def build(self) -> dict[str, Any]:
        obj = example(self.kind, self.example)
        for path, value in self.changes:
            _set(obj, path, value)
        obj["metadata"]["name"] = obj["metadata"].get("name", "x")
        return obj


def case_pool(case: Case, name: str, namespace: str) -> dict[str, Any]:
    """The TenantPool an admission case is judged against: the example pool the model
    names, with the case's changes, admitting ``namespace``."""
    assert case.pool is not None
    pool = example("TenantPool", case.build()["spec"]["pool"])
    pool["metadata"] = {"name": name}
    pool["spec"] = {**pool["spec"], **copy.deepcopy(case.pool)}
    pool["spec"]["tenants"] = {"namespaces": [namespace]}
    return pool


def _set(obj: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    node: Any = obj
    for part in parts[:-1]:
        node = node[int(part)] if isinstance(node, list) else node.setdefault(part, {})
    last = parts[-1]
    if value is DELETE:
        if isinstance(node, list):
            del node[int(last)]
        else:
            node.pop(last, None)
    elif isinstance(node, list):
        node[int(last)] = copy.deepcopy(value)
    else:
        node[last] = copy.deepcopy(value)


BP, TP, IM = "BatchPolicy", "TenantPool", "InferenceModel"
MIN1 = "greater than or equal to 1"
MATCH = "should match"
ENUM = "Unsupported value"
REQUIRED = "Required value"
NULL = "must not be null"
DURATION = "must be a duration"
QUANTITY = "positive_quantity"
LABEL_KEY = "must be a label key"
LABEL_VALUE = "must be a label value"
CRON = "must be a five-field cron expression"
TOLERATION = "spec.placement.tolerations[0]"
_NIGHT = {"name": "night", "start": "0 22 * * *", "duration": "8h", "gpus": 1}
_OIDC = {
    "issuer": "https://login.example.com/realms/platform",
    "audience": "shoal-inference",
    "tenantClaim": "shoal_namespace",
}

CASES: tuple[Case, ...] = (
    # ------------------------------------------------------------------ BatchPolicy
    Case(
        "bp-max-batch-zero", BP, "offline", (("spec.maxBatchSize", 0),), ("spec.maxBatchSize", MIN1)
    ),
    Case(
        "bp-max-batch-huge",
        BP,
        "offline",
        (("spec.maxBatchSize", 5000),),
        ("spec.maxBatchSize", "less than or equal to 4096"),
    ),
    Case(
        "bp-max-batch-string",
        BP,
        "offline",
        (("spec.maxBatchSize", "eight"),),
        ("spec.maxBatchSize", "integer"),
    ),
    Case(
        "bp-delay-with-space",
        BP,
        "offline",
        (("spec.maxQueueDelay", "5 ms"),),
        ("spec.maxQueueDelay", MATCH, DURATION),
    ),
    Case(
        "bp-delay-word",
        BP,
        "offline",
        (("spec.maxQueueDelay", "fast"),),
        ("spec.maxQueueDelay", MATCH),
    ),
    Case(
        # Would overflow Triton's max_queue_delay_microseconds (found by a property test).
        "bp-delay-overflow",
        BP,
        "offline",
        (("spec.maxQueueDelay", "400000000000m"),),
        ("spec.maxQueueDelay", MATCH, DURATION),
    ),
    Case(
        "bp-delay-number",
        BP,
        "offline",
        (("spec.maxQueueDelay", 5),),
        ("spec.maxQueueDelay", "string"),
    ),
    Case(
        "bp-delay-no-unit",
        BP,
        "offline",
        (("spec.maxQueueDelay", "5"),),
        ("spec.maxQueueDelay", MATCH),
    ),
    Case(
        "bp-preferred-above-max",
        BP,
        "offline",
        (("spec.preferredBatchSizes", [32, 128]),),
        ("spec.preferredBatchSizes", "at most maxBatchSize"),
    ),
    Case(
        "bp-preferred-zero",
        BP,
        "offline",
        (("spec.preferredBatchSizes", [0]),),
        ("spec.preferredBatchSizes[0]", MIN1),
    ),
    Case(
        "bp-preferred-duplicate",
        BP,
        "offline",
        (("spec.preferredBatchSizes", [8, 8]),),
        ("spec.preferredBatchSizes[1]", "Duplicate value"),
    ),
    Case(
        "bp-priority-levels-negative",
        BP,
        "offline",
        (("spec.priorityLevels", -1),),
        ("spec.priorityLevels", "greater than or equal to 0"),
    ),
    Case(
        "bp-priority-levels-too-many",
        BP,
        "offline",
        (("spec.priorityLevels", 17),),
        ("spec.priorityLevels", "less than or equal to 16"),
    ),
    Case(
        "bp-default-priority-above-levels",
        BP,
        "interactive",
        (("spec.defaultPriority", 3),),
        ("spec.defaultPriority", "between 1 and priorityLevels"),
    ),
    Case(
        "bp-preserve-ordering-with-priority-levels",
        BP,
        "interactive",
        (("spec.preserveOrdering", True),),
        ("spec.preserveOrdering", "at most one priority level"),
    ),
    Case(
        "bp-default-priority-without-levels",
        BP,
        "offline",
        (("spec.defaultPriority", 1),),
        ("spec.defaultPriority", "between 1 and priorityLevels"),
    ),
    Case(
        "bp-timeout-action-unknown",
        BP,
        "offline",
        (("spec.queuePolicy.timeoutAction", "Drop"),),
        ("spec.queuePolicy.timeoutAction", ENUM),
    ),
    Case(
        "bp-queue-size-negative",
        BP,
        "offline",
        (("spec.queuePolicy.maxQueueSize", -5),),
        ("spec.queuePolicy.maxQueueSize", "greater than or equal to 0"),
    ),
    Case(
        "bp-queue-timeout-no-unit",
        BP,
        "offline",
        (("spec.queuePolicy.timeout", "30"),),
        ("spec.queuePolicy.timeout", MATCH),
    ),
    Case(
        "bp-priority-policy-above-levels",
        BP,
        "interactive",
        (("spec.priorityQueuePolicies.0.priority", 3),),
        ("spec.priorityQueuePolicies", "at most priorityLevels"),
    ),
    Case(
        "bp-priority-policy-missing-policy",
        BP,
        "interactive",
        (("spec.priorityQueuePolicies.0.policy", DELETE),),
        ("spec.priorityQueuePolicies[0].policy", REQUIRED),
    ),
    Case(
        "bp-priority-policy-duplicate",
        BP,
        "interactive",
        (
            (
                "spec.priorityQueuePolicies",
                [{"priority": 1, "policy": {}}, {"priority": 1, "policy": {}}],
            ),
        ),
        ("spec.priorityQueuePolicies[1]", "Duplicate value"),
    ),
    Case(
        "bp-unknown-field",
        BP,
        "offline",
        (("spec.maxBatch", 8),),
        ('unknown field "spec.maxBatch"',),
    ),
    Case(
        "bp-preserve-ordering-string",
        BP,
        "offline",
        (("spec.preserveOrdering", "yes"),),
        ("spec.preserveOrdering", "boolean"),
    ),
    # ------------------------------------------------------------------ TenantPool
    Case(
        "tp-isolation-unknown",
        TP,
        "critical",
        (("spec.isolation", "Private"),),
        ("spec.isolation", ENUM),
    ),
    Case(
        "tp-isolation-missing",
        TP,
        "critical",
        (("spec.isolation", DELETE),),
        ("spec.isolation", REQUIRED),
    ),
    Case(
        "tp-dedicated-without-node-selector",
        TP,
        "critical",
        (("spec.placement.nodeSelector", DELETE),),
        ("spec.placement.nodeSelector", "must say where it runs"),
    ),
    Case(
        "tp-no-tenants",
        TP,
        "critical",
        (("spec.tenants", {}),),
        ("spec.tenants", "must admit some tenant"),
    ),
    Case(
        "tp-tenant-namespace-invalid",
        TP,
        "critical",
        (("spec.tenants.namespaces", ["Team_Search"]),),
        ("spec.tenants.namespaces[0]", MATCH),
    ),
    Case(
        "tp-quota-gpus-negative",
        TP,
        "critical",
        (("spec.quota.gpus", -1),),
        ("spec.quota.gpus", "greater than or equal to 0"),
    ),
    Case("tp-quota-missing", TP, "critical", (("spec.quota", DELETE),), ("spec.quota", REQUIRED)),
    Case(
        "tp-capacity-lends-more-than-it-has",
        TP,
        "critical",
        (("spec.capacity", {"gpus": 2, "cohort": "gpu", "lendingLimit": 3}),),
        ("spec.capacity.lendingLimit", "lendingLimit may not exceed gpus"),
    ),
    Case(
        "tp-capacity-limits-without-cohort",
        TP,
        "critical",
        (("spec.capacity", {"gpus": 2, "borrowingLimit": 2}),),
        ("spec.capacity.cohort", "need a cohort"),
    ),
    Case(
        "tp-capacity-weight-huge",
        TP,
        "critical",
        (("spec.capacity", {"gpus": 2, "cohort": "gpu", "weight": 5000}),),
        ("spec.capacity.weight", "less than or equal to 1000"),
    ),
    Case(
        "tp-capacity-cohort-invalid",
        TP,
        "critical",
        (("spec.capacity", {"gpus": 2, "cohort": "GPU Pool"}),),
        ("spec.capacity.cohort", MATCH),
    ),
    Case(
        "tp-capacity-window-gpus-negative",
        TP,
        "critical",
        (
            (
                "spec.capacity",
                {"gpus": 2, "windows": [{**_NIGHT, "gpus": -1}]},
            ),
        ),
        ("spec.capacity.windows[0].gpus", "greater than or equal to 0"),
    ),
    Case(
        "tp-capacity-window-start-not-cron",
        TP,
        "critical",
        (("spec.capacity", {"gpus": 2, "windows": [{**_NIGHT, "start": "at night"}]}),),
        ("spec.capacity.windows[0].start", MATCH),
    ),
    Case(
        "tp-capacity-window-gpus-missing",
        TP,
        "critical",
        (
            (
                "spec.capacity",
                {"gpus": 2, "windows": [{k: v for k, v in _NIGHT.items() if k != "gpus"}]},
            ),
        ),
        ("spec.capacity.windows[0].gpus", REQUIRED),
    ),
    Case(
        "tp-capacity-gpus-missing",
        TP,
        "critical",
        (("spec.capacity", {"cohort": "gpu"}),),
        ("spec.capacity.gpus", REQUIRED),
    ),
    Case(
        "tp-toleration-operator-unknown",
        TP,
        "critical",
        (("spec.placement.tolerations.0.operator", "Maybe"),),
        ("spec.placement.tolerations[0].operator", ENUM),
    ),
    Case(
        "tp-selector-in-without-values",
        TP,
        "shared",
        (("spec.tenants.selector.matchExpressions.0.values", []),),
        ("spec.tenants.selector.matchExpressions[0].values", "non-empty for In"),
    ),
    Case(
        "tp-preemption-policy-unknown",
        TP,
        "critical",
        (("spec.priority", {"preemptionPolicy": "Always"}),),
        ("spec.priority.preemptionPolicy", ENUM),
    ),
    Case(
        "tp-gateway-namespace-empty",
        TP,
        "critical",
        (("spec.access.gatewayNamespaces", [""]),),
        ("spec.access.gatewayNamespaces[0]", "at least 1 chars long"),
    ),
    Case(
        "tp-oidc-issuer-plain-http",
        TP,
        "critical",
        (("spec.gateway.oidc", [{**_OIDC, "issuer": "http://login.example.com/realms/x"}]),),
        ("spec.gateway.oidc[0].issuer", "must be an https:// URL"),
    ),
    Case(
        "tp-oidc-issuer-with-credentials",
        TP,
        "critical",
        (("spec.gateway.oidc", [{**_OIDC, "issuer": "https://user:pw@login.example.com"}]),),
        ("spec.gateway.oidc[0].issuer", "without credentials"),
    ),
    Case(
        "tp-oidc-issuer-with-query",
        TP,
        "critical",
        (("spec.gateway.oidc", [{**_OIDC, "issuer": "https://login.example.com/?realm=x"}]),),
        ("spec.gateway.oidc[0].issuer", "query or fragment"),
    ),
    Case(
        "tp-oidc-jwks-uri-with-fragment",
        TP,
        "critical",
        (("spec.gateway.oidc", [{**_OIDC, "jwksURI": "https://login.example.com/keys#a"}]),),
        ("spec.gateway.oidc[0].jwksURI", "must be an https:// URL"),
    ),
    Case(
        "tp-oidc-issuer-twice",
        TP,
        "critical",
        (("spec.gateway.oidc", [_OIDC, {**_OIDC, "audience": "other"}]),),
        ("spec.gateway.oidc[1]", "Duplicate value"),
    ),
    Case(
        "tp-oidc-too-many-issuers",
        TP,
        "critical",
        (
            (
                "spec.gateway.oidc",
                [{**_OIDC, "issuer": f"https://idp-{i}.example.com"} for i in range(5)],
            ),
        ),
        ("spec.gateway.oidc", "must have at most 4 items"),
    ),
    Case(
        "tp-oidc-audience-missing",
        TP,
        "critical",
        (("spec.gateway.oidc", [{k: v for k, v in _OIDC.items() if k != "audience"}]),),
        ("spec.gateway.oidc[0].audience", REQUIRED),
    ),
    Case(
        "tp-oidc-audience-with-space",
        TP,
        "critical",
        (("spec.gateway.oidc", [{**_OIDC, "audience": "shoal inference"}]),),
        ("spec.gateway.oidc[0].audience", "printable ASCII characters without spaces"),
    ),
    Case(
        "tp-oidc-tenant-claim-registered",
        TP,
        "critical",
        (("spec.gateway.oidc", [{**_OIDC, "tenantClaim": "aud"}]),),
        ("spec.gateway.oidc[0].tenantClaim", "must name a claim that says who the caller is"),
    ),
    Case(
        "tp-oidc-tenant-claim-url",
        TP,
        "critical",
        (("spec.gateway.oidc", [{**_OIDC, "tenantClaim": "https://example.com/tenant"}]),),
        ("spec.gateway.oidc[0].tenantClaim", "must be a claim name"),
    ),
    Case(
        "tp-oidc-tenant-claim-missing",
        TP,
        "critical",
        (("spec.gateway.oidc", [{k: v for k, v in _OIDC.items() if k != "tenantClaim"}]),),
        ("spec.gateway.oidc[0].tenantClaim", REQUIRED),
    ),
    Case(
        "tp-oidc-certificate-authority-not-pem",
        TP,
        "critical",
        (("spec.gateway.oidc", [{**_OIDC, "certificateAuthority": "MIIBIjANBgkqhkiG9w0B"}]),),
        ("spec.gateway.oidc[0].certificateAuthority", "must be one or more PEM certificates"),
    ),
    Case(
        "tp-unknown-field",
        TP,
        "critical",
        (("spec.placement.zone", "eu-west-1a"),),
        ('unknown field "spec.placement.zone"',),
    ),
    # ------------------------------------------------------------------ InferenceModel
    Case(
        "im-pool-not-a-name",
        IM,
        "search-ranker",
        (("spec.pool", "Critical Pool"),),
        ("spec.pool", MATCH, "must be the name of a TenantPool"),
    ),
    Case("im-pool-missing", IM, "search-ranker", (("spec.pool", DELETE),), ("spec.pool", REQUIRED)),
    Case(
        "im-min-above-max",
        IM,
        "search-ranker",
        (("spec.scaling.minReplicas", 7),),
        ("spec.scaling.minReplicas", "must not exceed maxReplicas"),
    ),
    Case(
        "im-warm-pool-zero",
        IM,
        "search-ranker",
        (("spec.scaling.minReplicas", 0),),
        ("spec.scaling.minReplicas", MIN1),
    ),
    Case(
        "im-max-replicas-string",
        IM,
        "search-ranker",
        (("spec.scaling.maxReplicas", "many"),),
        ("spec.scaling.maxReplicas", "integer"),
    ),
    Case(
        "im-schedule-above-max",
        IM,
        "search-ranker",
        (("spec.scaling.schedules.0.minReplicas", 10),),
        ("spec.scaling.schedules", "must not exceed maxReplicas"),
    ),
    Case(
        "im-schedule-start-not-cron",
        IM,
        "search-ranker",
        (("spec.scaling.schedules.0.start", "every morning"),),
        ("spec.scaling.schedules[0].start", MATCH),
    ),
    Case(
        "im-schedule-duration-words",
        IM,
        "search-ranker",
        (("spec.scaling.schedules.0.duration", "10 hours"),),
        ("spec.scaling.schedules[0].duration", MATCH),
    ),
    Case(
        "im-p95-no-unit",
        IM,
        "search-ranker",
        (("spec.scaling.targetP95Latency", "50"),),
        ("spec.scaling.targetP95Latency", MATCH),
    ),
    Case(
        "im-scale-down-window-words",
        IM,
        "search-ranker",
        (("spec.scaling.scaleDown.stabilizationWindow", "5 minutes"),),
        ("spec.scaling.scaleDown.stabilizationWindow", MATCH),
    ),
    Case(
        "im-backend-and-platform",
        IM,
        "search-ranker",
        (("spec.model.backend", "python"),),
        ("spec.model", "exactly one of backend and platform"),
    ),
    Case(
        "im-neither-backend-nor-platform",
        IM,
        "search-ranker",
        (("spec.model.platform", DELETE),),
        ("spec.model", "exactly one of backend and platform"),
    ),
    Case(
        "im-storage-uri-ftp",
        IM,
        "search-ranker",
        (("spec.model.storageUri", "ftp://models/ranker"),),
        ("spec.model.storageUri", MATCH, "must be s3://bucket/path"),
    ),
    Case(
        "im-storage-uri-spaces",
        IM,
        "search-ranker",
        (("spec.model.storageUri", "s3://Bucket With Spaces/x"),),
        ("spec.model.storageUri", MATCH),
    ),
    Case(
        "im-model-name-path",
        IM,
        "search-ranker",
        (("spec.model.name", "../etc"),),
        ("spec.model.name", MATCH),
    ),
    Case(
        "im-input-type-unknown",
        IM,
        "search-ranker",
        (("spec.model.inputs.0.dataType", "FLOAT"),),
        ("spec.model.inputs[0].dataType", ENUM),
    ),
    Case(
        "im-input-dims-empty",
        IM,
        "search-ranker",
        (("spec.model.inputs.0.dims", []),),
        ("spec.model.inputs[0].dims", "at least 1 items"),
    ),
    Case(
        "im-warmup-without-inputs",
        IM,
        "search-ranker",
        (("spec.model.inputs", DELETE),),
        ("spec.model.inputs", "warmup needs the model's inputs"),
    ),
    Case(
        "im-specific-versions-empty",
        IM,
        "search-ranker",
        (("spec.model.versionPolicy", {"policy": "Specific"}),),
        ("spec.model.versionPolicy.versions", "at least one version"),
    ),
    Case(
        "im-gpus-too-many",
        IM,
        "search-ranker",
        (("spec.runtime.gpus", 17),),
        ("spec.runtime.gpus", "less than or equal to 16"),
    ),
    Case(
        "im-memory-not-quantity",
        IM,
        "search-ranker",
        (("spec.runtime.memory", "lots"),),
        ("spec.runtime.memory", MATCH, QUANTITY),
    ),
    Case(
        "im-pull-policy-unknown",
        IM,
        "search-ranker",
        (("spec.runtime.imagePullPolicy", "Sometimes"),),
        ("spec.runtime.imagePullPolicy", ENUM),
    ),
    Case(
        "im-name-starts-with-digit",
        IM,
        "search-ranker",
        (("metadata.name", "9ranker"),),
        ("metadata.name: Invalid value", "metadata.name must be a DNS-1035 label"),
    ),
    Case(
        "im-name-too-long",
        IM,
        "search-ranker",
        (("metadata.name", "r" * 60),),
        ("metadata.name: Invalid value", "metadata.name must be a DNS-1035 label", "at most 52"),
    ),
    Case(
        "im-unknown-field",
        IM,
        "search-ranker",
        (("spec.model.format", "onnx"),),
        ('unknown field "spec.model.format"',),
    ),
    Case(
        "im-batch-policy-without-name",
        IM,
        "search-ranker",
        (("spec.batchPolicy", {"maxBatchSize": 4}),),
        ("spec.batchPolicy.name", REQUIRED),
    ),
    Case("im-spec-missing", IM, "search-ranker", (("spec", DELETE),), ("spec", REQUIRED)),
)


def _cases(kind: str, example: str, *rows: tuple[Any, ...]) -> tuple[Case, ...]:
    """Cases of one kind and example: (id, ((path, value), ...), (fragment, ...))."""
    return tuple(Case(id_, kind, example, changes, expect) for id_, changes, expect in rows)


def _toleration(**fields: Any) -> tuple[tuple[str, Any], ...]:
    return (("spec.placement.tolerations", [fields]),)


# Values a Pod refuses, so that every Deployment of the pool would be refused.
PLACEMENT = _cases(
    TP,
    "critical",
    (
        "tp-toleration-exists-with-value",
        _toleration(key="shoal.dev/dedicated", operator="Exists", value="true"),
        (f"{TOLERATION}.value", "must be empty when operator is Exists"),
    ),
    (
        "tp-toleration-seconds-without-noexecute",
        _toleration(
            key="shoal.dev/dedicated", value="true", effect="NoSchedule", tolerationSeconds=60
        ),
        (f"{TOLERATION}.tolerationSeconds", "needs effect NoExecute"),
    ),
    (
        "tp-toleration-no-key-equal",
        _toleration(operator="Equal", value="true"),
        (f"{TOLERATION}.operator", "must be Exists when key is empty"),
    ),
    (
        "tp-toleration-key-with-space",
        _toleration(key="shoal dev/dedicated", operator="Exists"),
        (f"{TOLERATION}.key", "label key"),
    ),
    (
        "tp-toleration-key-two-slashes",
        _toleration(key="a/b/c", operator="Exists"),
        (f"{TOLERATION}.key", "label key"),
    ),
    (
        "tp-toleration-value-with-space",
        _toleration(key="shoal.dev/dedicated", value="yes please"),
        (f"{TOLERATION}.value", LABEL_VALUE),
    ),
    (
        "tp-node-selector-key-with-space",
        (("spec.placement.nodeSelector", {"node group": "dedicated-gpu"}),),
        ("spec.placement.nodeSelector", f"every key {LABEL_KEY}"),
    ),
    (
        "tp-node-selector-key-name-too-long",
        (("spec.placement.nodeSelector", {"shoal.dev/" + "n" * 64: "x"}),),
        ("spec.placement.nodeSelector", f"every key {LABEL_KEY}"),
    ),
    (
        "tp-node-selector-key-prefix-too-long",
        (("spec.placement.nodeSelector", {"p" * 254 + "/group": "x"}),),
        ("spec.placement.nodeSelector", f"every key {LABEL_KEY}"),
    ),
    (
        "tp-node-selector-value-100k",
        (("spec.placement.nodeSelector", {"shoal.dev/node-group": "v" * 102_400}),),
        ("spec.placement.nodeSelector", "may not be more than 63"),
    ),
    (
        "tp-node-selector-value-slash",
        (("spec.placement.nodeSelector", {"shoal.dev/node-group": "dedicated/gpu"}),),
        ("spec.placement.nodeSelector", LABEL_VALUE),
    ),
    (
        "tp-gpu-product-with-spaces",
        (("spec.placement.gpuProduct", "NVIDIA H100 80GB HBM3"),),
        ("spec.placement.gpuProduct", LABEL_VALUE),
    ),
    (
        "tp-gpu-product-empty",
        (("spec.placement.gpuProduct", ""),),
        ("spec.placement.gpuProduct", "at least 1 chars long"),
    ),
)

SELECTORS = _cases(
    TP,
    "shared",
    (
        "tp-selector-match-labels-key-with-space",
        (("spec.tenants.selector", {"matchLabels": {"team name": "ads"}}),),
        ("spec.tenants.selector.matchLabels", f"every key {LABEL_KEY}"),
    ),
    (
        "tp-selector-match-labels-value-with-space",
        (("spec.tenants.selector", {"matchLabels": {"team": "ads and labs"}}),),
        ("spec.tenants.selector.matchLabels", LABEL_VALUE),
    ),
    (
        "tp-selector-expression-key-invalid",
        (("spec.tenants.selector.matchExpressions.0.key", "-name"),),
        ("spec.tenants.selector.matchExpressions[0].key", LABEL_KEY),
    ),
    (
        "tp-selector-expression-value-invalid",
        (("spec.tenants.selector.matchExpressions.0.values", ["team ads"]),),
        ("spec.tenants.selector.matchExpressions[0].values[0]", LABEL_VALUE),
    ),
    # An empty selector matches every namespace, kube-system included.
    (
        "tp-selector-empty",
        (("spec.tenants", {"selector": {}}),),
        ("spec.tenants.selector", "empty selector admits every namespace"),
    ),
    (
        "tp-selector-empty-lists",
        (("spec.tenants", {"selector": {"matchLabels": {}, "matchExpressions": []}}),),
        ("spec.tenants.selector", "empty selector admits every namespace"),
    ),
    (
        "tp-selector-empty-beside-namespaces",
        (("spec.tenants", {"namespaces": ["team-ads"], "selector": {}}),),
        ("spec.tenants.selector", "empty selector admits every namespace"),
    ),
)

# Values that reach a rendered child object, bounded by what the child accepts.
RUNTIME_AND_SCALING = _cases(
    IM,
    "search-ranker",
    ("im-memory-negative", (("spec.runtime.memory", "-8Gi"),), ("spec.runtime.memory", QUANTITY)),
    ("im-cpu-zero", (("spec.runtime.cpu", "0"),), ("spec.runtime.cpu", QUANTITY)),
    ("im-cpu-limit-zero", (("spec.runtime.cpuLimit", "0"),), ("spec.runtime.cpuLimit", QUANTITY)),
    (
        "im-cpu-limit-word",
        (("spec.runtime.cpuLimit", "four"),),
        ("spec.runtime.cpuLimit", QUANTITY),
    ),
    (
        "im-cpu-limit-negative-number",
        (("spec.runtime.cpuLimit", -1),),
        ("spec.runtime.cpuLimit", "should be greater than 0"),
    ),
    ("im-cpu-zero-decimal", (("spec.runtime.cpu", "0.000"),), ("spec.runtime.cpu", QUANTITY)),
    (
        "im-cpu-negative-number",
        (("spec.runtime.cpu", -0.5),),
        ("spec.runtime.cpu", "should be greater than 0"),
    ),
    ("im-cpu-zero-number", (("spec.runtime.cpu", 0),), ("spec.runtime.cpu", "greater than 0")),
    (
        "im-memory-bad-exponent",
        (("spec.runtime.memory", "8e1.5"),),
        ("spec.runtime.memory", QUANTITY),
    ),
    (
        "im-shm-size-object",
        (("spec.runtime.shmSize", {"size": "1Gi"}),),
        ("spec.runtime.shmSize", "at most 0"),
    ),
    ("im-cpu-boolean", (("spec.runtime.cpu", True),), ("spec.runtime.cpu", "must not validate")),
    (
        "im-image-leading-space",
        (("spec.runtime.image", " nvcr.io/nvidia/tritonserver:24.10-py3"),),
        ("spec.runtime.image", "must be an image reference"),
    ),
    (
        "im-image-uppercase-repository",
        (("spec.runtime.image", "nvcr.io/NVIDIA/tritonserver:24.10-py3"),),
        ("spec.runtime.image", "must be an image reference"),
    ),
    (
        "im-image-two-tags",
        (("spec.runtime.image", "tritonserver:24.10:latest"),),
        ("spec.runtime.image", "must be an image reference"),
    ),
    (
        "im-scale-down-window-2h",
        (("spec.scaling.scaleDown.stabilizationWindow", "2h"),),
        ("spec.scaling.scaleDown.stabilizationWindow", DURATION, "from 0s to 1h"),
    ),
    (
        "im-scale-up-window-3601s",
        (("spec.scaling.scaleUp", {"stabilizationWindow": "3601s"}),),
        ("spec.scaling.scaleUp.stabilizationWindow", "from 0s to 1h"),
    ),
    (
        "im-p95-zero",
        (("spec.scaling.targetP95Latency", "0s"),),
        ("spec.scaling.targetP95Latency", DURATION, "from 1ms to 1h"),
    ),
    (
        "im-p95-below-a-millisecond",
        (("spec.scaling.targetP95Latency", "999us"),),
        ("spec.scaling.targetP95Latency", "from 1ms to 1h"),
    ),
    (
        "im-schedule-duration-zero",
        (("spec.scaling.schedules.0.duration", "0s"),),
        ("spec.scaling.schedules[0].duration", "from 1s to 744h"),
    ),
    (
        "im-override-delay-1m",
        (("spec.batchPolicy.maxQueueDelay", "1m"),),
        ("spec.batchPolicy.maxQueueDelay", "from 0s to 10s"),
    ),
    (
        "im-delay-hours-overflow",
        (("spec.batchPolicy.maxQueueDelay", "999999h"),),
        ("spec.batchPolicy.maxQueueDelay", DURATION),
    ),
)

DURATIONS = _cases(
    BP,
    "offline",
    (
        "bp-delay-999999h",
        (("spec.maxQueueDelay", "999999h"),),
        ("spec.maxQueueDelay", DURATION, "from 0s to 10s"),
    ),
    (
        "bp-delay-11s",
        (("spec.maxQueueDelay", "11s"),),
        ("spec.maxQueueDelay", "from 0s to 10s"),
    ),
    (
        "bp-delay-many-long-parts",
        (("spec.maxQueueDelay", "99999h99999h99999h"),),
        ("spec.maxQueueDelay", "from 0s to 10s"),
    ),
    (
        "bp-timeout-2h",
        (("spec.queuePolicy.timeout", "2h"),),
        ("spec.queuePolicy.timeout", "from 0s to 1h"),
    ),
    (
        "bp-timeout-negative",
        (("spec.queuePolicy.timeout", "-1s"),),
        ("spec.queuePolicy.timeout", DURATION),
    ),
)

SCHEDULES = _cases(
    IM,
    "search-ranker",
    *(
        (
            f"im-cron-{name}",
            (("spec.scaling.schedules.0.start", start),),
            (
                "spec.scaling.schedules[0].start",
                CRON,
            ),
        )
        for name, start in (
            ("minute-61", "61 * * * *"),
            ("hour-24", "0 24 * * *"),
            ("day-0", "0 8 0 * *"),
            ("day-32", "0 8 32 * *"),
            ("month-13", "0 8 * 13 *"),
            ("month-word", "0 8 * janvier *"),
            ("weekday-8", "0 8 * * 8"),
            ("step-zero", "*/0 * * * *"),
            ("step-60", "*/60 * * * *"),
            ("six-fields", "0 0 8 * * 1"),
            ("four-fields", "0 8 * *"),
            ("macro", "@daily"),
            ("quartz-last", "0 8 L * *"),
            ("range-missing-end", "0 8-  * * *"),
        )
    ),
    (
        "im-time-zone-mars",
        (("spec.scaling.schedules.0.timeZone", "Mars/Olympus"),),
        ("spec.scaling.schedules[0].timeZone", "must be an IANA time zone"),
    ),
    (
        "im-time-zone-offset",
        (("spec.scaling.schedules.0.timeZone", "+02:00"),),
        ("spec.scaling.schedules[0].timeZone", "must be an IANA time zone"),
    ),
    (
        "im-time-zone-lowercase",
        (("spec.scaling.schedules.0.timeZone", "europe/paris"),),
        ("spec.scaling.schedules[0].timeZone", "must be an IANA time zone"),
    ),
)

STORAGE = _cases(
    IM,
    "search-ranker",
    *(
        (
            f"im-storage-{name}",
            (("spec.model.storageUri", uri),),
            (
                "spec.model.storageUri",
                words,
            ),
        )
        for name, uri, words in (
            ("pvc-traversal", "pvc://claim/../../etc", "'..' path segments"),
            ("pvc-traversal-at-end", "pvc://claim/models/..", "'..' path segments"),
            ("dot-segment", "s3://models/./ranker", "'..' path segments"),
            ("encoded-traversal", "s3://models/%2e%2e/secrets", "'..' path segments"),
            ("encoded-upper-traversal", "gs://models/.%2E/secrets", "'..' path segments"),
            ("encoded-slash-traversal", "pvc://claim/..%2fetc", "'..' path segments"),
            ("backslash-traversal", "pvc://claim/..\\etc", "'..' path segments"),
            ("https-password", "https://user:password@models.example.com/ranker", "IRSA"),
            ("https-token", "https://token@models.example.com/ranker", "credentials"),
            ("query", "s3://models/ranker?versionId=3", "query (?)"),
            ("fragment", "https://models.example.com/ranker#v2", "fragment (#)"),
            ("s3-underscore", "s3://my_models/ranker", "must be s3://bucket/path"),
            ("s3-too-short", "s3://ab/ranker", "must name a bucket"),
            ("s3-too-long", f"s3://{'b' * 64}/ranker", "must name a bucket"),
            ("s3-double-dot", "s3://models..bucket/ranker", "must name a bucket"),
            ("s3-ip-address", "s3://192.168.10.5/ranker", "must name a bucket"),
            ("gs-google", "gs://my-google-models/ranker", "must name a bucket"),
            ("gs-part-too-long", f"gs://{'g' * 64}.models/ranker", "must name a bucket"),
            ("pvc-claim-too-long", f"pvc://{'c' * 254}/ranker", "must name a bucket or claim"),
            ("https-space-host", "https://models example.com/ranker", "must be s3://bucket/path"),
        )
    ),
)

S3_STORE = _cases(
    IM,
    "search-ranker",
    *(
        (
            f"im-s3-endpoint-{name}",
            (("spec.model.s3", {"endpoint": endpoint}),),
            ("spec.model.s3.endpoint", "must be an S3-compatible endpoint"),
        )
        for name, endpoint in (
            ("path", "http://minio.storage.svc:9000/models"),
            ("credentials", "http://key:secret@minio.storage.svc:9000"),
            ("scheme", "ftp://minio.storage.svc"),
            ("port", "http://minio.storage.svc:70000"),
        )
    ),
    (
        "im-s3-region-upper",
        (("spec.model.s3", {"region": "US-EAST-1"}),),
        ("spec.model.s3.region", "must be a region name"),
    ),
    (
        "im-s3-secret-name",
        (("spec.model.s3", {"credentialsSecret": "Store_Keys"}),),
        ("spec.model.s3.credentialsSecret", MATCH),
    ),
    (
        "im-s3-on-gcs",
        (
            ("spec.model.storageUri", "gs://labs-models/ranker"),
            ("spec.model.s3", {"endpoint": "http://minio.storage.svc:9000"}),
        ),
        ("spec.model.s3", "s3 applies to an s3:// storageUri only"),
    ),
)

# A model's files: how much room a copy takes, an archive URL's shape, a CA bundle.
_CLAIM_URI = ("spec.model.storageUri", "pvc://model-store/ranker")
MODEL_FILES = _cases(
    IM,
    "search-ranker",
    (
        "im-size-on-claim",
        (_CLAIM_URI, ("spec.model.size", "12Gi")),
        ("spec.model.size", "size applies to a copied model"),
    ),
    (
        "im-ca-bundle-on-claim",
        (_CLAIM_URI, ("spec.model.caBundle", {"name": "corporate-ca"})),
        ("spec.model.caBundle", "caBundle applies to a downloaded model"),
    ),
    *(
        (f"im-size-{name}", (("spec.model.size", size),), ("spec.model.size", words))
        for name, size, words in (
            ("unit", "12GB", "must be a whole number of bytes with an optional suffix"),
            ("fraction", "1.5Gi", "must be a whole number of bytes"),
            ("too-small", "512Ki", "must be from 1Mi to 1Pi"),
            ("too-large", "2Pi", "must be from 1Mi to 1Pi"),
        )
    ),
    (
        "im-ca-bundle-key-dots",
        (("spec.model.caBundle", {"name": "corporate-ca", "key": "..pem"}),),
        ("spec.model.caBundle.key", "must not be '.' nor start with '..'"),
    ),
    (
        "im-ca-bundle-key-path",
        (("spec.model.caBundle", {"name": "corporate-ca", "key": "certs/ca.pem"}),),
        ("spec.model.caBundle.key", "must be a ConfigMap key"),
    ),
    (
        "im-ca-bundle-name",
        (("spec.model.caBundle", {"name": "Corporate_CA"}),),
        ("spec.model.caBundle.name", MATCH),
    ),
    (
        "im-ca-bundle-no-name",
        (("spec.model.caBundle", {"key": "ca.crt"}),),
        ("spec.model.caBundle.name", REQUIRED),
    ),
    *(
        (f"im-storage-{name}", (("spec.model.storageUri", uri),), ("spec.model.storageUri", words))
        for name, uri, words in (
            ("s3-archive", "s3://models/ranker.tar.gz", "only an https:// URL may name an archive"),
            ("pvc-archive", "pvc://model-store/ranker.zip", "only an https:// URL may name"),
            ("https-xz", "https://files.example.com/ranker.tar.xz", "must end in .tar, .tar.gz"),
            ("https-gz", "https://files.example.com/ranker.onnx.gz", "no other archive"),
        )
    ),
)

CROSS_FIELD = _cases(
    IM,
    "search-ranker",
    (
        "im-warmup-above-override",
        (("spec.batchPolicy.maxBatchSize", 4),),
        ("spec.model.warmup.batchSizes", "at most the model's maxBatchSize"),
    ),
    (
        "im-warmup-above-default",
        (("spec.batchPolicy", DELETE), ("spec.model.warmup.batchSizes", [1, 64])),
        ("spec.model.warmup.batchSizes", "at most the model's maxBatchSize"),
    ),
    (
        "im-latest-with-versions",
        (("spec.model.versionPolicy", {"policy": "Latest", "versions": [3]}),),
        ("spec.model.versionPolicy.versions", "only to policy Specific"),
    ),
    (
        "im-all-with-versions",
        (("spec.model.versionPolicy", {"policy": "All", "versions": [1, 2]}),),
        ("spec.model.versionPolicy.versions", "only to policy Specific"),
    ),
    (
        "im-specific-with-latest",
        (("spec.model.versionPolicy", {"policy": "Specific", "versions": [1], "latest": 2}),),
        ("spec.model.versionPolicy.latest", "only to policy Latest"),
    ),
    (
        "im-all-with-latest",
        (("spec.model.versionPolicy", {"policy": "All", "latest": 3}),),
        ("spec.model.versionPolicy.latest", "only to policy Latest"),
    ),
    (
        "im-duplicate-inputs",
        (
            (
                "spec.model.inputs",
                [
                    {"name": "features", "dataType": "FP32", "dims": [128]},
                    {"name": "features", "dataType": "FP16", "dims": [64]},
                ],
            ),
        ),
        ("spec.model.inputs[1]", "Duplicate value"),
    ),
    (
        "im-duplicate-outputs",
        (
            (
                "spec.model.outputs",
                [
                    {"name": "score", "dataType": "FP32", "dims": [1]},
                    {"name": "score", "dataType": "FP32", "dims": [1]},
                ],
            ),
        ),
        ("spec.model.outputs[1]", "Duplicate value"),
    ),
    (
        "im-output-named-as-input",
        (("spec.model.outputs.0.name", "features"),),
        ("spec.model.outputs", "may not have the name of an input"),
    ),
    (
        "im-10000-parameters",
        (("spec.model.parameters", {f"p{i}": "1" for i in range(10_000)}),),
        ("spec.model.parameters", "must have at most 128"),
    ),
    (
        "im-parameter-name-with-space",
        (("spec.model.parameters", {"batch size": "8"}),),
        ("spec.model.parameters", "every key must be a parameter name"),
    ),
)

# A backend given a field it cannot use, or a device it cannot run on: Triton would
# refuse the rendered config, or the field would change nothing (docs/backends.md).
# From the Python model ads-ctr: its BatchPolicy is dropped for vllm, which refuses one.
_VLLM = (("spec.model.backend", "vllm"), ("spec.batchPolicy", DELETE))
_TENSOR = {"name": "prompt", "dataType": "STRING", "dims": [1]}
# Runners whose backend cannot read a model's tensors, given both, then one taken away.
_IN = ("spec.model.inputs", [{"name": "INPUT0", "dataType": "FP32", "dims": [4]}])
_OUT = ("spec.model.outputs", [{"name": "OUTPUT0", "dataType": "FP32", "dims": [4]}])
_AS_PLATFORM = (("spec.model.backend", DELETE),)
BACKENDS = _cases(
    IM,
    "ads-ctr",
    (
        "im-vllm-inputs",
        (*_VLLM, ("spec.model.inputs", [_TENSOR])),
        ("spec.model.inputs", "inputs do not apply to backend vllm"),
    ),
    (
        "im-vllm-outputs",
        (*_VLLM, ("spec.model.outputs", [{**_TENSOR, "name": "answer"}])),
        ("spec.model.outputs", "outputs do not apply to backend vllm"),
    ),
    (
        "im-vllm-warmup",
        (*_VLLM, ("spec.model.warmup", {"batchSizes": [1]})),
        ("spec.model.warmup", "warmup does not apply to backend vllm"),
    ),
    (
        "im-vllm-response-cache",
        (*_VLLM, ("spec.model.responseCache", True)),
        ("spec.model.responseCache", "responseCache does not apply to backend vllm"),
    ),
    (
        "im-vllm-two-instances",
        (*_VLLM, ("spec.model.instances", 2)),
        ("spec.model.instances", "instances must be 1 for backend vllm"),
    ),
    (
        "im-vllm-batch-policy",
        (("spec.model.backend", "vllm"),),
        ("spec.batchPolicy", "batchPolicy does not apply to backend vllm"),
    ),
    (
        "im-vllm-without-gpus",
        (*_VLLM, ("spec.runtime.gpus", 0)),
        ("spec.runtime.gpus", "runtime.gpus must be at least 1 for backend vllm"),
    ),
    (
        "im-tensorrtllm",
        (("spec.model.backend", "tensorrtllm"),),
        ("spec.model.backend", "backend tensorrtllm is not supported"),
    ),
    (
        "im-tensorrt-without-gpus",
        (("spec.model.backend", "tensorrt"), ("spec.runtime.gpus", 0)),
        ("spec.runtime.gpus", "runtime.gpus must be at least 1 for backend tensorrt"),
    ),
    (
        "im-tensorrt-plan-without-gpus",
        (
            ("spec.model.backend", DELETE),
            ("spec.model.platform", "tensorrt_plan"),
            ("spec.runtime.gpus", 0),
        ),
        ("spec.runtime.gpus", "at least 1 for backend tensorrt and platform tensorrt_plan"),
    ),
    (
        "im-openvino-on-a-gpu",
        (("spec.model.backend", "openvino"),),  # runtime.gpus defaults to 1
        ("spec.runtime.gpus", "runtime.gpus must be 0 for backend openvino"),
    ),
    (
        "im-pytorch-without-inputs",
        (_IN, _OUT, ("spec.model.backend", "pytorch"), ("spec.model.inputs", DELETE)),
        ("spec.model.inputs", "inputs are required for backend pytorch", "TorchScript"),
    ),
    (
        "im-pytorch-libtorch-without-outputs",
        (
            _IN,
            _OUT,
            *_AS_PLATFORM,
            ("spec.model.platform", "pytorch_libtorch"),
            ("spec.model.outputs", []),
        ),
        ("spec.model.outputs", "outputs are required for", "platform pytorch_libtorch"),
    ),
    (
        "im-fil-without-inputs",
        (_IN, _OUT, ("spec.model.backend", "fil"), ("spec.model.inputs", [])),
        ("spec.model.inputs", "inputs are required for backend fil"),
    ),
    (
        "im-fil-without-outputs",
        (_IN, _OUT, ("spec.model.backend", "fil"), ("spec.model.outputs", DELETE)),
        ("spec.model.outputs", "outputs are required for backend fil"),
    ),
    (
        "im-tensorflow-without-inputs",
        (_IN, _OUT, ("spec.model.backend", "tensorflow"), ("spec.model.inputs", DELETE)),
        ("spec.model.inputs", "inputs are required for backend tensorflow", "SavedModel"),
    ),
    (
        "im-tensorflow-graphdef-without-outputs",
        (
            _IN,
            _OUT,
            *_AS_PLATFORM,
            ("spec.model.platform", "tensorflow_graphdef"),
            ("spec.model.outputs", DELETE),
        ),
        ("spec.model.outputs", "outputs are required for", "platform tensorflow_graphdef"),
    ),
)

# An explicit null (an empty YAML value, a missing Helm value) on a scalar field with a
# default. (For an object or list, null means its defaults: tests/support/unusual.py.)
_SCRATCH = {"name": "extra", "mountPath": "/etc/shoal-extra", "emptyDir": {"sizeLimit": "1Gi"}}
POD_OVERRIDES = _cases(
    IM,
    "search-ranker",
    (
        "im-pod-label-selected-by-shoal",
        (("spec.runtime.podLabels", {"shoal.dev/gateway": "shared"}),),
        ("spec.runtime.podLabels", "must not be a label Shoal sets"),
    ),
    (
        "im-pod-label-app-name",
        (("spec.runtime.podLabels", {"app.kubernetes.io/instance": "other"}),),
        ("spec.runtime.podLabels", "must not be a label Shoal sets"),
    ),
    (
        "im-pod-label-key",
        (("spec.runtime.podLabels", {"-team": "a"}),),
        ("spec.runtime.podLabels", LABEL_KEY),
    ),
    (
        "im-pod-label-value",
        (("spec.runtime.podLabels", {"team": "a b"}),),
        ("spec.runtime.podLabels.team", LABEL_VALUE),
    ),
    (
        "im-pod-annotation-kueue",
        (("spec.runtime.podAnnotations", {"kueue.x-k8s.io/workload": "w"}),),
        ("spec.runtime.podAnnotations", "must not be under a prefix Shoal or Kueue"),
    ),
    (
        "im-env-home",
        (("spec.runtime.env", [{"name": "HOME", "value": "/root"}]),),
        ("spec.runtime.env[0].name", "must not be one Shoal sets"),
    ),
    (
        "im-env-name",
        (("spec.runtime.env", [{"name": "1LEVEL", "value": "1"}]),),
        ("spec.runtime.env[0].name", "must be an environment variable name"),
    ),
    (
        "im-env-value-and-from",
        (
            (
                "spec.runtime.env",
                [
                    {
                        "name": "LEVEL",
                        "value": "1",
                        "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}},
                    }
                ],
            ),
        ),
        ("spec.runtime.env[0]", "exactly one of value and valueFrom"),
    ),
    (
        "im-env-two-refs",
        (
            (
                "spec.runtime.env",
                [
                    {
                        "name": "LEVEL",
                        "valueFrom": {
                            "secretKeyRef": {"name": "s", "key": "k"},
                            "configMapKeyRef": {"name": "c", "key": "k"},
                        },
                    }
                ],
            ),
        ),
        ("spec.runtime.env[0].valueFrom", "exactly one of secretKeyRef and configMapKeyRef"),
    ),
    (
        "im-env-key",
        (
            (
                "spec.runtime.env",
                [{"name": "LEVEL", "valueFrom": {"secretKeyRef": {"name": "s", "key": "a/b"}}}],
            ),
        ),
        ("spec.runtime.env[0].valueFrom.secretKeyRef.key", "must be a Secret or ConfigMap key"),
    ),
    (
        "im-env-from-both",
        (
            (
                "spec.runtime.envFrom",
                [{"secretRef": {"name": "s"}, "configMapRef": {"name": "c"}}],
            ),
        ),
        ("spec.runtime.envFrom[0]", "exactly one of secretRef and configMapRef"),
    ),
    (
        "im-extra-arg-port",
        (("spec.runtime.extraArgs", ["--http-port=9000"]),),
        ("spec.runtime.extraArgs[0]", "must not be a flag Shoal sets"),
    ),
    (
        "im-extra-arg-repository",
        (("spec.runtime.extraArgs", ["--model-repository=/tmp"]),),
        ("spec.runtime.extraArgs[0]", "must not be a flag Shoal sets"),
    ),
    (
        "im-extra-arg-shape",
        (("spec.runtime.extraArgs", ["-v"]),),
        ("spec.runtime.extraArgs[0]", "must be a Triton flag written --name"),
    ),
    (
        "im-volume-over-models",
        (("spec.runtime.volumes", [{**_SCRATCH, "mountPath": "/models/x"}]),),
        ("spec.runtime.volumes[0].mountPath", "must be apart from where Shoal mounts"),
    ),
    (
        "im-volume-above-shm",
        (("spec.runtime.volumes", [{**_SCRATCH, "mountPath": "/dev"}]),),
        ("spec.runtime.volumes[0].mountPath", "must be apart from where Shoal mounts"),
    ),
    (
        "im-volume-dot-dot",
        (("spec.runtime.volumes", [{**_SCRATCH, "mountPath": "/etc/../models"}]),),
        ("spec.runtime.volumes[0].mountPath", "must not contain '..'"),
    ),
    (
        "im-volume-relative",
        (("spec.runtime.volumes", [{**_SCRATCH, "mountPath": "etc/extra"}]),),
        ("spec.runtime.volumes[0].mountPath", "must be an absolute path"),
    ),
    (
        "im-volume-name-shoals",
        (("spec.runtime.volumes", [{**_SCRATCH, "name": "model-repository"}]),),
        ("spec.runtime.volumes[0].name", "must not be one of the volumes Shoal renders"),
    ),
    (
        "im-volume-two-sources",
        (("spec.runtime.volumes", [{**_SCRATCH, "secret": {"secretName": "s"}}]),),
        ("spec.runtime.volumes[0]", "exactly one of configMap, secret"),
    ),
    (
        "im-volume-no-source",
        (("spec.runtime.volumes", [{"name": "extra", "mountPath": "/etc/x"}]),),
        ("spec.runtime.volumes[0]", "exactly one of configMap, secret"),
    ),
    (
        "im-volume-same-path",
        (
            (
                "spec.runtime.volumes",
                [_SCRATCH, {**_SCRATCH, "name": "other"}],
            ),
        ),
        ("spec.runtime.volumes", "volumes must each have their own mountPath"),
    ),
    (
        "im-volume-medium",
        (
            (
                "spec.runtime.volumes",
                [{**_SCRATCH, "emptyDir": {"sizeLimit": "1Gi", "medium": "HugePages"}}],
            ),
        ),
        ("spec.runtime.volumes[0].emptyDir.medium", "must be Memory"),
    ),
    (
        "im-pull-secret-as-name",
        (("spec.runtime.imagePullSecrets", ["mirror"]),),
        ("spec.runtime.imagePullSecrets[0]", "must be of type object"),
    ),
    (
        "im-volume-scratch-unbounded",
        (("spec.runtime.volumes", [{**_SCRATCH, "emptyDir": {}}]),),
        ("spec.runtime.volumes[0].emptyDir.sizeLimit", REQUIRED),
    ),
)

NULLS = (
    Case(
        "im-min-replicas-null",
        IM,
        "search-ranker",
        (("spec.scaling.minReplicas", None),),
        ("spec.scaling.minReplicas", NULL),
    ),
    Case(
        "im-memory-null",
        IM,
        "search-ranker",
        (("spec.runtime.memory", None),),
        ("spec.runtime.memory", NULL),
    ),
    Case(
        "im-time-zone-null",
        IM,
        "search-ranker",
        (("spec.scaling.schedules.0.timeZone", None),),
        ("spec.scaling.schedules[0].timeZone", NULL),
    ),
    Case(
        "bp-max-batch-null",
        BP,
        "offline",
        (("spec.maxBatchSize", None),),
        ("spec.maxBatchSize", NULL),
    ),
    Case(
        "bp-timeout-action-null",
        BP,
        "offline",
        (("spec.queuePolicy.timeoutAction", None),),
        # An enum refuses the null before the rule runs.
        ("spec.queuePolicy.timeoutAction", "Unsupported value: null"),
    ),
    Case(
        "tp-toleration-operator-null",
        TP,
        "critical",
        (("spec.placement.tolerations.0.operator", None),),
        (f"{TOLERATION}.operator", "Unsupported value: null"),
    ),
)

# Refused by the admission policy: what a model alone needs exceeds its pool's
# per-namespace quota.
_WINDOW = {"name": "peak", "start": "0 8 * * 1-5", "duration": "10h"}
ADMISSION = (
    Case(
        "im-admission-floor-over-gpus",
        IM,
        "search-ranker",
        (("spec.scaling.schedules", [{**_WINDOW, "minReplicas": 5}]),),
        ("spec.scaling.schedules[0].minReplicas", "scheduled floor peak needs 5 GPUs", "allows 4"),
        pool={"quota": {"gpus": 4}},
    ),
    Case(
        "im-admission-second-floor-over-gpus",
        IM,
        "search-ranker",
        (
            ("spec.runtime.gpus", 2),
            (
                "spec.scaling.schedules",
                [{**_WINDOW, "minReplicas": 2}, {**_WINDOW, "name": "sale", "minReplicas": 3}],
            ),
        ),
        ("spec.scaling.schedules[1].minReplicas", "floor sale needs 6 GPUs", "allows 5"),
        pool={"quota": {"gpus": 5}},
    ),
    Case(
        "im-admission-warm-pool-over-replicas",
        IM,
        "search-ranker",
        (("spec.scaling.minReplicas", 3),),
        ("spec.scaling.minReplicas", "warm pool needs 3 replicas", "allows 2"),
        pool={"quota": {"gpus": 100, "replicas": 2}},
    ),
    Case(
        "im-admission-floor-over-replicas",
        IM,
        "search-ranker",
        (("spec.runtime.gpus", 0),),
        ("spec.scaling.schedules[0].minReplicas", "floor business-hours needs 4 replicas"),
        pool={"quota": {"gpus": 0, "replicas": 3}},
    ),
)


# Where a model's pods run: what the Pod API would refuse in a Deployment's pod template.
_NODE = "spec.runtime.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
_NODE_EXPRESSION = f"{_NODE}.nodeSelectorTerms[0].matchExpressions[0]"
_ANTI = "spec.runtime.affinity.podAntiAffinity.requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED_NODE = (
    "spec.runtime.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
)
_EXISTS = {"key": "example.com/gpu-memory-gb", "operator": "Exists"}
_SPREAD = {
    "maxSkew": 1,
    "topologyKey": "kubernetes.io/hostname",
    "whenUnsatisfiable": "DoNotSchedule",
}


def _node_requirement(**requirement: Any) -> tuple[tuple[str, Any], ...]:
    term = {"matchExpressions": [{"key": "example.com/gpu-memory-gb", **requirement}]}
    return ((_NODE, {"nodeSelectorTerms": [term]}),)


def _anti_affinity(**term: Any) -> tuple[tuple[str, Any], ...]:
    return ((_ANTI, [term]),)


def _spread(*constraints: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    return (("spec.runtime.topologySpreadConstraints", list(constraints)),)


PLACEMENT_OVERRIDES = _cases(
    IM,
    "search-ranker",
    (
        "im-affinity-node-in-without-values",
        _node_requirement(operator="In"),
        (f"{_NODE_EXPRESSION}.values", "values must be given for operator In and NotIn"),
    ),
    (
        "im-affinity-node-exists-with-values",
        _node_requirement(operator="Exists", values=["40"]),
        (f"{_NODE_EXPRESSION}.values", "values must be empty for operator Exists"),
    ),
    (
        "im-affinity-node-gt-word",
        _node_requirement(operator="Gt", values=["large"]),
        (f"{_NODE_EXPRESSION}.values", "values must be one whole number"),
    ),
    (
        "im-affinity-node-lt-two-values",
        _node_requirement(operator="Lt", values=["40", "80"]),
        (f"{_NODE_EXPRESSION}.values", "values must be one whole number"),
    ),
    (
        "im-affinity-node-operator",
        _node_requirement(operator="Near", values=["a"]),
        (f"{_NODE_EXPRESSION}.operator", ENUM),
    ),
    (
        "im-affinity-node-key",
        (
            (
                _NODE,
                {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "-gpu", "operator": "Exists"}]}
                    ]
                },
            ),
        ),
        (f"{_NODE_EXPRESSION}.key", LABEL_KEY),
    ),
    (
        "im-affinity-node-value",
        _node_requirement(operator="In", values=["a b"]),
        (f"{_NODE_EXPRESSION}.values[0]", LABEL_VALUE),
    ),
    (
        "im-affinity-node-no-terms",
        ((_NODE, {"nodeSelectorTerms": []}),),
        (f"{_NODE}.nodeSelectorTerms", "at least 1 items"),
    ),
    (
        "im-affinity-node-weight-zero",
        ((_PREFERRED_NODE, [{"weight": 0, "preference": {"matchExpressions": [_EXISTS]}}]),),
        (f"{_PREFERRED_NODE}[0].weight", MIN1),
    ),
    (
        "im-affinity-pod-weight-over-100",
        (
            (
                "spec.runtime.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution",
                [{"weight": 101, "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname"}}],
            ),
        ),
        (
            "spec.runtime.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[0]"
            ".weight",
            "less than or equal to 100",
        ),
    ),
    (
        "im-affinity-pod-without-topology-key",
        _anti_affinity(labelSelector={"matchLabels": {"app": "noisy"}}),
        (f"{_ANTI}[0].topologyKey", REQUIRED),
    ),
    (
        "im-affinity-pod-empty-topology-key",
        _anti_affinity(topologyKey=""),
        (f"{_ANTI}[0].topologyKey", "at least 1 chars long"),
    ),
    (
        "im-affinity-pod-namespace",
        _anti_affinity(topologyKey="kubernetes.io/hostname", namespaces=["Team_A"]),
        (f"{_ANTI}[0].namespaces[0]", "must be a DNS label"),
    ),
    (
        "im-affinity-pod-selector-in-without-values",
        _anti_affinity(
            topologyKey="kubernetes.io/hostname",
            labelSelector={"matchExpressions": [{"key": "app", "operator": "In"}]},
        ),
        (f"{_ANTI}[0].labelSelector.matchExpressions[0].values", "must be non-empty for In"),
    ),
    (
        "im-spread-max-skew-zero",
        _spread({**_SPREAD, "maxSkew": 0}),
        ("spec.runtime.topologySpreadConstraints[0].maxSkew", MIN1),
    ),
    (
        "im-spread-when-unsatisfiable",
        _spread({**_SPREAD, "whenUnsatisfiable": "Never"}),
        ("spec.runtime.topologySpreadConstraints[0].whenUnsatisfiable", ENUM),
    ),
    (
        "im-spread-without-topology-key",
        _spread({k: v for k, v in _SPREAD.items() if k != "topologyKey"}),
        ("spec.runtime.topologySpreadConstraints[0].topologyKey", REQUIRED),
    ),
    (
        "im-spread-min-domains-schedule-anyway",
        _spread({**_SPREAD, "whenUnsatisfiable": "ScheduleAnyway", "minDomains": 3}),
        (
            "spec.runtime.topologySpreadConstraints[0].minDomains",
            "minDomains can only be used with whenUnsatisfiable DoNotSchedule",
        ),
    ),
    (
        "im-spread-min-domains-zero",
        _spread({**_SPREAD, "minDomains": 0}),
        ("spec.runtime.topologySpreadConstraints[0].minDomains", MIN1),
    ),
    (
        "im-spread-duplicate",
        _spread(_SPREAD, {**_SPREAD, "maxSkew": 2}),
        ("spec.runtime.topologySpreadConstraints[1]", "Duplicate value"),
    ),
    (
        "im-spread-match-label-key-selected",
        _spread(
            {
                **_SPREAD,
                "labelSelector": {"matchLabels": {"app": "ranker"}},
                "matchLabelKeys": ["app"],
            }
        ),
        (
            "spec.runtime.topologySpreadConstraints[0].matchLabelKeys",
            "must not name a key labelSelector already selects on",
        ),
    ),
    (
        "im-spread-match-label-key-shoals",
        _spread({**_SPREAD, "matchLabelKeys": ["shoal.dev/model"]}),
        (
            "spec.runtime.topologySpreadConstraints[0].matchLabelKeys[0]",
            "must not be a label Shoal sets",
        ),
    ),
)

CASES += PLACEMENT + SELECTORS + RUNTIME_AND_SCALING + DURATIONS + SCHEDULES + STORAGE + S3_STORE
CASES += CROSS_FIELD + BACKENDS + POD_OVERRIDES + NULLS + ADMISSION
CASES += MODEL_FILES + PLACEMENT_OVERRIDES

GATEWAY_SIZES = _cases(
    TP,
    "critical",
    *(
        (
            f"tp-max-request-body-{name}",
            (("spec.gateway.maxRequestBody", size),),
            ("spec.gateway.maxRequestBody", words),
        )
        for name, size, words in (
            ("unit", "64MB", "must be a whole number of bytes with an optional suffix"),
            ("fraction", "1.5Mi", "must be a whole number of bytes"),
            ("too-small", "512", "must be from 1Ki to 2Gi"),
            ("too-large", "3Gi", "must be from 1Ki to 2Gi"),
        )
    ),
)
CASES += GATEWAY_SIZES
