"""Egress of a pool's model pods: what the pure renderers allow, mode by mode.

tests/e2e/test_network_isolation.py checks the same policies with an independent
analyzer; these tests pin down the objects themselves.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
from pydantic import ValidationError

from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import ModelDownload, TenantPool
from shoal.render.access import access_condition, access_problems
from shoal.render.desired import model_objects
from shoal.render.tenancy import (
    DEFAULT_CLUSTER_CIDRS,
    network_policies,
    outside_cluster,
    tenant_objects,
    withdrawn_namespace_objects,
    withdrawn_namespaces,
)
from tests.support.resources import example

PROXY = {
    "url": "http://egress-proxy.egress.svc.cluster.local:3128",
    "namespace": "egress",
    "podSelector": {"matchLabels": {"app": "egress-proxy"}},
    "port": 3128,
}


def pool(download: dict[str, Any] | None = None, name: str = "critical") -> TenantPool:
    doc = example("TenantPool", name)
    doc["metadata"]["uid"] = "u-1"
    if download is not None:
        doc["spec"]["access"]["modelDownload"] = download
    return TenantPool.model_validate(doc)


def policies(tp: TenantPool, **kwargs: Any) -> dict[str, dict[str, Any]]:
    return {
        p["metadata"]["name"].removeprefix(f"shoal-{tp.metadata.name}-"): p
        for p in network_policies(tp, "team-search", **kwargs)
    }


def download_rules(tp: TenantPool, **kwargs: Any) -> list[dict[str, Any]]:
    rules: list[dict[str, Any]] = policies(tp, **kwargs)["allow-model-download"]["spec"]["egress"]
    return rules


def deployment(storage_uri: str, tp: TenantPool) -> dict[str, Any]:
    doc = example("InferenceModel", "search-ranker")
    doc["spec"]["model"]["storageUri"] = storage_uri
    im = InferenceModel.model_validate(doc)
    return next(o for o in model_objects(im, None, tp) if o["kind"] == "Deployment")


def test_download_egress_selects_only_pods_whose_model_comes_over_the_network() -> None:
    download = policies(pool())["allow-model-download"]
    assert download["spec"]["podSelector"] == {
        "matchLabels": {"shoal.dev/pool": "critical", "shoal.dev/model-source": "network"}
    }
    assert download["spec"]["policyTypes"] == ["Egress"]
    for policy in policies(pool()).values():
        assert policy["spec"]["podSelector"]["matchLabels"]["shoal.dev/pool"] == "critical"


@pytest.mark.parametrize(
    ("uri", "source"),
    [
        ("s3://models/ranker", "network"),
        ("gs://models/ranker", "network"),
        ("https://models.example/ranker", "network"),
        ("pvc://claim/ranker", "volume"),
    ],
)
def test_pods_are_labelled_by_where_their_model_comes_from(uri: str, source: str) -> None:
    labels = deployment(uri, pool())["spec"]["template"]["metadata"]["labels"]
    assert labels["shoal.dev/model-source"] == source
    # The selector stays what it was: a Deployment's selector cannot change.
    assert deployment(uri, pool())["spec"]["selector"] == {
        "matchLabels": {"shoal.dev/model": "search-ranker"}
    }


def test_direct_mode_reaches_only_https_outside_the_cluster() -> None:
    (rule,) = download_rules(pool())
    assert rule["ports"] == [{"protocol": "TCP", "port": 443}]
    assert rule["to"] == [
        {
            "ipBlock": {
                "cidr": "0.0.0.0/0",
                "except": [
                    "10.0.0.0/8",
                    "100.64.0.0/10",
                    "169.254.0.0/16",
                    "172.16.0.0/12",
                    "192.168.0.0/16",
                ],
            }
        },
        {"ipBlock": {"cidr": "::/0", "except": ["fc00::/7", "fe80::/10"]}},
    ]
    for peer in rule["to"]:
        assert set(peer) == {"ipBlock"}  # no pod or namespace of the cluster


def test_the_cluster_ranges_come_from_the_operator_and_the_pool_overrides_them() -> None:
    (rule,) = download_rules(pool(), cluster_cidrs=["10.8.0.0/14", "203.0.113.10/32"])
    v4, v6 = (peer["ipBlock"] for peer in rule["to"])
    # Metadata and link-local addresses stay closed whatever the ranges are said to be.
    assert v4["except"] == [
        "10.8.0.0/14",
        "100.100.100.200/32",
        "169.254.0.0/16",
        "203.0.113.10/32",
    ]
    assert v6["except"] == [
        "fd00:ec2::23/128",
        "fd00:ec2::254/128",
        "fd20:ce::254/128",
        "fe80::/10",
    ]
    own = pool({"clusterCIDRs": ["172.20.0.0/16", "2001:db8::/32"]})
    (rule,) = download_rules(own, cluster_cidrs=["10.8.0.0/14"])
    v4, v6 = (peer["ipBlock"] for peer in rule["to"])
    assert "172.20.0.0/16" in v4["except"]
    assert "10.8.0.0/14" not in v4["except"]
    assert "2001:db8::/32" in v6["except"]


def test_a_family_the_cluster_ranges_cover_entirely_is_left_out() -> None:
    blocks = outside_cluster(["::/0", *DEFAULT_CLUSTER_CIDRS])
    assert [b["ipBlock"]["cidr"] for b in blocks] == ["0.0.0.0/0"]
    assert outside_cluster(["0.0.0.0/0", "::/0"]) == []


def test_proxy_mode_reaches_only_the_proxy() -> None:
    tp = pool({"mode": "Proxy", "proxy": PROXY})
    (rule,) = download_rules(tp)
    assert rule == {
        "to": [
            {
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "In",
                            "values": ["egress"],
                        }
                    ]
                },
                "podSelector": {"matchLabels": {"app": "egress-proxy"}},
            }
        ],
        "ports": [{"protocol": "TCP", "port": 3128}],
    }


def test_proxy_mode_points_the_fetch_container_at_the_proxy() -> None:
    proxy = {**PROXY, "noProxy": [".internal.example"]}
    extra = [{"cidr": "169.254.170.23/32", "port": 80}]
    tp = pool({"mode": "Proxy", "proxy": proxy, "extraDestinations": extra})
    pod = deployment("s3://models/ranker", tp)["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in pod["initContainers"][0]["env"]}
    assert env["HTTPS_PROXY"] == env["HTTP_PROXY"] == PROXY["url"]
    assert env["NO_PROXY"] == "localhost,127.0.0.1,::1,169.254.170.23/32,.internal.example"
    assert all("PROXY" not in e["name"] for e in pod["containers"][0].get("env", []))
    # A pvc:// model fetches nothing over the network: no proxy settings.
    pod = deployment("pvc://claim/ranker", tp)["spec"]["template"]["spec"]
    assert [e["name"] for e in pod["initContainers"][0]["env"]] == ["HOME"]
    # Nor in Direct mode.
    pod = deployment("s3://models/ranker", pool())["spec"]["template"]["spec"]
    assert [e["name"] for e in pod["initContainers"][0]["env"]] == ["HOME"]


def test_mode_none_allows_no_download_at_all() -> None:
    names = set(policies(pool({"mode": "None"})))
    assert names == {"default-deny", "allow-dns", "allow-callers", "allow-metrics"}


def test_extra_destinations_are_opened_port_by_port() -> None:
    extra = [
        {"cidr": "169.254.169.254/32", "port": 80},
        {"cidr": "169.254.169.252/32", "port": 988},
        {"cidr": "10.20.0.5/32", "port": 9000},
    ]
    rules = download_rules(pool({"extraDestinations": extra}))
    assert rules[1:] == [
        {
            "to": [{"ipBlock": {"cidr": e["cidr"]}}],
            "ports": [{"protocol": "TCP", "port": e["port"]}],
        }
        for e in extra
    ]


@pytest.mark.parametrize(
    ("download", "message"),
    [
        ({"mode": "Proxy"}, "set proxy when, and only when, mode is Proxy"),
        ({"mode": "Direct", "proxy": PROXY}, "set proxy when, and only when, mode is Proxy"),
        (
            {"mode": "None", "extraDestinations": [{"cidr": "10.0.0.1/32", "port": 80}]},
            "mode None allows no download egress",
        ),
        ({"clusterCIDRs": ["10.0.0.1/8"]}, "canonical form"),
        ({"clusterCIDRs": ["fd00:0::/8"]}, "canonical form"),
        ({"clusterCIDRs": ["10.0.0.0/33"]}, "canonical form"),
        ({"clusterCIDRs": ["FC00::/7"]}, "should match"),
        ({"clusterCIDRs": ["::ffff:10.0.0.0/104"]}, "should match"),
        ({"extraDestinations": [{"cidr": "169.254.170.23", "port": 80}]}, "should match"),
        ({"extraDestinations": [{"cidr": "169.254.170.23/24", "port": 80}]}, "canonical"),
        ({"extraDestinations": [{"cidr": "169.254.170.23/32", "port": 0}]}, "greater than"),
        ({"mode": "Proxy", "proxy": {**PROXY, "url": "http://u:p@proxy:3128"}}, "should match"),
        ({"mode": "Proxy", "proxy": {**PROXY, "noProxy": ["a,b"]}}, "should match"),
    ],
)
def test_bad_download_settings_are_refused(download: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        ModelDownload.model_validate(download)


def test_cluster_cidrs_parse_in_canonical_form() -> None:
    cidrs = ["10.0.0.0/8", "0.0.0.0/0", "::/0", "fd00:ec2::254/128", "2001:db8::/32"]
    assert ModelDownload.model_validate({"clusterCIDRs": cidrs}).cluster_cidrs == cidrs
    assert ModelDownload().mode == "Direct"
    assert pool().spec.access.model_download == ModelDownload()
    doc = copy.deepcopy(pool().to_wire())
    assert doc["spec"]["access"]["modelDownload"] == {"mode": "Direct", "extraDestinations": []}


# ------------------------------------------------------------------ withdrawal


def test_a_withdrawn_namespace_keeps_the_default_deny_and_the_quota() -> None:
    tp = pool()
    held = withdrawn_namespace_objects(tp, "team-search")
    admitted = {(o["kind"], o["metadata"]["name"]): o for o in tenant_objects(tp, "team-search")}
    assert [(o["kind"], o["metadata"]["name"]) for o in held] == [
        ("ResourceQuota", "shoal-pool-critical"),
        ("NetworkPolicy", "shoal-critical-default-deny"),
    ]
    # The very objects that were there: applying them changes nothing, and there is no
    # moment without the deny policy.
    for obj in held:
        assert obj == admitted[(obj["kind"], obj["metadata"]["name"])]
    deny = held[1]["spec"]
    assert deny == {
        "podSelector": {"matchLabels": {"shoal.dev/pool": "critical"}},
        "policyTypes": ["Ingress", "Egress"],
    }


def test_withdrawn_namespaces_are_those_holding_the_pools_pods_it_no_longer_admits() -> None:
    def pod(ns: str, pool_name: str = "critical") -> dict[str, Any]:
        return {"metadata": {"namespace": ns, "labels": {"shoal.dev/pool": pool_name}}}

    pods = [pod("team-search"), pod("team-old"), pod("team-old"), pod("team-x", "shared")]
    pods.append({"metadata": {"namespace": "team-bare"}})
    assert withdrawn_namespaces(pool(), ["team-search"], pods) == ["team-old"]
    assert withdrawn_namespaces(pool(), ["team-search", "team-old"], pods) == []


# ------------------------------------------------------------------ access lists


def namespace(name: str, deleting: bool = False, **labels: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"kubernetes.io/metadata.name": name, **labels}}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return {"metadata": meta}


def tenants_pool(name: str, tenants: dict[str, Any]) -> TenantPool:
    doc = example("TenantPool", "shared")
    doc["metadata"]["name"] = name
    doc["spec"]["tenants"] = tenants
    return TenantPool.model_validate(doc)


def test_the_api_refuses_a_tenant_namespace_in_the_access_lists() -> None:
    for field in ("gatewayNamespaces", "monitoringNamespaces"):
        doc = example("TenantPool", "critical")
        doc["spec"]["access"][field] = ["team-search"]
        with pytest.raises(ValidationError, match="access: a tenant namespace may not also be"):
            TenantPool.model_validate(doc)


def test_access_namespaces_that_exist_and_are_no_tenants_pass() -> None:
    cluster = [namespace(n) for n in ("gateway", "monitoring", "team-search", "team-ads")]
    pools = [pool(), pool(name="shared")]
    assert access_problems(pool(), cluster, pools) == []
    assert access_condition([]) == {
        "type": "AccessNamespacesVerified",
        "status": "True",
        "reason": "Verified",
        "message": "Every gateway and monitoring namespace exists and is no tenant's.",
    }


def test_a_missing_or_terminating_access_namespace_is_reported() -> None:
    cluster = [namespace("gateway", deleting=True), namespace("team-search")]
    problems = access_problems(pool(), cluster, [pool()])
    assert [(p.field, p.namespace, p.reason) for p in problems] == [
        ("gatewayNamespaces", "gateway", "AccessNamespaceMissing"),
        ("monitoringNamespaces", "monitoring", "AccessNamespaceMissing"),
    ]
    condition = access_condition(problems)
    assert (condition["status"], condition["reason"]) == ("False", "AccessNamespaceMissing")
    assert "'gateway'" in condition["message"]
    assert "'monitoring'" in condition["message"]


def test_an_access_namespace_another_pool_admits_is_reported() -> None:
    # The shared pool admits team-ads and team-labs by a selector on the name label; a
    # pool that lists team-ads as its monitoring namespace would let team-ads' pods in.
    doc = example("TenantPool", "critical")
    doc["spec"]["access"]["monitoringNamespaces"] = ["team-ads"]
    doc["spec"]["access"]["gatewayNamespaces"] = ["edge", "team-labs"]
    tp = TenantPool.model_validate(doc)
    shared = pool(name="shared")
    cluster = [namespace(n) for n in ("edge", "team-ads", "team-search")]
    problems = access_problems(tp, cluster, [tp, shared])
    assert [(p.namespace, p.reason) for p in problems] == [
        ("team-labs", "AccessNamespaceMissing"),  # the selector can only see live ones
        ("team-ads", "AccessNamespaceIsTenant"),
    ]
    assert "TenantPool(s) shared" in problems[1].message
    # Listed by name in another pool: a tenant even before it exists.
    listed = tenants_pool("listed", {"namespaces": ["team-labs"]})
    problems = access_problems(tp, cluster, [tp, shared, listed])
    assert ("team-labs", "AccessNamespaceIsTenant") in [(p.namespace, p.reason) for p in problems]
    # Admitted by a label only once the namespace exists with it.
    labelled = tenants_pool("labelled", {"selector": {"matchLabels": {"tier": "tenant"}}})
    cluster.append(namespace("team-labs", tier="tenant"))
    problems = access_problems(tp, cluster, [labelled])
    assert [(p.namespace, p.reason) for p in problems] == [
        ("team-labs", "AccessNamespaceIsTenant"),
    ]
