"""Network isolation between tenants, verified by an independent analyzer.

The NetworkPolicies the operator renders for three dedicated tenants, a shared pool of
two tenants, a gateway, a monitoring stack, DNS, and an attacker namespace that copies
the gateway's labels are handed to network-config-analyzer (nca), which computes the
connectivity they allow without a CNI. Required paths must be permitted; every
cross-tenant path must be forbidden. A control run with the deny policies removed must
fail the same check, so the check can fail.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.api.tenantpool import TenantPool
from shoal.render.tenancy import tenant_objects

REPO = Path(__file__).resolve().parents[2]
NCA = REPO / ".venv-nca" / "bin" / "nca"
DEDICATED = ["tenant-a", "tenant-b", "tenant-c"]
SHARED = ["shared-1", "shared-2"]
GATEWAY_LABELS = {"team": "edge", "role": "gateway"}


def pool(name: str, isolation: str, namespaces: list[str]) -> TenantPool:
    spec: dict[str, Any] = {
        "isolation": isolation,
        "tenants": {"namespaces": namespaces},
        "quota": {"gpus": 8},
        "access": {
            "gatewayNamespaces": ["gateway"],
            "monitoringNamespaces": ["monitoring"],
            "allowSameNamespace": False,
        },
    }
    if isolation == "Dedicated":
        spec["placement"] = {"nodeSelector": {"shoal.dev/node-group": "dedicated-gpu"}}
    return TenantPool.model_validate({"metadata": {"name": name, "uid": "u"}, "spec": spec})


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    # nca does not add the immutable name label the API server adds: set it here.
    all_labels = {"kubernetes.io/metadata.name": name, **(labels or {})}
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": all_labels},
    }


def pod(name: str, ns: str, labels: dict[str, str], ports: list[int] = ()) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {
            "containers": [
                {"name": "c", "image": "x", "ports": [{"containerPort": p} for p in ports]}
            ]
        },
    }


def cluster_fixture() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(namespaces and pods, rendered NetworkPolicies)."""
    pools = [pool(f"dedicated-{ns}", "Dedicated", [ns]) for ns in DEDICATED]
    pools.append(pool("shared", "Shared", SHARED))
    resources = [namespace(ns) for ns in [*DEDICATED, *SHARED, "monitoring", "kube-system"]]
    resources += [namespace("gateway", GATEWAY_LABELS), namespace("attacker", GATEWAY_LABELS)]
    policies = []
    for p in pools:
        for ns in p.spec.tenants.namespaces:
            resources.append(
                pod(
                    f"model-{ns}",
                    ns,
                    {"shoal.dev/pool": p.metadata.name, "shoal.dev/model": "m"},
                    [8000, 8001, 8002],
                )
            )
            policies += [o for o in tenant_objects(p, ns) if o["kind"] == "NetworkPolicy"]
    resources += [
        pod("gateway", "gateway", {"app": "gateway"}),
        pod("prometheus", "monitoring", {"app": "prometheus"}),
        pod("coredns", "kube-system", {"k8s-app": "kube-dns"}, [53]),
        pod("mallory", "attacker", {"app": "gateway"}),  # copies the gateway's labels too
    ]
    return resources, policies


def allow(
    name: str, ns: str, pool_name: str, sources: list[dict[str, Any]], ports: list[int] | None
) -> dict[str, Any]:
    rule: dict[str, Any] = {"from": sources}
    if ports:
        rule["ports"] = [{"protocol": "TCP", "port": p} for p in ports]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": {
            "podSelector": {"matchLabels": {"shoal.dev/pool": pool_name}},
            "policyTypes": ["Ingress"],
            "ingress": [rule],
        },
    }


def by_name(*names: str) -> dict[str, Any]:
    return {
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(names)}
            ]
        }
    }


