"""The ValidatingAdmissionPolicy that lets the API server itself refuse a model its
pool does not admit, or whose warm pool or scheduled floors alone exceed the pool's
per-namespace quota (GPUs, replicas).

It takes every TenantPool as a parameter and checks the one the model names; when no
pool exists yet the request is allowed and the operator reports TenantPoolNotFound.
The operator applies the same rules (shoal.api.admission) for objects that were
admitted before a pool changed.
"""

from __future__ import annotations

from typing import Any

NAME = "shoal-tenant-pool-admission"

_SELECTOR_MATCHES = (
    "has(params.spec.tenants.selector) && "
    "(!has(params.spec.tenants.selector.matchLabels) || "
    "params.spec.tenants.selector.matchLabels.all(k, k in variables.labels && "
    "variables.labels[k] == params.spec.tenants.selector.matchLabels[k])) && "
    "(!has(params.spec.tenants.selector.matchExpressions) || "
    "params.spec.tenants.selector.matchExpressions.all(e, "
    "e.operator == 'In' ? (e.key in variables.labels && variables.labels[e.key] in e.values) : "
    "e.operator == 'NotIn' ? !(e.key in variables.labels && variables.labels[e.key] in e.values) : "
    "e.operator == 'Exists' ? e.key in variables.labels : !(e.key in variables.labels)))"
)


def _floor_message(index: str, needs: str, quota: str, unit: str) -> str:
    """The message for the scheduled window at ``index`` whose floor needs ``needs``."""
    window = f"variables.floors[{index}]"
    return (
        f"'spec.scaling.schedules[' + string({index}) + '].minReplicas: the scheduled floor ' + "
        f"{window}.name + ' needs ' + string({needs}) + ' {unit}; TenantPool ' + "
        f"params.metadata.name + ' allows ' + string({quota}) + ' per namespace'"
    )


def admission_policy() -> list[dict[str, Any]]:
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": NAME, "labels": {"app.kubernetes.io/part-of": "shoal"}},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "shoal.dev/v1alpha1", "kind": "TenantPool"},
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": ["shoal.dev"],
                        "apiVersions": ["v1alpha1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["inferencemodels"],
                    }
                ]
            },
            # Only a new model, or a changed spec, is judged: metadata and status updates of
            # a model its pool has since stopped admitting must go through.
            "matchConditions": [
                {
                    "name": "spec-is-new-or-changed",
                    "expression": "request.operation == 'CREATE' || object.spec != oldObject.spec",
                }
            ],
            "variables": [
                {"name": "thisPool", "expression": "params.metadata.name == object.spec.pool"},
                {"name": "labels", "expression": "namespaceObject.metadata.labels"},
                {"name": "nsName", "expression": "namespaceObject.metadata.name"},
                {"name": "gpus", "expression": "object.spec.runtime.gpus"},
                {"name": "warm", "expression": "object.spec.scaling.minReplicas"},
                {
                    "name": "floors",
                    "expression": "has(object.spec.scaling.schedules) ? "
                    "object.spec.scaling.schedules : []",
                },
                {"name": "quotaGpus", "expression": "params.spec.quota.gpus"},
                {
                    "name": "quotaReplicas",
                    # -1: no replica quota.
                    "expression": "has(params.spec.quota.replicas) ? "
                    "params.spec.quota.replicas : -1",
                },
                # Indices of the scheduled windows whose floor alone exceeds the quota.
                {
                    "name": "overGpus",
                    "expression": "lists.range(size(variables.floors)).filter(i, "
                    "variables.floors[i].minReplicas * variables.gpus > variables.quotaGpus)",
                },
                {
                    "name": "overReplicas",
                    "expression": "lists.range(size(variables.floors)).filter(i, "
                    "variables.quotaReplicas >= 0 && "
                    "variables.floors[i].minReplicas > variables.quotaReplicas)",
                },
            ],
            "validations": [
                {
                    "expression": "!variables.thisPool || "
                    "(has(params.spec.tenants.namespaces) && "
                    "variables.nsName in params.spec.tenants.namespaces) || "
                    f"({_SELECTOR_MATCHES})",
                    "messageExpression": "'spec.pool: TenantPool ' + params.metadata.name + "
                    "' does not admit namespace ' + variables.nsName",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.thisPool || "
                    "variables.warm * variables.gpus <= variables.quotaGpus",
                    "messageExpression": "'spec.scaling.minReplicas: the warm pool needs ' + "
                    "string(variables.warm * variables.gpus) + "
                    "' GPUs; TenantPool ' + params.metadata.name + ' allows ' + "
                    "string(variables.quotaGpus) + ' per namespace'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.thisPool || size(variables.overGpus) == 0",
                    "messageExpression": _floor_message(
                        "variables.overGpus[0]",
                        "variables.floors[variables.overGpus[0]].minReplicas * variables.gpus",
                        "variables.quotaGpus",
                        "GPUs",
                    ),
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.thisPool || variables.quotaReplicas < 0 || "
                    "variables.warm <= variables.quotaReplicas",
                    "messageExpression": "'spec.scaling.minReplicas: the warm pool needs ' + "
                    "string(variables.warm) + ' replicas; TenantPool ' + params.metadata.name + "
                    "' allows ' + string(variables.quotaReplicas) + ' per namespace'",
                    "reason": "Forbidden",
                },
                {
                    "expression": "!variables.thisPool || size(variables.overReplicas) == 0",
                    "messageExpression": _floor_message(
                        "variables.overReplicas[0]",
                        "variables.floors[variables.overReplicas[0]].minReplicas",
                        "variables.quotaReplicas",
                        "replicas",
                    ),
                    "reason": "Forbidden",
                },
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": NAME, "labels": {"app.kubernetes.io/part-of": "shoal"}},
        "spec": {
            "policyName": NAME,
            "validationActions": ["Deny"],
            "paramRef": {"selector": {}, "parameterNotFoundAction": "Allow"},
        },
    }
    return [policy, binding]
