"""Network isolation between tenants, verified by an independent analyzer.

The NetworkPolicies the operator renders are handed to network-config-analyzer (nca),
which computes the connectivity they allow without a CNI, over a cluster of: three
Dedicated pools of one tenant each, a Shared pool of three tenants, a pool whose
downloads go through an egress proxy and one that allows none; in every tenant
namespace a model pod whose files come over the network, an ordinary workload of the
tenant's, and in two of them a model pod whose files come from a claim (pvc://); a
gateway, a monitoring stack, DNS, the proxy, and an attacker namespace that copies
the gateway's labels.

Required paths must be permitted (``--permits``); every path an attacker in a model pod
would want must be forbidden (``--forbids``): into other tenants' models, and out of a
model pod to any pod but DNS (and the proxy), to the API server, to the cluster's
ranges and to link-local or metadata addresses on any port, and to the internet on
anything but HTTPS. The same checks run after the pools change: a namespace withdrawn
from the Shared pool while its model still runs (it must be reached by nothing and
reach nothing) and a namespace newly admitted to it.

How nca sees addresses: a pod is an endpoint of its own with no IP address, and an
``ipBlock`` is a set of addresses outside every pod. So an ipBlock rule never reaches a
pod in nca's model, while on some CNIs (Calico, for one) it reaches the pods whose IPs
fall inside it. The checks therefore forbid the cluster's pod, Service and node ranges
as addresses too, not only the pods as pods.

Each check can fail: it also runs against control policies that must be flagged, the
policies as rendered before this hardening (HTTPS egress to any destination for every
pod of a pool), a withdrawn namespace left without policies, and policies naming the
gateway by a label its namespace carries.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.api.tenantpool import TenantPool
from shoal.render.gateway import GatewaySite
from shoal.render.gateway import network_policy as gateway_policy
from shoal.render.tenancy import tenant_objects, withdrawn_namespace_objects

REPO = Path(__file__).resolve().parents[2]
NCA = REPO / ".venv-nca" / "bin" / "nca"
DEDICATED = ["tenant-a", "tenant-b", "tenant-c"]
SHARED = ["shared-1", "shared-2", "shared-3"]
# After the change: shared-3 is withdrawn (its model still runs), shared-4 admitted.
SHARED_AFTER = ["shared-1", "shared-2", "shared-4"]
WITHDRAWN = "shared-3"
PROXIED, OFFLINE = "tenant-p", "tenant-n"
PVC_MODELS = ["tenant-a", "shared-2"]  # namespaces that also run a pvc:// model
GATEWAY_LABELS = {"team": "edge", "role": "gateway"}
# Where the pools' own gateways run (each pool's pods labelled shoal.dev/gateway=<pool>).
POOL_GATEWAYS = "shoal-gateways"
SITE = GatewaySite(namespace=POOL_GATEWAYS)
PROXY_PORT = 3128

# The cluster's ranges as the operator's settings would give them: pods, Services,
# nodes, and a managed control plane's public endpoint.
API_SERVER, KUBERNETES_SERVICE, PUBLIC_API = "192.168.10.5", "10.96.0.1", "203.0.113.10"
CLUSTER_CIDRS = ["10.244.0.0/16", "10.96.0.0/12", "192.168.10.0/24", f"{PUBLIC_API}/32"]
# Addresses no model pod may reach on any port: the cluster's,
CLUSTER_ADDRESSES = [
    f"{API_SERVER}/32",
    f"{KUBERNETES_SERVICE}/32",
    f"{PUBLIC_API}/32",
    "10.244.0.0/16",  # pod IPs, for CNIs whose ipBlocks match pods
    "192.168.10.0/24",  # the nodes (kubelets, node ports)
]
# and link-local or metadata ones, whatever the cluster's ranges are said to be.
METADATA_ADDRESSES = [
    "169.254.169.254/32",  # cloud instance metadata
    "169.254.170.23/32",  # EKS Pod Identity agent
    "169.254.20.10/32",  # NodeLocal DNSCache
    "100.100.100.200/32",  # Alibaba Cloud metadata
    "fd00:ec2::254/128",  # AWS IPv6 instance metadata
    "fe80::/10",
]
INTERNET = ["8.8.8.8/32", "2001:4860:4860::8888/128"]
EVERYWHERE = ["0.0.0.0/0", "::/0"]
NOT_HTTPS = [
    {"protocol": "TCP", "port": 1, "endPort": 442},
    {"protocol": "TCP", "port": 444, "endPort": 65535},
    {"protocol": "UDP"},
    {"protocol": "SCTP"},
]
NOT_DNS = [
    {"protocol": "TCP", "port": 1, "endPort": 52},
    {"protocol": "TCP", "port": 54, "endPort": 65535},
    {"protocol": "UDP", "port": 1, "endPort": 52},
    {"protocol": "UDP", "port": 54, "endPort": 65535},
    {"protocol": "SCTP"},
]
NOT_PROXY = [
    {"protocol": "TCP", "port": 1, "endPort": PROXY_PORT - 1},
    {"protocol": "TCP", "port": PROXY_PORT + 1, "endPort": 65535},
    {"protocol": "UDP"},
    {"protocol": "SCTP"},
]


# ------------------------------------------------------------------ the cluster


def pool(name: str, isolation: str, namespaces: list[str], download: dict[str, Any]) -> TenantPool:
    spec: dict[str, Any] = {
        "isolation": isolation,
        "tenants": {"namespaces": namespaces},
        "quota": {"gpus": 8},
        "access": {
            "gatewayNamespaces": ["gateway"],
            "monitoringNamespaces": ["monitoring"],
            "allowSameNamespace": False,
            "modelDownload": download,
        },
    }
    if isolation == "Dedicated":
        spec["placement"] = {"nodeSelector": {"shoal.dev/node-group": "dedicated-gpu"}}
    return TenantPool.model_validate({"metadata": {"name": name, "uid": "u"}, "spec": spec})


def pools(shared: list[str]) -> list[TenantPool]:
    proxy = {
        "url": f"http://egress-proxy.egress.svc.cluster.local:{PROXY_PORT}",
        "namespace": "egress",
        "podSelector": {"matchLabels": {"app": "egress-proxy"}},
        "port": PROXY_PORT,
    }
    out = [pool(f"dedicated-{ns}", "Dedicated", [ns], {}) for ns in DEDICATED]
    out.append(pool("shared", "Shared", shared, {}))
    out.append(pool("proxied", "Shared", [PROXIED], {"mode": "Proxy", "proxy": proxy}))
    out.append(pool("offline", "Shared", [OFFLINE], {"mode": "None"}))
    return out


def pool_of(ns: str) -> str:
    if ns in DEDICATED:
        return f"dedicated-{ns}"
    return {PROXIED: "proxied", OFFLINE: "offline"}.get(ns, "shared")


def namespace(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    # nca does not add the immutable name label the API server adds: set it here.
    all_labels = {"kubernetes.io/metadata.name": name, **(labels or {})}
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": all_labels},
    }


def pod(name: str, ns: str, labels: dict[str, str], ports: Sequence[int] = ()) -> dict[str, Any]:
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


def model_pod(ns: str, source: str = "network") -> dict[str, Any]:
    labels = {
        "shoal.dev/pool": pool_of(ns),
        "shoal.dev/model": "m",
        "shoal.dev/model-source": source,
    }
    name = "model" if source == "network" else "model-pvc"
    return pod(name, ns, labels, [8000, 8001, 8002])


TENANTS = [*DEDICATED, *SHARED, "shared-4", PROXIED, OFFLINE]
OTHERS = ["gateway", "attacker", "monitoring", "kube-system", "egress", POOL_GATEWAYS]
POOLS = [
    "dedicated-tenant-a",
    "dedicated-tenant-b",
    "dedicated-tenant-c",
    "shared",
    "proxied",
    "offline",
]


def resources() -> list[dict[str, Any]]:
    """Every namespace and pod, those of both states (before and after the change)."""
    out = [namespace(ns) for ns in [*TENANTS, "monitoring", "kube-system", "egress"]]
    out.append(namespace(POOL_GATEWAYS))
    out += [
        pod(
            f"gw-{p.metadata.name}",
            POOL_GATEWAYS,
            {"shoal.dev/gateway": p.metadata.name},
            [8000, 8001, 8405, 10000],
        )
        for p in pools(SHARED)
    ]
    out += [namespace("gateway", GATEWAY_LABELS), namespace("attacker", GATEWAY_LABELS)]
    for ns in TENANTS:
        out.append(model_pod(ns))
        out.append(pod("app", ns, {"app": "web"}, [443, 8080]))  # the tenant's own workload
    out += [model_pod(ns, "volume") for ns in PVC_MODELS]
    out += [
        pod("gateway", "gateway", {"app": "gateway"}, [443]),
        pod("prometheus", "monitoring", {"app": "prometheus"}, [443, 9090]),
        pod("coredns", "kube-system", {"k8s-app": "kube-dns"}, [53]),
        pod("metrics-server", "kube-system", {"k8s-app": "metrics-server"}, [443]),
        pod("mallory", "attacker", {"app": "gateway"}, [443]),  # copies the gateway's labels
        pod("proxy", "egress", {"app": "egress-proxy"}, [PROXY_PORT]),
        pod("other", "egress", {"app": "other"}, [443]),
    ]
    return out


def network_policies(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] == "NetworkPolicy"]


@dataclass(frozen=True)
class State:
    """The rendered policies, and where the models run, at one point in time."""

    policies: list[dict[str, Any]]
    admitted: list[str]  # tenant namespaces the pools admit
    withdrawn: list[str]  # namespaces a pool left while its model still runs


def steady() -> State:
    policies = []
    for p in pools(SHARED):
        for ns in p.spec.tenants.namespaces:
            policies += network_policies(tenant_objects(p, ns, CLUSTER_CIDRS, POOL_GATEWAYS))
        policies.append(gateway_policy(p, SITE, list(p.spec.tenants.namespaces)))
    return State(policies, [*DEDICATED, *SHARED, PROXIED, OFFLINE], [])


def changed() -> State:
    """The Shared pool now admits shared-4 and no longer shared-3."""
    policies = []
    for p in pools(SHARED_AFTER):
        for ns in p.spec.tenants.namespaces:
            policies += network_policies(tenant_objects(p, ns, CLUSTER_CIDRS, POOL_GATEWAYS))
        policies.append(gateway_policy(p, SITE, list(p.spec.tenants.namespaces)))
        if p.metadata.name == "shared":
            policies += network_policies(withdrawn_namespace_objects(p, WITHDRAWN))
    return State(policies, [*DEDICATED, *SHARED_AFTER, PROXIED, OFFLINE], [WITHDRAWN])


# ------------------------------------------------------------------ controls


def old_download_policies(state: State) -> State:
    """Control: the download policy as rendered before this hardening, HTTPS to any
    destination for every pod of the pool, in every pool."""
    kept = [p for p in state.policies if not p["metadata"]["name"].endswith("-model-download")]
    for ns in state.admitted:
        kept.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {"name": f"shoal-{pool_of(ns)}-allow-model-download", "namespace": ns},
                "spec": {
                    "podSelector": {"matchLabels": {"shoal.dev/pool": pool_of(ns)}},
                    "policyTypes": ["Egress"],
                    "egress": [{"ports": [{"protocol": "TCP", "port": 443}]}],
                },
            }
        )
    return State(kept, state.admitted, state.withdrawn)


def _edit_downloads(state: State, edit: Callable[[dict[str, Any]], None]) -> State:
    policies = yaml.safe_load(yaml.safe_dump(state.policies))
    for policy in policies:
        if policy["metadata"]["name"].endswith("-model-download"):
            for rule in policy["spec"]["egress"]:
                edit(rule)
    return State(policies, state.admitted, state.withdrawn)


def without_always_closed(state: State) -> State:
    """Control: Direct mode excepting the cluster's ranges but not link-local and
    metadata addresses."""

    def edit(rule: dict[str, Any]) -> None:
        for peer in rule.get("to", []):
            block = peer.get("ipBlock", {})
            block["except"] = [c for c in block.get("except", []) if c in CLUSTER_CIDRS]

    return _edit_downloads(state, edit)


def download_on_any_port(state: State) -> State:
    """Control: the download rule without its port."""
    return _edit_downloads(state, lambda rule: rule.pop("ports", None))


def nothing_left_in_withdrawn(state: State) -> State:
    """Control: the pool's policies deleted from the namespace it withdrew from."""
    kept = [p for p in state.policies if p["metadata"]["namespace"] not in state.withdrawn]
    return State(kept, state.admitted, state.withdrawn)


