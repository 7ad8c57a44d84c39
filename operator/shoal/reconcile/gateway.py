"""A pool's gateway, part of the pool's pass: what it is configured with (the tenants
and their limits in force now, a route for each model with its ready replicas, the
gateway's own replicas as peers, the cluster's signing keys), its objects, and what its
status says."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import ValidationError

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.common import parse_duration, parse_object
from shoal.api.constants import GATEWAY_LABEL
from shoal.api.gateway import GatewayLimits, TenantLimits
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.cache import key_of
from shoal.gateway.keys import Issuer
from shoal.kube.issuer import fetch_issuer
from shoal.render.batching import effective_batching
from shoal.render.gateway import (
    LIVE_DIR,
    RUNTIME_DIR,
    audience,
    gateway_host,
    gateway_objects,
)
from shoal.render.gateway_config import (
    GRPC_PORT,
    HTTP_PORT,
    GatewayConfig,
    Limits,
    Peer,
    Route,
    Server,
    SigningKey,
)
from shoal.render.haproxy import haproxy_config
from shoal.render.schedule import is_open, next_window_change
from shoal.state import Operator

GATEWAY_KINDS = {
    "ConfigMap": "v1",
    "NetworkPolicy": "networking.k8s.io/v1",
    "Service": "v1",
    "PodDisruptionBudget": "policy/v1",
    "Deployment": "apps/v1",
}
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


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
    pool: TenantPool, tenants: list[str], now: dt.datetime
) -> tuple[tuple[str, Limits], ...]:
    """Every admitted tenant's limits in force at ``now`` (pure)."""
    gateway = pool.spec.gateway
    windows = [w for w in gateway.windows if is_open(w, now)]
    defaults = windows[0].limits if windows else gateway.limits
    own = {t.namespace: t for t in gateway.tenants}
    return tuple((ns, _limits(defaults, own.get(ns))) for ns in sorted(tenants))


def backend_name(namespace: str, name: str) -> str:
    return f"m_{namespace}_{name}"


def servers_of(op: Operator, namespace: str, service: str) -> tuple[Server, ...]:
    """The ready replicas of a model, from its Service's EndpointSlices."""
    out: dict[str, Server] = {}
    for slice_ in op.cache.all("EndpointSlice", [namespace]):
        if (slice_["metadata"].get("labels") or {}).get(SERVICE_NAME_LABEL) != service:
            continue
        for endpoint in slice_.get("endpoints") or []:
            if not endpoint["ready"] or not endpoint["addresses"]:
                continue
            address = endpoint["addresses"][0]
            name = endpoint["pod"] or address
            out[name] = Server(name=name, host=address, http_port=HTTP_PORT, grpc_port=GRPC_PORT)
    return tuple(out[k] for k in sorted(out))


def route_of(op: Operator, body: dict[str, Any]) -> Route | None:
    """The route to one model, or None when it cannot be served (its own pass says why)."""
    try:
        model = parse_object(InferenceModel, body)
    except ValidationError:
        return None
    namespace = model.metadata.namespace or ""
    policy = None
    if model.spec.batch_policy is not None:
        found = op.cache.get("BatchPolicy", model.spec.batch_policy.name, namespace)
        if found is None:
            return None
        try:
            policy = parse_object(BatchPolicy, found).spec
        except ValidationError:
            return None
    try:
        batching = effective_batching(model, policy)
    except ValueError:
        return None
    levels = batching.priority_levels
    return Route(
        tenant=namespace,
        model=model.spec.model.name,
        backend=backend_name(namespace, model.metadata.name),
        servers=servers_of(op, namespace, model.metadata.name),
        timeout_ms=_ms(model.spec.routing.timeout),
        # A batch being executed and one being gathered: Triton keeps its batches full,
        # and everything beyond waits in the gateway's queue, in priority order.
        server_maxconn=2 * batching.max_batch_size,
        priority_levels=levels,
        default_priority=(batching.default_priority or levels) if levels else 0,
        sticky_header=model.spec.routing.sticky_header,
    )


