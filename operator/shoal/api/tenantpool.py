"""TenantPool: a slice of GPU capacity, dedicated to some tenants or shared among them."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import Field

from shoal.api.common import (
    Conditions,
    DnsLabel,
    LabelKey,
    LabelSelector,
    LabelValue,
    ObjectMeta,
    Rule,
    SpecModel,
    TextFormat,
    Toleration,
    UniqueList,
    conditions_field,
    name_rule,
    unique_by,
)
from shoal.api.gateway import Gateway
from shoal.api.windows import Window

POOL_NAME_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
POOL_NAME_MAX = 52
PoolName = Annotated[
    str,
    TextFormat(
        POOL_NAME_PATTERN,
        f"the name of a TenantPool: a DNS label of at most {POOL_NAME_MAX} characters",
        max_length=POOL_NAME_MAX,
    ),
]


class Tenants(SpecModel):
    """Which namespaces may run models in the pool: those listed, plus those selected."""

    namespaces: Annotated[list[DnsLabel], UniqueList] = Field(
        default_factory=list,
        max_length=256,
        description="Tenant namespaces, by name.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    selector: LabelSelector | None = Field(
        default=None,
        description="Tenant namespaces, by label. Select on the immutable "
        "kubernetes.io/metadata.name label where you can: a tenant can set other labels "
        "on its own namespace.",
    )

    rules = (
        Rule(
            cel="(has(self.namespaces) && size(self.namespaces) > 0) || has(self.selector)",
            check=lambda t: bool(t.namespaces) or t.selector is not None,
            message="list namespaces or give a selector: a pool must admit some tenant",
        ),
        Rule(
            cel="!has(self.selector) || "
            "(has(self.selector.matchLabels) && size(self.selector.matchLabels) > 0) || "
            "(has(self.selector.matchExpressions) && size(self.selector.matchExpressions) > 0)",
            check=lambda t: t.selector is None or not t.selector.is_empty(),
            message="an empty selector admits every namespace, kube-system included: give "
            "matchLabels or matchExpressions, or leave the selector out",
            field=".selector",
        ),
    )


# It becomes the value of the nvidia.com/gpu.product node selector: a label value.
GpuProduct = Annotated[LabelValue, Field(min_length=1)]


class Placement(SpecModel):
    """Where the pool's model pods run."""

    node_selector: dict[LabelKey, LabelValue] = Field(
        default_factory=dict,
        max_length=64,
        description="Node labels the pool's pods require, e.g. a node group label.",
    )
    tolerations: list[Toleration] = Field(
        default_factory=list,
        max_length=32,
        description="Taints the pool's pods tolerate, e.g. a dedicated node group's taint.",
    )
    gpu_product: GpuProduct | None = Field(
        default=None,
        description="The GPU model the pool runs on, matched against the nodes' "
        "nvidia.com/gpu.product label, e.g. NVIDIA-H100-80GB-HBM3.",
    )


class Quota(SpecModel):
    """Limits on what the pool's tenants may use, per tenant namespace."""

    gpus: int = Field(ge=0, le=100_000, description="GPUs a tenant namespace may request.")
    models: int | None = Field(
        default=None,
        ge=0,
        le=10_000,
        description="InferenceModels a tenant may run; unset: no limit.",
    )
    replicas: int | None = Field(
        default=None,
        ge=0,
        le=100_000,
        description="Model replicas (pods) a tenant may run; unset: no limit.",
    )


class CapacityWindow(Window):
    """A time window in which the pool's nominal GPUs are others: more at peak hours,
    fewer at night. At the window's start the ClusterQueue's quota changes; replicas
    above a lower quota are drained by scaling down (their termination grace period
    and Triton's drain), not killed."""

    gpus: int = Field(
        ge=0, le=100_000, description="The pool's nominal GPUs while the window is open."
    )


