"""The ValidatingAdmissionPolicy that lets the API server itself refuse a model its
pool does not admit, or whose warm pool alone exceeds the pool's GPU quota.

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
                    "object.spec.scaling.minReplicas * object.spec.runtime.gpus "
                    "<= params.spec.quota.gpus",
                    "messageExpression": "'spec.scaling.minReplicas: the warm pool needs ' + "
                    "string(object.spec.scaling.minReplicas * object.spec.runtime.gpus) + "
                    "' GPUs; TenantPool ' + params.metadata.name + ' allows ' + "
                    "string(params.spec.quota.gpus) + ' per namespace'",
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
