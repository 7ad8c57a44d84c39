"""A corpus of malformed custom resources, each with what the rejection must say.

Every case starts from a valid example, breaks one thing, and lists fragments the API
server's message must contain: always the path of the offending field, and a word of
the reason. The same objects must be refused by the pydantic models too.
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

    def build(self) -> dict[str, Any]:
        obj = example(self.kind, self.example)
        for path, value in self.changes:
            _set(obj, path, value)
        obj["metadata"]["name"] = obj["metadata"].get("name", "x")
        return obj


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
        ("spec.maxQueueDelay", MATCH),
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
        ("spec.maxQueueDelay", MATCH),
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
        ("spec.pool", MATCH),
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
        ("spec.model.storageUri", MATCH),
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
        ("spec.runtime.memory", MATCH),
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
        ("metadata.name must be a DNS-1035 label",),
    ),
    Case(
        "im-name-too-long",
        IM,
        "search-ranker",
        (("metadata.name", "r" * 60),),
        ("metadata.name must be a DNS-1035 label", "at most 52"),
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
