"""The operator's RBAC is least privilege: named verbs and resources, no Secrets.

That it is also sufficient is shown by the cluster tier, which runs the operator with
this ServiceAccount's token and nothing else."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from shoal.api.kinds import KINDS

RBAC = Path(__file__).resolve().parents[2] / "manifests" / "base" / "rbac.yaml"


def rules() -> list[dict[str, Any]]:
    role = next(d for d in yaml.safe_load_all(RBAC.read_text()) if d["kind"] == "ClusterRole")
    return list(role["rules"])


def test_no_wildcards_anywhere() -> None:
    for rule in rules():
        for key in ("apiGroups", "resources", "verbs", "nonResourceURLs"):
            assert "*" not in rule.get(key, []), rule
        assert "resourceNames" not in rule or rule["resourceNames"]


def test_no_secrets_and_no_escalation_verbs() -> None:
    for rule in rules():
        assert "secrets" not in rule.get("resources", []), rule
        assert not {"escalate", "bind", "impersonate"} & set(rule["verbs"]), rule
        assert not {"roles", "clusterroles", "rolebindings", "clusterrolebindings"} & set(
            rule.get("resources", [])
        ), rule


def test_custom_resources_are_never_created_or_deleted_by_the_operator() -> None:
    """GitOps owns them: the operator patches status (and its own finalizer on a pool)."""
    for rule in rules():
        if rule.get("apiGroups") == ["shoal.dev"]:
            assert not {"create", "update", "delete"} & set(rule["verbs"]), rule


def test_deletes_only_the_kinds_a_planner_prunes() -> None:
    """Delete is granted for the children a planner renders and prunes once it stops
    rendering them (shoal.reconcile.prune): quotas and policies of namespaces a pool
    releases, a PriorityClass whose value changed, Kueue objects of capacity unset, an
    overflow stack of spec.overflow unset. Never for the custom resources, namespaces,
    pods or anything else the operator only reads."""
    deletable = {
        r for rule in rules() if "delete" in rule["verbs"] for r in rule.get("resources", [])
    }
    assert deletable == {k.plural for k in KINDS if k.planned_by}
    assert not deletable & {"inferencemodels", "tenantpools", "batchpolicies", "namespaces", "pods"}


def test_the_gateway_namespaces_roles_grant_only_what_is_used() -> None:
    """In the gateways' namespace: the agent reads ConfigMaps; the operator may delete a
    gateway's objects there (when a pool stops having one), nowhere else."""
    manifests = RBAC.parents[1]
    docs = [
        *yaml.safe_load_all((manifests / "gateways" / "gateways.yaml").read_text()),
        *yaml.safe_load_all((RBAC.parent / "gateway-rights.yaml").read_text()),
    ]
    roles = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Role"}
    assert {d["metadata"]["namespace"] for d in roles.values()} == {"shoal-gateways"}
    assert roles["shoal-gateway"]["rules"] == [
        {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "watch"]}
    ]
    operator = roles["shoal-operator"]["rules"]
    assert {v for rule in operator for v in rule["verbs"]} == {"delete"}
    assert {r for rule in operator for r in rule["resources"]} == {
        "configmaps",
        "services",
        "deployments",
        "poddisruptionbudgets",
    }