def routes_of(op: Operator, models: list[dict[str, Any]], tenants: list[str]) -> tuple[Route, ...]:
    """A route per servable model of an admitted tenant; the first model (by creation)
    wins a Triton model name two of a tenant's models share."""
    routes: dict[tuple[str, str], Route] = {}
    ordered = sorted(
        models,
        key=lambda m: (m["metadata"].get("creationTimestamp") or "", m["metadata"]["name"]),
    )
    for body in ordered:
        if body["metadata"].get("deletionTimestamp"):
            continue
        if body["metadata"].get("namespace") not in tenants:
            continue
        route = route_of(op, body)
        if route is not None:
            routes.setdefault((route.tenant, route.model), route)
    return tuple(routes[k] for k in sorted(routes))


def peers_of(op: Operator, pool: str) -> tuple[Peer, ...]:
    """The gateway's replicas with an address: they share their counters."""
    peers = []
    for pod in op.cache.all("Pod", [op.settings.gateway.namespace]):
        meta = pod["metadata"]
        status = pod.get("status") or {}
        if (meta.get("labels") or {}).get(GATEWAY_LABEL) != pool or meta.get("deletionTimestamp"):
            continue
        if status.get("podIP") and status.get("phase") == "Running":
            peers.append(Peer(name=meta["name"], host=status["podIP"]))
    return tuple(sorted(peers, key=lambda p: p.name))


def issuer(op: Operator) -> Issuer:
    """The cluster's token issuer and signing keys, read once and then at each resync."""
    known = op.issuer
    if known is None:
        known = op.issuer = fetch_issuer(op.kube)
    return known


def gateway_config(
    op: Operator, pool: TenantPool, tenants: list[str], models: list[dict[str, Any]]
) -> GatewayConfig:
    signer = issuer(op)
    now = dt.datetime.now(dt.UTC)
    return GatewayConfig(
        pool=pool.metadata.name,
        issuer=signer.url,
        audience=audience(pool.metadata.name),
        keys=tuple(
            SigningKey(kid=k.kid, alg=k.alg, path=f"{LIVE_DIR}/{k.file_name}") for k in signer.keys
        ),
        tenants=tenant_limits(pool, tenants, now),
        routes=routes_of(op, models, tenants),
        peers=peers_of(op, pool.metadata.name),
        runtime_dir=RUNTIME_DIR,
    )


def converge_gateway(
    op: Operator, pool: TenantPool, tenants: list[str], models: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """Apply the pool's gateway (or remove it when the pool has none); returns the
    gateway's status, None when there is no gateway."""
    name = pool.metadata.name
    site = op.settings.gateway
    wanted: set[tuple[str, str, str]] = set()
    deployment: dict[str, Any] | None = None
    if pool.spec.gateway.enabled:
        config = gateway_config(op, pool, tenants, models)
        objects = gateway_objects(pool, site, haproxy_config(config), issuer(op).keys, tenants)
        for obj in objects:
            live = op.kube.apply(obj)
            if obj["kind"] == "Deployment":
                deployment = live
        wanted = {key_of(o["kind"], o) for o in objects}
        op.set_wakeup(
            "TenantPool",
            name,
            next_window_change(pool.spec.gateway.windows, dt.datetime.now(dt.UTC)),
        )
    else:
        op.set_wakeup("TenantPool", name, None)
    for live in op.cache.in_pool(name, GATEWAY_KINDS):
        meta = live["metadata"]
        is_gateway = (meta.get("labels") or {}).get(GATEWAY_LABEL) == name
        if is_gateway and key_of(live["kind"], live) not in wanted:
            op.kube.delete({**live, "apiVersion": GATEWAY_KINDS[live["kind"]]})
    if deployment is None:
        return None
    host = gateway_host(name, site)
    status = deployment.get("status") or {}
    return {
        "http": f"http://{host}:{HTTP_PORT}",
        "grpc": f"{host}:{GRPC_PORT}",
        "audience": audience(name),
        "replicas": status.get("replicas", 0),
        "readyReplicas": status.get("readyReplicas", 0),
    }