def any_gateway_pod(state: State) -> State:
    """Control: model pods let in every pod of the gateways' namespace, whichever pool's
    gateway it is."""
    loosened = yaml.safe_load(yaml.safe_dump(state.policies))
    for policy in loosened:
        if policy["metadata"]["namespace"] == POOL_GATEWAYS:
            continue
        for rule in policy["spec"].get("ingress", []):
            for source in rule.get("from", []):
                labels = (source.get("podSelector") or {}).get("matchLabels") or {}
                if "shoal.dev/gateway" in labels:
                    del source["podSelector"]
    return replace(state, policies=loosened)


def gateways_open_to_all(state: State) -> State:
    """Control: a pool's gateway lets in every namespace on the inference ports."""
    opened = []
    for policy in state.policies:
        if policy["metadata"]["namespace"] == POOL_GATEWAYS:
            policy = yaml.safe_load(yaml.safe_dump(policy))
            for rule in policy["spec"]["ingress"]:
                if {"protocol": "TCP", "port": 8000} in rule["ports"]:
                    rule["from"] = [{"namespaceSelector": {}}]
        opened.append(policy)
    return replace(state, policies=opened)


def gateway_by_labels(state: State) -> State:
    """Control: the gateway selected by its namespace's labels (which a tenant can copy)
    instead of by its immutable name."""
    out = []
    for policy in state.policies:
        policy = yaml.safe_load(yaml.safe_dump(policy))
        for rule in policy["spec"].get("ingress", []):
            for i, source in enumerate(rule.get("from", [])):
                exprs = (source.get("namespaceSelector") or {}).get("matchExpressions", [])
                if any("gateway" in e.get("values", []) for e in exprs):
                    rule["from"][i] = {"namespaceSelector": {"matchLabels": dict(GATEWAY_LABELS)}}
        out.append(policy)
    return State(out, state.admitted, state.withdrawn)


