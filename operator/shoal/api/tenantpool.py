"""TenantPool: a slice of GPU capacity, dedicated to some tenants or shared among them."""

from __future__ import annotations

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
)

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


class Access(SpecModel):
    """Who may reach the pool's models over the network. Everything else is denied."""

    gateway_namespaces: Annotated[list[DnsLabel], UniqueList] = Field(
        default_factory=list,
        max_length=64,
        description="Namespaces allowed to call the inference ports (HTTP 8000, gRPC 8001), "
        "e.g. the API gateway's.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    monitoring_namespaces: Annotated[list[DnsLabel], UniqueList] = Field(
        default_factory=list,
        max_length=64,
        description="Namespaces allowed to scrape the metrics port (8002).",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    allow_same_namespace: bool = Field(
        default=True,
        description="Whether pods in the model's own namespace may call it.",
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
    priority: Priority = Field(default_factory=Priority, description="Scheduling priority.")
    access: Access = Field(default_factory=Access, description="Network allow-list.")

    rules = (
        Rule(
            cel="self.isolation != 'Dedicated' || (has(self.placement) && "
            "has(self.placement.nodeSelector) && size(self.placement.nodeSelector) > 0)",
            check=lambda s: s.isolation != "Dedicated" or bool(s.placement.node_selector),
            message="a Dedicated pool must say where it runs: set placement.nodeSelector",
            field=".placement.nodeSelector",
        ),
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