class Capacity(SpecModel):
    """The pool's GPUs as a whole, governed by Kueue: lent to the pools of its cohort
    while idle and taken back, by preemption of what they borrowed, when needed."""

    gpus: int = Field(
        ge=0,
        le=100_000,
        description="The pool's nominal GPUs, across all its tenant namespaces: what it is "
        "guaranteed (a Kueue ClusterQueue's nominal quota).",
    )
    cohort: DnsLabel | None = Field(
        default=None,
        description="Pools that name the same cohort lend each other idle GPUs. Unset: "
        "the pool neither lends nor borrows.",
    )
    weight: int = Field(
        default=1,
        ge=0,
        le=1000,
        description="The pool's fair-sharing weight: borrowers with weights 1 and 3 share "
        "idle GPUs 1:3. 0: it borrows only what no one else wants.",
    )
    borrowing_limit: int | None = Field(
        default=None,
        ge=0,
        le=100_000,
        description="GPUs the pool may borrow beyond its own, from each lending pool of "
        "its cohort. Unset: as many as they lend.",
    )
    lending_limit: int | None = Field(
        default=None,
        ge=0,
        le=100_000,
        description="GPUs of its own the pool lends to its cohort while they are idle. "
        "Unset: all of its idle GPUs. Lent GPUs are taken back by preemption of the "
        "borrowers' replicas (graceful: their termination grace period and drain). "
        "While a window gives the pool fewer GPUs, it lends at most those.",
    )
    windows: Annotated[list[CapacityWindow], unique_by("name")] = Field(
        default_factory=list,
        max_length=16,
        description="Time windows with other nominal GPUs (e.g. fewer at night); the first "
        "open one applies, and gpus applies outside them.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )

    rules = (
        Rule(
            cel="has(self.cohort) || (!has(self.borrowingLimit) && !has(self.lendingLimit))",
            check=lambda c: (
                c.cohort is not None or (c.borrowing_limit is None and c.lending_limit is None)
            ),
            message="borrowingLimit and lendingLimit need a cohort to borrow from or lend to",
            field=".cohort",
        ),
        Rule(
            cel="!has(self.lendingLimit) || self.lendingLimit <= self.gpus",
            check=lambda c: c.lending_limit is None or c.lending_limit <= c.gpus,
            message="lendingLimit may not exceed gpus: a pool lends only its own GPUs",
            field=".lendingLimit",
        ),
    )


class Priority(SpecModel):
    """Scheduling priority of the pool's pods (a PriorityClass the operator creates)."""

    value: int | None = Field(
        default=None,
        ge=-1_000_000_000,
        le=1_000_000_000,
        description="PriorityClass value. Unset: 100000 for Dedicated pools, 1000 for Shared "
        "ones, so dedicated pods preempt shared pods when GPUs run out.",
    )
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = Field(
        default="PreemptLowerPriority",
        description="Whether the pool's pods may preempt lower-priority pods.",
    )


# An IPv4 or IPv6 network in canonical form (no host bits, IPv6 compressed, lowercase).
# IPv6 may not embed dotted IPv4: the API server's cidr() refuses IPv4-mapped networks.
CIDR_PATTERN = r"^(([0-9]{1,3}(\.[0-9]{1,3}){3}|[0-9a-f:]{2,39})/[0-9]{1,3})$"
Cidr = Annotated[
    str,
    TextFormat(
        CIDR_PATTERN,
        "a network such as 10.0.0.0/8 or fd00::/8",
        max_length=43,
        min_length=4,
        example="10.0.0.0/8",
    ),
]
PROXY_URL_PATTERN = r"^(https?://[a-z0-9]([-a-z0-9.]*[a-z0-9])?(:[0-9]{1,5})?/?)$"
ProxyUrl = Annotated[
    str,
    TextFormat(
        PROXY_URL_PATTERN,
        "an http:// or https:// URL of a host and optional port, without credentials or a path",
        max_length=270,
        example="http://egress-proxy.egress.svc.cluster.local:3128",
    ),
]
NoProxyEntry = Annotated[
    str,
    TextFormat(
        r"^([A-Za-z0-9.*:/\[\]_-]+)$",
        "a host, a domain such as .example.com or a network such as 10.1.0.0/16",
        max_length=253,
        example=".example.com",
    ),
]
_CANONICAL_CIDR_CEL = "isCIDR({0}) && string(cidr({0}).masked()) == {0}"


def canonical_cidr(text: str) -> bool:
    """Whether ``text`` is a network in the form the API server's cidr() prints."""
    try:
        return str(ipaddress.ip_network(text, strict=True)) == text
    except ValueError:
        return False


class EgressProxy(SpecModel):
    """An HTTP(S) proxy in the cluster that model downloads go through."""

    url: ProxyUrl = Field(
        description="The proxy's URL, set as HTTPS_PROXY and HTTP_PROXY in the model-fetch "
        "init container, e.g. http://egress-proxy.egress.svc.cluster.local:3128. No "
        "credentials: the URL is readable by everyone who can read the pool.",
    )
    namespace: DnsLabel = Field(
        description="The proxy's namespace, matched by its immutable "
        "kubernetes.io/metadata.name label."
    )
    pod_selector: LabelSelector = Field(
        description="The proxy's pods in that namespace. The only destination the pool's "
        "downloading pods may reach, besides DNS."
    )
    port: int = Field(
        ge=1,
        le=65535,
        description="The TCP port the proxy's pods listen on (the container port: "
        "NetworkPolicies see traffic after a Service has translated its port).",
    )
    no_proxy: Annotated[
        list[NoProxyEntry],
        UniqueList,
    ] = Field(
        default_factory=list,
        max_length=32,
        description="Hosts, domains (.example.com) or networks (10.1.0.0/16) reached "
        "without the proxy, added to NO_PROXY after localhost and the extraDestinations "
        "networks. They must still be allowed by some NetworkPolicy.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )


class Destination(SpecModel):
    """One extra network and port the pool's downloading pods may reach."""

    cidr: Cidr = Field(
        description="The network, e.g. 169.254.170.23/32 for the EKS Pod Identity agent. "
        "May lie inside the cluster's or the link-local ranges: that is its purpose."
    )
    port: int = Field(ge=1, le=65535, description="The destination port.")
    protocol: Literal["TCP", "UDP"] = Field(default="TCP", description="TCP or UDP.")

    rules = (
        Rule(
            cel=_CANONICAL_CIDR_CEL.format("self.cidr"),
            check=lambda d: canonical_cidr(d.cidr),
            message="cidr must be a network in canonical form, e.g. 10.0.0.0/8 or fd00::/8 "
            "(no host bits set, IPv6 compressed and lowercase)",
            field=".cidr",
        ),
    )


class ModelDownload(SpecModel):
    """How the model-fetch init container of the pool's pods reaches model storage.

    Only pods whose model comes over the network (s3://, gs://, https://) get this egress;
    a pvc:// model's pods reach DNS and nothing else.
    """

    mode: Literal["Direct", "Proxy", "None"] = Field(
        default="Direct",
        description="Direct: TCP 443 to addresses outside the cluster (never the "
        "clusterCIDRs, nor link-local or instance-metadata addresses). Proxy: only the "
        "proxy's pods, which the fetch container is pointed at. None: no download egress "
        "at all (pvc:// models only).",
    )
    cluster_cidrs: list[Cidr] | None = Field(
        default=None,
        alias="clusterCIDRs",
        max_length=64,
        description="In Direct mode, the networks downloads must never reach: the "
        "cluster's pod, Service and node ranges, and the API server's address where it "
        "is not among them. Unset: the operator's setting (by default 10.0.0.0/8, "
        "172.16.0.0/12, 192.168.0.0/16, 100.64.0.0/10 and fc00::/7). Link-local and "
        "instance-metadata addresses are refused whatever this says.",
    )
    proxy: EgressProxy | None = Field(
        default=None, description="For Proxy mode: the proxy downloads go through."
    )
    extra_destinations: list[Destination] = Field(
        default_factory=list,
        max_length=16,
        description="Networks and ports downloads may also reach directly, in Direct and "
        "Proxy mode, even inside the cluster or link-local: e.g. a credentials endpoint "
        "such as the EKS Pod Identity agent or the GKE metadata server, or a private "
        "object-storage endpoint.",
    )

    rules = (
        Rule(
            cel="!has(self.clusterCIDRs) || self.clusterCIDRs.all(c, "
            + _CANONICAL_CIDR_CEL.format("c")
            + ")",
            check=lambda m: m.cluster_cidrs is None or all(map(canonical_cidr, m.cluster_cidrs)),
            message="clusterCIDRs must list networks in canonical form, e.g. 10.0.0.0/8 or "
            "fd00::/8 (no host bits set, IPv6 compressed and lowercase)",
            field=".clusterCIDRs",
        ),
        Rule(
            cel="(self.mode == 'Proxy') == has(self.proxy)",
            check=lambda m: (m.mode == "Proxy") == (m.proxy is not None),
            message="set proxy when, and only when, mode is Proxy",
            field=".proxy",
        ),
        Rule(
            cel="self.mode != 'None' || !has(self.extraDestinations) || "
            "size(self.extraDestinations) == 0",
            check=lambda m: m.mode != "None" or not m.extra_destinations,
            message="mode None allows no download egress: leave extraDestinations empty",
            field=".extraDestinations",
        ),
    )


class Access(SpecModel):
    """Who may reach the pool's models over the network. Everything else is denied."""

    gateway_namespaces: Annotated[list[DnsLabel], UniqueList] = Field(
        default_factory=list,
        max_length=64,
        description="Namespaces allowed to call the inference ports (HTTP 8000, gRPC 8001) "
        "directly, besides the pool's own gateway: e.g. an API gateway of yours that does "
        "its own authentication and limits.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    monitoring_namespaces: Annotated[list[DnsLabel], UniqueList] = Field(
        default_factory=list,
        max_length=64,
        description="Namespaces allowed to scrape the metrics port (8002).",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    allow_same_namespace: bool = Field(
        default=False,
        description="Whether pods in the model's own namespace may call it directly, "
        "bypassing the pool's gateway (its identity check and limits).",
    )
    model_download: ModelDownload = Field(
        default_factory=ModelDownload,
        description="Where the pool's pods may fetch model files from.",
    )


# A namespace that is both a tenant and a caller would give that tenant's own pods the
# gateway's (or the scraper's) reach into every model of the pool.
ACCESS_NOT_TENANT = Rule(
    cel="!has(self.tenants.namespaces) || !has(self.access) || "
    "((!has(self.access.gatewayNamespaces) || "
    "self.access.gatewayNamespaces.all(n, !(n in self.tenants.namespaces))) && "
    "(!has(self.access.monitoringNamespaces) || "
    "self.access.monitoringNamespaces.all(n, !(n in self.tenants.namespaces))))",
    check=lambda s: (
        not set(s.tenants.namespaces)
        & (set(s.access.gateway_namespaces) | set(s.access.monitoring_namespaces))
    ),
    message="a tenant namespace may not also be a gateway or monitoring namespace: its "
    "pods would reach every model of the pool",
    field=".access",
)


class TenantPoolSpec(SpecModel):
    """A slice of GPU capacity and the rules of its use."""

    isolation: Literal["Dedicated", "Shared"] = Field(
        description="Dedicated: the pool's own nodes, for critical tenants. Shared: common "
        "nodes, for bursty traffic; its pods may be preempted by dedicated pools."
    )
    tenants: Tenants = Field(description="The tenant namespaces the pool admits.")
    placement: Placement = Field(
        default_factory=Placement, description="Where the pool's pods run."
    )
    quota: Quota = Field(description="What each tenant namespace may use.")
    capacity: Capacity | None = Field(
        default=None,
        description="Elastic capacity: the pool's GPUs as a whole, lent to and borrowed "
        "from the pools of its cohort. Needs Kueue in the cluster; without it the "
        "per-namespace quota alone applies, and status.capacity.mode says HardQuota.",
    )
    priority: Priority = Field(default_factory=Priority, description="Scheduling priority.")
    access: Access = Field(default_factory=Access, description="Network allow-list.")
    gateway: Gateway = Field(
        default_factory=Gateway,
        description="The pool's gateway: identity, per-tenant limits, priority and routing "
        "at the edge.",
    )

    rules = (
        Rule(
            cel="self.isolation != 'Dedicated' || (has(self.placement) && "
            "has(self.placement.nodeSelector) && size(self.placement.nodeSelector) > 0)",
            check=lambda s: s.isolation != "Dedicated" or bool(s.placement.node_selector),
            message="a Dedicated pool must say where it runs: set placement.nodeSelector",
            field=".placement.nodeSelector",
        ),
        ACCESS_NOT_TENANT,
    )


class OidcIssuerStatus(SpecModel):
    """The signing keys of one OIDC issuer the gateway trusts, as it verifies with them."""

    issuer: str = Field(description="The issuer (spec.gateway.oidc[].issuer).")
    jwks_uri: str | None = Field(
        default=None, alias="jwksURI", description="Where its keys were last fetched from."
    )
    keys: list[str] = Field(
        default_factory=list,
        description="The key ids the gateway verifies its tokens with: the last key set "
        "fetched. Empty: none yet, and its tokens are refused.",
    )
    error: str | None = Field(
        default=None,
        description="Why the last fetch of its keys failed; the keys above are those "
        "fetched before. Unset: the last fetch succeeded.",
    )


class GatewayStatus(SpecModel):
    """The pool's gateway as it stands."""

    http: str | None = Field(default=None, description="The gateway's HTTP endpoint.")
    grpc: str | None = Field(default=None, description="The gateway's gRPC endpoint.")
    audience: str | None = Field(
        default=None, description="The audience a caller's ServiceAccount token must carry."
    )
    replicas: int | None = Field(default=None, ge=0, description="Gateway replicas.")
    ready_replicas: int | None = Field(default=None, ge=0, description="Ready replicas.")
    oidc: list[OidcIssuerStatus] = Field(
        default_factory=list, description="The OIDC issuers it trusts, and their keys."
    )


class CapacityStatus(SpecModel):
    """The pool's GPUs as Kueue accounts them."""

    mode: Literal["Kueue", "HardQuota"] = Field(
        description="Kueue: the pool's capacity is a Kueue ClusterQueue. HardQuota: only "
        "the per-namespace ResourceQuotas apply (no capacity set, or no Kueue)."
    )
    nominal_gpus: int | None = Field(
        default=None, ge=0, description="The pool's own GPUs now (its open window's, if any)."
    )
    window: str | None = Field(
        default=None, description="The capacity window open now, whose GPUs apply."
    )
    in_use_gpus: int | None = Field(
        default=None, ge=0, description="GPUs admitted to the pool's replicas, borrowed included."
    )
    borrowed_gpus: int | None = Field(
        default=None, ge=0, description="GPUs the pool's replicas borrow from its cohort."
    )
    lent_gpus: int | None = Field(
        default=None, ge=0, description="Of the pool's own GPUs, those other pools' replicas use."
    )
    waiting_replicas: int | None = Field(
        default=None, ge=0, description="Replicas of the pool waiting for quota."
    )
    draining_gpus: int | None = Field(
        default=None,
        ge=0,
        description="GPUs of the pool's own its replicas hold beyond its nominal quota "
        "since a window lowered it: scaled down (no cohort), or evicted as far as the "
        "cohort has idle GPUs for their replacements.",
    )


class TenantPoolStatus(SpecModel):
    """What the operator observed about the pool."""

    observed_generation: int | None = Field(
        default=None, ge=0, description="The .metadata.generation last acted upon."
    )
    conditions: Conditions = conditions_field()
    gpus_used: int | None = Field(
        default=None, ge=0, description="GPUs requested by the pool's models."
    )
    models: int | None = Field(default=None, ge=0, description="InferenceModels in the pool.")
    replicas: int | None = Field(default=None, ge=0, description="Model replicas in the pool.")
    gateway: GatewayStatus | None = Field(default=None, description="The pool's gateway.")
    capacity: CapacityStatus | None = Field(
        default=None, description="The pool's elastic capacity, and which mode governs it."
    )
    admitted_namespaces: list[str] = Field(
        default_factory=list, description="Namespaces the pool currently admits."
    )


class TenantPool(SpecModel):
    """TenantPool is a slice of GPU capacity for some tenant namespaces: Dedicated (own
    nodes, for critical tenants) or Shared (common nodes, for bursty traffic), with a
    per-tenant quota, a scheduling priority and a network allow-list."""

    api_version: Literal["shoal.dev/v1alpha1"] = "shoal.dev/v1alpha1"
    kind: Literal["TenantPool"] = "TenantPool"
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: TenantPoolSpec
    status: TenantPoolStatus | None = None

    # The name is a label value on every pod of the pool, and with a prefix the name of
    # its PriorityClass, which its quotas' scope must be able to name (63 characters).
    rules = (
        name_rule(
            POOL_NAME_PATTERN,
            POOL_NAME_MAX,
            f"metadata.name must be a DNS label (lowercase letters, digits and '-') of "
            f"at most {POOL_NAME_MAX} characters: it names the pool's PriorityClass",
        ),
    )