def by_labels(policy: dict[str, Any]) -> dict[str, Any]:
    """The policy with the gateway selected by its namespace's mutable labels."""
    text = yaml.safe_dump(policy)
    if "gateway" not in text:
        return policy
    policy = yaml.safe_load(text)
    for rule in policy["spec"].get("ingress", []):
        for i, source in enumerate(rule.get("from", [])):
            exprs = (source.get("namespaceSelector") or {}).get("matchExpressions", [])
            if any("gateway" in e.get("values", []) for e in exprs):
                rule["from"][i] = {"namespaceSelector": {"matchLabels": dict(GATEWAY_LABELS)}}
    return policy


def pool_of(ns: str) -> str:
    return f"dedicated-{ns}" if ns in DEDICATED else "shared"


def required_paths() -> list[dict[str, Any]]:
    out = []
    for ns in [*DEDICATED, *SHARED]:
        out.append(allow(f"gw-{ns}", ns, pool_of(ns), [by_name("gateway")], [8000, 8001]))
        out.append(allow(f"mon-{ns}", ns, pool_of(ns), [by_name("monitoring")], [8002]))
        out.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {"name": f"dns-{ns}", "namespace": ns},
                "spec": {
                    "podSelector": {"matchLabels": {"shoal.dev/pool": pool_of(ns)}},
                    "policyTypes": ["Egress"],
                    "egress": [
                        {
                            "to": [
                                {
                                    **by_name("kube-system"),
                                    "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                                }
                            ],
                            "ports": [{"protocol": "UDP", "port": 53}],
                        }
                    ],
                },
            }
        )
    return out


def forbidden_paths() -> list[dict[str, Any]]:
    out = []
    tenants = [*DEDICATED, *SHARED]
    for ns in tenants:
        others = [o for o in tenants if o != ns] + ["attacker"]
        out.append(allow(f"cross-{ns}", ns, pool_of(ns), [by_name(*others)], None))
        # The monitoring stack may scrape metrics, never call the model.
        out.append(allow(f"mon-calls-{ns}", ns, pool_of(ns), [by_name("monitoring")], [8000, 8001]))
    return out


def nca(
    query: str, spec_file: Path, base: Path, resources: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(NCA),
            f"--{query}",
            str(spec_file),
            "--base_np_list",
            str(base),
            "--resource_list",
            str(resources),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    if not NCA.exists():
        pytest.fail(f"{NCA} is missing: run `make tools` (make test does)")
    resources, policies = cluster_fixture()
    out = {
        "resources": tmp_path / "resources.yaml",
        "policies": tmp_path / "policies.yaml",
        "required": tmp_path / "required.yaml",
        "forbidden": tmp_path / "forbidden.yaml",
        "weak": tmp_path / "weak.yaml",
    }
    out["resources"].write_text(yaml.safe_dump_all(resources))
    out["policies"].write_text(yaml.safe_dump_all(policies))
    out["required"].write_text(yaml.safe_dump_all(required_paths()))
    out["forbidden"].write_text(yaml.safe_dump_all(forbidden_paths()))
    out["weak"].write_text(yaml.safe_dump_all([by_labels(p) for p in policies]))
    return out


def test_required_paths_are_permitted(files: dict[str, Path]) -> None:
    result = nca("permits", files["required"], files["policies"], files["resources"])
    assert result.returncode == 0, result.stdout + result.stderr


def test_no_cross_tenant_path_exists(files: dict[str, Path]) -> None:
    result = nca("forbids", files["forbidden"], files["policies"], files["resources"])
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_check_fails_for_policies_that_trust_namespace_labels(
    files: dict[str, Path],
) -> None:
    """Control: the same policies, but naming the gateway by a label its namespace
    carries (one a tenant can copy) instead of by its immutable name. The attacker
    namespace copies that label, so nca must find a cross-tenant path."""
    result = nca("forbids", files["forbidden"], files["weak"], files["resources"])
    assert result.returncode != 0, result.stdout
    assert "attacker" in result.stdout + result.stderr or "mallory" in result.stdout


def test_nca_is_the_real_analyzer() -> None:
    assert shutil.which(str(NCA)) or NCA.exists()
    version = subprocess.run([str(NCA), "--version"], capture_output=True, text=True)
    assert "2." in version.stdout + version.stderr
