"""A TenantPool's gateway: the edge every tenant's requests come through.

The gateway proves who is calling (a ServiceAccount token for the gateway's audience),
enforces each tenant's limits, orders requests by priority and routes them to the least
loaded ready replica of the tenant's model. These models say how big it is and what each
tenant may do; docs/gateway.md says how it works.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from shoal.api.common import (
    DnsLabel,
    DurationFormat,
    ResourceQuantity,
    Rule,
    SpecModel,
    unique_by,
)
from shoal.api.windows import Window

# How long a request over its tenant's concurrency may wait for a slot.
QueueTimeout = Annotated[str, DurationFormat("0s", "60s", example="1s")]
MAX_RATE = 1_000_000
MAX_CONCURRENCY = 100_000


class GatewayLimits(SpecModel):
    """What one tenant may send through the gateway: all its replicas together."""

    requests_per_second: int | None = Field(
        default=None,
        ge=1,
        le=MAX_RATE,
        description="Requests per second the tenant may send; more get 429 with "
        "Retry-After. Unset: no rate limit.",
    )
    burst: int = Field(
        default=0,
        ge=0,
        le=MAX_RATE,
        description="Requests the tenant may send beyond its rate within one second.",
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CONCURRENCY,
        description="Requests of the tenant in flight at once; more wait up to "
        "queueTimeout for a slot, then get 429. Unset: no cap.",
    )
    queue_timeout: QueueTimeout = Field(
        default="1s",
        description="How long a request over the concurrency cap waits for a slot.",
    )


class TenantLimits(SpecModel):
    """One tenant's own limits; a field left out keeps the pool's."""

    namespace: DnsLabel = Field(description="The tenant namespace.")
    requests_per_second: int | None = Field(
        default=None, ge=1, le=MAX_RATE, description="Requests per second."
    )
    burst: int | None = Field(
        default=None, ge=0, le=MAX_RATE, description="Requests beyond the rate in one second."
    )
    concurrency: int | None = Field(
        default=None, ge=1, le=MAX_CONCURRENCY, description="Requests in flight at once."
    )
    queue_timeout: QueueTimeout | None = Field(
        default=None, description="How long a request waits for a concurrency slot."
    )

    rules = (
        Rule(
            cel="has(self.requestsPerSecond) || has(self.burst) || has(self.concurrency) "
            "|| has(self.queueTimeout)",
            check=lambda t: any(
                v is not None
                for v in (t.requests_per_second, t.burst, t.concurrency, t.queue_timeout)
            ),
            message="set at least one limit for the tenant",
        ),
    )


class LimitWindow(Window):
    """A time window in which the pool's default limits are others (e.g. a night-time
    rate for batch jobs, or a tighter one at peak). Tenants' own limits still win."""

    limits: GatewayLimits = Field(description="The default limits while the window is open.")


class Gateway(SpecModel):
    """The pool's gateway: HAProxy, configured by Shoal, in front of the pool's models."""

    enabled: bool = Field(
        default=True,
        description="Whether the pool has a gateway. Without one, the pool's models are "
        "reached only from access.gatewayNamespaces (and their own namespace if allowed).",
    )
    replicas: int = Field(
        default=2, ge=1, le=32, description="Gateway replicas (HAProxy processes)."
    )
    cpu: ResourceQuantity = Field(default="500m", description="CPU requested per replica.")
    memory: ResourceQuantity = Field(
        default="256Mi", description="Memory requested (and the limit) per replica."
    )
    limits: GatewayLimits = Field(
        default_factory=GatewayLimits, description="Every tenant's limits, unless its own say."
    )
    tenants: Annotated[list[TenantLimits], unique_by("namespace")] = Field(
        default_factory=list,
        max_length=256,
        description="Tenants with limits of their own.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["namespace"],
        },
    )
    windows: Annotated[list[LimitWindow], unique_by("name")] = Field(
        default_factory=list,
        max_length=16,
        description="Time windows with other default limits; the first open one applies.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