# ------------------------------------------------------------------ what must hold


def by_name(*names: str) -> dict[str, Any]:
    return {
        "namespaceSelector": {
            "matchExpressions": [
                {"key": "kubernetes.io/metadata.name", "operator": "In", "values": list(names)}
            ]
        }
    }


def blocks(*cidrs: str) -> list[dict[str, Any]]:
    return [{"ipBlock": {"cidr": c}} for c in cidrs]


def spec_policy(
    name: str,
    ns: str,
    selector: dict[str, str],
    *,
    ingress: list[dict[str, Any]] | None = None,
    egress: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"podSelector": {"matchLabels": selector}, "policyTypes": []}
    if ingress is not None:
        spec["policyTypes"].append("Ingress")
        spec["ingress"] = ingress
    if egress is not None:
        spec["policyTypes"].append("Egress")
        spec["egress"] = egress
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": name, "namespace": ns},
        "spec": spec,
    }


MODELS = {"shoal.dev/model": "m"}  # every model pod, whatever its source
REMOTE = {"shoal.dev/model": "m", "shoal.dev/model-source": "network"}
PVC = {"shoal.dev/model": "m", "shoal.dev/model-source": "volume"}


def required(state: State) -> list[dict[str, Any]]:
    out = []
    for ns in state.admitted:
        out.append(
            spec_policy(
                f"gw-{ns}",
                ns,
                MODELS,
                ingress=[
                    {
                        "from": [by_name("gateway")],
                        "ports": [{"protocol": "TCP", "port": p} for p in (8000, 8001)],
                    }
                ],
            )
        )
        own_gateway = {
            **by_name(POOL_GATEWAYS),
            "podSelector": {"matchLabels": {"shoal.dev/gateway": pool_of(ns)}},
        }
        out.append(
            spec_policy(
                f"pool-gw-{ns}",
                ns,
                MODELS,
                ingress=[
                    {
                        "from": [own_gateway],
                        "ports": [{"protocol": "TCP", "port": p} for p in (8000, 8001)],
                    }
                ],
            )
        )
        if ns not in state.withdrawn:
            out.append(
                {
                    "apiVersion": "networking.k8s.io/v1",
                    "kind": "NetworkPolicy",
                    "metadata": {"name": f"calls-gw-{ns}", "namespace": POOL_GATEWAYS},
                    "spec": {
                        "podSelector": {"matchLabels": {"shoal.dev/gateway": pool_of(ns)}},
                        "policyTypes": ["Ingress"],
                        "ingress": [
                            {
                                "from": [by_name(ns)],
                                "ports": [{"protocol": "TCP", "port": p} for p in (8000, 8001)],
                            }
                        ],
                    },
                }
            )
        out.append(
            spec_policy(
                f"mon-{ns}",
                ns,
                MODELS,
                ingress=[
                    {"from": [by_name("monitoring")], "ports": [{"protocol": "TCP", "port": 8002}]}
                ],
            )
        )
        dns = {
            **by_name("kube-system"),
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
        out.append(
            spec_policy(
                f"dns-{ns}",
                ns,
                MODELS,
                egress=[{"to": [dns], "ports": [{"protocol": "UDP", "port": 53}]}],
            )
        )
        if ns == PROXIED:
            proxy = {**by_name("egress"), "podSelector": {"matchLabels": {"app": "egress-proxy"}}}
            out.append(
                spec_policy(
                    "to-proxy",
                    ns,
                    REMOTE,
                    egress=[{"to": [proxy], "ports": [{"protocol": "TCP", "port": PROXY_PORT}]}],
                )
            )
        elif ns != OFFLINE:
            out.append(
                spec_policy(
                    f"https-{ns}",
                    ns,
                    REMOTE,
                    egress=[{"to": blocks(*INTERNET), "ports": [{"protocol": "TCP", "port": 443}]}],
                )
            )
    return out


def cross_tenant_ingress(state: State) -> list[dict[str, Any]]:
    """Into a model: no other tenant, no attacker, and monitoring only on metrics."""
    out = []
    tenants = [*state.admitted, *state.withdrawn]
    for ns in state.admitted:
        others = [t for t in tenants if t != ns] + ["attacker", "egress"]
        out.append(spec_policy(f"cross-{ns}", ns, MODELS, ingress=[{"from": [by_name(*others)]}]))
        out.append(
            spec_policy(
                f"mon-calls-{ns}",
                ns,
                MODELS,
                ingress=[
                    {
                        "from": [by_name("monitoring")],
                        "ports": [{"protocol": "TCP", "port": p} for p in (8000, 8001)],
                    }
                ],
            )
        )
    return out


def across_gateways(state: State) -> list[dict[str, Any]]:
    """Into a model: no other pool's gateway, and no pod of the model's own namespace
    (tenants call their models through their pool's gateway)."""
    out = []
    for ns in state.admitted:
        others = {
            **by_name(POOL_GATEWAYS),
            "podSelector": {
                "matchExpressions": [
                    {"key": "shoal.dev/gateway", "operator": "NotIn", "values": [pool_of(ns)]}
                ]
            },
        }
        out.append(
            spec_policy(
                f"other-gw-{ns}", ns, MODELS, ingress=[{"from": [others, {"podSelector": {}}]}]
            )
        )
    return out


def into_the_gateways(state: State) -> list[dict[str, Any]]:
    """Into a pool's gateway: no namespace the pool does not admit (other tenants, the
    attacker, monitoring) on the inference ports."""
    out = []
    tenants = [*state.admitted, *state.withdrawn]
    for name in POOLS:
        own = [t for t in state.admitted if pool_of(t) == name]
        strangers = [t for t in tenants if t not in own] + ["attacker", "monitoring"]
        out.append(
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": {"name": f"into-{name}", "namespace": POOL_GATEWAYS},
                "spec": {
                    "podSelector": {"matchLabels": {"shoal.dev/gateway": name}},
                    "policyTypes": ["Ingress"],
                    "ingress": [
                        {
                            "from": [by_name(*strangers)],
                            "ports": [{"protocol": "TCP", "port": p} for p in (8000, 8001)],
                        }
                    ],
                },
            }
        )
    return out


