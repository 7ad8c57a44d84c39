"""What a pool's gateway is configured with, from the custom resources (pure functions):
each tenant's limits in force at a moment, and the route to each model. The reconciler
adds what only the cluster knows (ready replicas, the gateway's own pods, the signing
keys of the cluster and of the OIDC issuers the pool trusts); ``shoal render`` previews
it without a cluster."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.byte_size import bytes_of
from shoal.api.common import parse_duration
from shoal.api.gateway import GatewayLimits, OidcIssuer, TenantLimits
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.render.batching import effective_batching
from shoal.render.gateway import audience
from shoal.render.gateway_config import (
    GatewayConfig,
    Limits,
    Peer,
    Route,
    Server,
    SigningKey,
    TrustedIssuer,
)
from shoal.render.gateway_files import LIVE_DIR, RUNTIME_DIR
from shoal.render.keys import Issuer, PublicKey
from shoal.render.model_config import executors
from shoal.render.schedule import is_open


def _ms(duration: str) -> int:
    return round(parse_duration(duration) * 1000)


def _limits(defaults: GatewayLimits, own: TenantLimits | None) -> Limits:
    """A tenant's limits: its own where it says, the pool's (or a window's) elsewhere."""

    def pick(name: str) -> Any:
        value = getattr(own, name) if own is not None else None
        return getattr(defaults, name) if value is None else value

    return Limits(
        requests_per_second=pick("requests_per_second"),
        burst=pick("burst"),
        concurrency=pick("concurrency"),
        queue_timeout_ms=_ms(pick("queue_timeout")),
    )


def tenant_limits(
    pool: TenantPool, tenants: Sequence[str], now: dt.datetime
) -> tuple[tuple[str, Limits], ...]:
    """Every admitted tenant's limits in force at ``now``: a tenant's own, else those of
    the first open window, else the pool's."""
    gateway = pool.spec.gateway
    windows = [w for w in gateway.windows if is_open(w, now)]
    defaults = windows[0].limits if windows else gateway.limits
    own = {t.namespace: t for t in gateway.tenants}
    return tuple((ns, _limits(defaults, own.get(ns))) for ns in sorted(tenants))


def backend_name(namespace: str, name: str) -> str:
    return f"m_{namespace}_{name}"


def replica_slots(max_batch_size: int, executors: int, lanes: bool) -> int:
    """The requests one replica holds at once: a batch executing on each of its
    instances, and batches gathered for them to take next. Without priority lanes, one
    gathered for each instance: Triton has a full batch ready wherever an instance
    finishes (one in all left a four-instance replica at 0.87x the throughput Triton
    reaches alone). With lanes, one in all: a request Triton holds is served in arrival
    order, so every slot beyond that is a place where a top-lane request waits behind
    low ones (a second request for each of eight instances took the top lane's P95 at
    2x overload from 1.0x to 1.7x its unloaded P95). Everything beyond the slots waits
    in the gateway's queue, in priority order, where the HPA reads it."""
    gathered = 1 if lanes else executors
    return (executors + gathered) * max_batch_size


def route(
    model: InferenceModel,
    policy: BatchPolicySpec | None,
    servers: tuple[Server, ...],
    overflow: tuple[Server, ...] = (),
) -> Route | None:
    """The route to one model (to its ready ``overflow`` replicas too, when it has
    some), or None when its batching does not fit (its own pass reports that)."""
    try:
        batching = effective_batching(model, policy)
    except ValueError:
        return None
    levels = batching.priority_levels
    return Route(
        tenant=model.metadata.namespace or "",
        model=model.spec.model.name,
        backend=backend_name(model.metadata.namespace or "", model.metadata.name),
        servers=servers,
        timeout_ms=_ms(model.spec.routing.timeout),
        server_maxconn=replica_slots(batching.max_batch_size, executors(model), levels > 1),
        priority_levels=levels,
        default_priority=(batching.default_priority or levels) if levels else 0,
        sticky_header=model.spec.routing.sticky_header,
        overflow=overflow,
    )


def unique_routes(routes: Sequence[tuple[tuple[str, str], Route]]) -> tuple[Route, ...]:
    """One route per (tenant, Triton model name): the first model, in the order given
    (``((creation time, name), route)`` pairs), wins a Triton model name two of a
    tenant's models share."""
    chosen: dict[tuple[str, str], Route] = {}
    for _, each in sorted(routes, key=lambda pair: pair[0]):
        chosen.setdefault((each.tenant, each.model), each)
    return tuple(chosen[k] for k in sorted(chosen))


def signing_keys(keys: Sequence[PublicKey]) -> tuple[SigningKey, ...]:
    """Keys as the gateway finds them: each a file in its live directory."""
    return tuple(SigningKey(kid=k.kid, alg=k.alg, path=f"{LIVE_DIR}/{k.file_name}") for k in keys)


def trusted_issuer(spec: OidcIssuer, keys: Sequence[PublicKey]) -> TrustedIssuer:
    """One OIDC issuer of spec.gateway.oidc, with the keys last fetched from it."""
    return TrustedIssuer(
        issuer=spec.issuer,
        audience=spec.audience,
        tenant_claim=spec.tenant_claim,
        keys=signing_keys(keys),
    )


def gateway_config(
    pool: TenantPool,
    issuer: Issuer,
    tenants: Sequence[str],
    routes: tuple[Route, ...],
    peers: tuple[Peer, ...],
    now: dt.datetime,
    oidc_keys: Sequence[tuple[OidcIssuer, Sequence[PublicKey]]] = (),
) -> GatewayConfig:
    """The pool's gateway configuration; ``oidc_keys`` pairs each issuer of
    spec.gateway.oidc with the keys fetched from it."""
    return GatewayConfig(
        pool=pool.metadata.name,
        issuer=issuer.url,
        audience=audience(pool.metadata.name),
        keys=signing_keys(issuer.keys),
        tenants=tenant_limits(pool, tenants, now),
        routes=routes,
        peers=peers,
        runtime_dir=RUNTIME_DIR,
        oidc=tuple(trusted_issuer(spec, keys) for spec, keys in oidc_keys),
        max_request_body=bytes_of(pool.spec.gateway.max_request_body),
    )
