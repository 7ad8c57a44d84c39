"""What a TenantPool renders into its tenant namespaces, and whom it admits."""

from __future__ import annotations

from typing import Any

from shoal.api.admission import admits
from shoal.api.tenantpool import TenantPool
from shoal.render.pool_plan import admitted_namespaces, live_namespaces
from shoal.render.tenancy import tenant_objects
from tests.support.resources import example


def pool(name: str = "critical") -> TenantPool:
    doc = example("TenantPool", name)
    doc["metadata"]["uid"] = "u-1"
    return TenantPool.model_validate(doc)


def by_name(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in objs}


def test_quota_counts_only_the_pools_pods() -> None:
    quota = by_name(tenant_objects(pool(), "team-search"))["shoal-pool-critical"]
    assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "8"}
    scope = quota["spec"]["scopeSelector"]["matchExpressions"][0]
    assert scope == {
        "scopeName": "PriorityClass",
        "operator": "In",
        "values": ["shoal-pool-critical"],
    }
    shared = by_name(tenant_objects(pool("shared"), "team-ads"))["shoal-pool-shared"]
    assert shared["spec"]["hard"]["pods"] == "8"


def test_network_policies_name_namespaces_only_by_their_immutable_label() -> None:
    policies = [o for o in tenant_objects(pool(), "team-search") if o["kind"] == "NetworkPolicy"]
    names = {p["metadata"]["name"] for p in policies}
    assert names == {
        "shoal-critical-default-deny",
        "shoal-critical-allow-dns",
        "shoal-critical-allow-model-download",
        "shoal-critical-allow-callers",
        "shoal-critical-allow-metrics",
    }
    for policy in policies:
        # Every policy selects the pool's pods (the download policy only some of them).
        assert policy["spec"]["podSelector"]["matchLabels"]["shoal.dev/pool"] == "critical"
        for rule in policy["spec"].get("ingress", []) + policy["spec"].get("egress", []):
            for peer in rule.get("from", []) + rule.get("to", []):
                selector = peer.get("namespaceSelector")
                if selector is not None:
                    assert "matchLabels" not in selector
                    keys = {e["key"] for e in selector["matchExpressions"]}
                    assert keys == {"kubernetes.io/metadata.name"}
    callers = by_name(policies)["shoal-critical-allow-callers"]["spec"]["ingress"][0]
    assert [p["port"] for p in callers["ports"]] == [8000, 8001]
    metrics = by_name(policies)["shoal-critical-allow-metrics"]["spec"]["ingress"][0]
    assert [p["port"] for p in metrics["ports"]] == [8002]


def test_admission_by_name_and_by_selector() -> None:
    assert admits(pool(), "team-search", {})
    assert not admits(pool(), "team-ads", {"kubernetes.io/metadata.name": "team-ads"})
    shared = pool("shared")
    assert admits(shared, "team-ads", {"kubernetes.io/metadata.name": "team-ads"})
    assert not admits(shared, "evil", {"kubernetes.io/metadata.name": "evil"})


def test_terminating_namespaces_are_not_admitted() -> None:
    namespaces = [
        {"metadata": {"name": "team-ads", "labels": {"kubernetes.io/metadata.name": "team-ads"}}},
        {
            "metadata": {
                "name": "team-labs",
                "deletionTimestamp": "2026-01-01T00:00:00Z",
                "labels": {"kubernetes.io/metadata.name": "team-labs"},
            }
        },
    ]
    assert admitted_namespaces(pool("shared"), live_namespaces(namespaces)) == ["team-ads"]