def egress_to_pods(state: State) -> list[dict[str, Any]]:
    """Out of a model, to a pod: none but DNS (on 53) and, in Proxy mode, the proxy (on
    its port). Every other tenant's pods, its own namespace's, the gateway's, the
    monitoring stack's, kube-system's, on any port, 443 included."""
    out = []
    everyone = [*TENANTS, "gateway", "attacker", "monitoring"]
    for ns in state.admitted:
        rules: list[dict[str, Any]] = [
            {"to": [{**by_name(*everyone), "podSelector": {}}]},
            {
                "to": [
                    {
                        **by_name("kube-system"),
                        "podSelector": {"matchLabels": {"k8s-app": "metrics-server"}},
                    }
                ]
            },
            {
                "to": [
                    {
                        **by_name("kube-system"),
                        "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                    }
                ],
                "ports": NOT_DNS,
            },
            {"to": [{**by_name("egress"), "podSelector": {"matchLabels": {"app": "other"}}}]},
        ]
        proxy = {**by_name("egress"), "podSelector": {"matchLabels": {"app": "egress-proxy"}}}
        rules.append({"to": [proxy], "ports": NOT_PROXY} if ns == PROXIED else {"to": [proxy]})
        out.append(spec_policy(f"pods-{ns}", ns, MODELS, egress=rules))
        if ns == PROXIED:  # only the pods that download may reach the proxy at all
            out.append(spec_policy(f"pvc-proxy-{ns}", ns, PVC, egress=[{"to": [proxy]}]))
    return out


def egress_to_the_cluster(state: State) -> list[dict[str, Any]]:
    """Out of a model, to the API server and the cluster's ranges: nothing, on any port."""
    return [
        spec_policy(f"cluster-{ns}", ns, MODELS, egress=[{"to": blocks(*CLUSTER_ADDRESSES)}])
        for ns in state.admitted
    ]


def egress_to_metadata(state: State) -> list[dict[str, Any]]:
    """Out of a model, to link-local and instance-metadata addresses: nothing, on any
    port."""
    return [
        spec_policy(f"metadata-{ns}", ns, MODELS, egress=[{"to": blocks(*METADATA_ADDRESSES)}])
        for ns in state.admitted
    ]


def internet_only_https(state: State) -> list[dict[str, Any]]:
    """Out of any model, to the internet: nothing but HTTPS."""
    return [
        spec_policy(
            f"inet-{ns}", ns, MODELS, egress=[{"to": blocks(*EVERYWHERE), "ports": NOT_HTTPS}]
        )
        for ns in state.admitted
    ]


def pvc_models_reach_no_internet(state: State) -> list[dict[str, Any]]:
    """A pvc:// model's pod downloads nothing: no HTTPS either (and no pod, by
    egress_to_pods): DNS is all it reaches."""
    https = [{"to": blocks(*EVERYWHERE), "ports": [{"protocol": "TCP", "port": 443}]}]
    return [
        spec_policy(f"pvc-{ns}", ns, PVC, egress=https) for ns in state.admitted if ns in PVC_MODELS
    ]


def proxy_and_none_pools_reach_no_internet(state: State) -> list[dict[str, Any]]:
    """A Proxy pool's pods reach the internet only through the proxy, a None pool's not
    at all."""
    https = [{"to": blocks(*EVERYWHERE), "ports": [{"protocol": "TCP", "port": 443}]}]
    return [spec_policy(f"no-inet-{ns}", ns, MODELS, egress=https) for ns in (PROXIED, OFFLINE)]


def withdrawn_isolated(state: State) -> list[dict[str, Any]]:
    """A model left in a withdrawn namespace: reached by nothing, reaching nothing."""
    anything = [{"namespaceSelector": {}}, *blocks(*EVERYWHERE)]
    return [
        spec_policy(
            f"withdrawn-{ns}",
            ns,
            MODELS,
            ingress=[{"from": anything}],
            egress=[{"to": anything}],
        )
        for ns in state.withdrawn
    ]


# ------------------------------------------------------------------ running nca


def nca(
    query: str, spec: list[dict[str, Any]], base: list[dict[str, Any]], tmp: Path
) -> subprocess.CompletedProcess[str]:
    (tmp / "resources.yaml").write_text(yaml.safe_dump_all(resources()))
    (tmp / "spec.yaml").write_text(yaml.safe_dump_all(spec))
    (tmp / "base.yaml").write_text(yaml.safe_dump_all(base))
    return subprocess.run(
        [
            str(NCA),
            f"--{query}",
            str(tmp / "spec.yaml"),
            "--base_np_list",
            str(tmp / "base.yaml"),
            "--resource_list",
            str(tmp / "resources.yaml"),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(autouse=True)
def _nca_installed() -> None:
    if not NCA.exists():
        pytest.fail(f"{NCA} is missing: run `make tools` (make test does)")


STATES = {"steady": steady, "after-change": changed}
Check = Callable[[State], list[dict[str, Any]]]
FORBIDDEN: dict[str, Check] = {
    "cross-tenant-ingress": cross_tenant_ingress,
    "across-gateways": across_gateways,
    "into-the-gateways": into_the_gateways,
    "egress-to-pods": egress_to_pods,
    "egress-to-the-cluster": egress_to_the_cluster,
    "egress-to-metadata": egress_to_metadata,
    "internet-only-https": internet_only_https,
    "pvc-models-reach-no-internet": pvc_models_reach_no_internet,
    "proxy-and-none-pools-reach-no-internet": proxy_and_none_pools_reach_no_internet,
    "withdrawn-isolated": withdrawn_isolated,
}


@pytest.mark.parametrize("state", STATES)
def test_required_paths_are_permitted(state: str, tmp_path: Path) -> None:
    world = STATES[state]()
    result = nca("permits", required(world), world.policies, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("state", "check"),
    [
        (state, check)
        for state in STATES
        for check in FORBIDDEN
        # Only after the change is there a withdrawn namespace.
        if not (state == "steady" and check == "withdrawn-isolated")
    ],
)
def test_no_forbidden_path_exists(state: str, check: str, tmp_path: Path) -> None:
    world = STATES[state]()
    spec = FORBIDDEN[check](world)
    assert spec, "nothing to check"
    result = nca("forbids", spec, world.policies, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_change_withdraws_one_namespace_and_admits_another() -> None:
    world = changed()
    assert world.withdrawn == [WITHDRAWN]
    assert "shared-4" in world.admitted
    held = {
        p["metadata"]["name"] for p in world.policies if p["metadata"]["namespace"] == WITHDRAWN
    }
    assert held == {"shoal-shared-default-deny"}


def test_a_newly_admitted_namespace_gets_the_same_isolation(tmp_path: Path) -> None:
    world = changed()
    policies = {
        p["metadata"]["name"] for p in world.policies if p["metadata"]["namespace"] == "shared-4"
    }
    assert policies == {
        "shoal-shared-default-deny",
        "shoal-shared-allow-dns",
        "shoal-shared-allow-model-download",
        "shoal-shared-allow-callers",
        "shoal-shared-allow-metrics",
    }
    # The checks above cover shared-4 in the changed state; it is among their subjects.
    assert "shared-4" in {p["metadata"]["namespace"] for p in egress_to_pods(world)}
    assert "shared-4" in {p["metadata"]["namespace"] for p in required(world)}


# ------------------------------------------------------------------ the checks can fail


@dataclass(frozen=True)
class Control:
    """Policies that must fail a check, and what nca must name when they do."""

    state: Callable[[], State]
    weaken: Callable[[State], State]
    check: str
    offenders: tuple[str, ...]  # nca names at least one


CONTROLS = {
    # The download rule as it was: HTTPS to any destination, for every pod of a pool.
    "old-download-reaches-pods-on-443": Control(
        steady,
        old_download_policies,
        "egress-to-pods",
        # nca names the first offending connection it finds, which varies from run to
        # run: any pod reached on 443 is the hole.
        ("'dst_ports': '443'",),
    ),
    "old-download-reaches-the-api-server": Control(
        steady,
        old_download_policies,
        "egress-to-the-cluster",
        (API_SERVER, KUBERNETES_SERVICE, PUBLIC_API, "10.244.", "192.168.10."),
    ),
    "old-download-lets-pvc-models-download": Control(
        steady, old_download_policies, "pvc-models-reach-no-internet", ("model-pvc",)
    ),
    "old-download-bypasses-the-proxy": Control(
        steady,
        old_download_policies,
        "proxy-and-none-pools-reach-no-internet",
        ("tenant-p/model", "tenant-n/model"),
    ),
    "link-local-left-open": Control(
        steady, without_always_closed, "egress-to-metadata", ("169.254.", "fd00:ec2::", "fe80::")
    ),
    "download-on-any-port": Control(
        steady, download_on_any_port, "internet-only-https", ("/model",)
    ),
    "withdrawn-namespace-left-bare": Control(
        changed, nothing_left_in_withdrawn, "withdrawn-isolated", (f"{WITHDRAWN}/model",)
    ),
    "any-gateway-pod-trusted": Control(
        steady, any_gateway_pod, "across-gateways", ("shoal-gateways/gw-",)
    ),
    "gateway-open-to-all": Control(
        steady, gateways_open_to_all, "into-the-gateways", ("attacker", "monitoring", "tenant-")
    ),
    "gateway-trusted-by-labels": Control(
        steady, gateway_by_labels, "cross-tenant-ingress", ("attacker", "mallory")
    ),
}


@pytest.mark.parametrize("name", CONTROLS)
def test_the_checks_flag_weaker_policies(name: str, tmp_path: Path) -> None:
    control = CONTROLS[name]
    world = control.weaken(control.state())
    result = nca("forbids", FORBIDDEN[control.check](world), world.policies, tmp_path)
    assert result.returncode != 0, result.stdout
    assert any(o in result.stdout for o in control.offenders), result.stdout


def test_nca_is_the_real_analyzer() -> None:
    assert shutil.which(str(NCA)) or NCA.exists()
    version = subprocess.run([str(NCA), "--version"], capture_output=True, text=True)
    assert "2." in version.stdout + version.stderr
