"""A pool's gateway, part of the pool's pass: what it is configured with (the tenants
and their limits in force now, a route for each model with its ready replicas, the
gateway's own replicas as peers, the cluster's signing keys), its objects, and what its
status says."""

from __future__ import annotations

import datetime as dt
from typing import Any

from pydantic import ValidationError

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.common import parse_object
from shoal.api.constants import GATEWAY_LABEL
from shoal.api.inferencemodel import InferenceModel
from shoal.api.kinds import GATEWAY
from shoal.api.tenantpool import TenantPool
from shoal.kube.client import ApiError
from shoal.kube.issuer import JWKS_PATH, fetch_issuer
from shoal.reconcile.prune import Owner, apply_and_prune
from shoal.render.gateway import (
    audience,
    gateway_host,
    gateway_objects,
)
from shoal.render.gateway_config import (
    GRPC_PORT,
    HTTP_PORT,
    Peer,
    Route,
    Server,
)
from shoal.render.gateway_plan import gateway_config, route, unique_routes
from shoal.render.haproxy_config import GatewayConfigError, haproxy_config
from shoal.render.keys import Issuer
from shoal.render.overflow import overflow_name
from shoal.state import Operator

SERVICE_NAME_LABEL = "kubernetes.io/service-name"


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
    overflow: tuple[Server, ...] = ()
    if model.spec.overflow is not None:
        overflow = servers_of(op, namespace, overflow_name(model.metadata.name))
    return route(model, policy, servers_of(op, namespace, model.metadata.name), overflow)


def routes_of(op: Operator, models: list[dict[str, Any]], tenants: list[str]) -> tuple[Route, ...]:
    """A route per servable model of an admitted tenant."""
    found = []
    for body in models:
        meta = body["metadata"]
        if meta.get("deletionTimestamp") or meta.get("namespace") not in tenants:
            continue
        each = route_of(op, body)
        if each is not None:
            found.append(((str(meta.get("creationTimestamp") or ""), str(meta["name"])), each))
    return unique_routes(found)


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


class GatewayUnavailableError(Exception):
    """The gateway cannot be configured now; its last configuration keeps serving."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def issuer(op: Operator) -> Issuer:
    """The cluster's token issuer and signing keys, read once and then at each resync."""
    known = op.issuer
    if known is None:
        try:
            known = op.issuer = fetch_issuer(op.kube)
        except ApiError as exc:
            raise GatewayUnavailableError(
                "IssuerUnreadable",
                f"Reading the cluster's token signing keys failed ({exc.status} "
                f"{exc.reason}); the gateway keeps its last configuration.",
            ) from None
    return known


def converge_gateway(
    op: Operator, pool: TenantPool, tenants: list[str], models: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """Apply the pool's gateway (or remove it when the pool has none); returns the
    gateway's status, None when there is no gateway."""
    name = pool.metadata.name
    site = op.settings.gateway
    objects: list[dict[str, Any]] = []
    deployment: dict[str, Any] | None = None
    if pool.spec.gateway.enabled:
        signer = issuer(op)
        if not signer.keys:
            raise GatewayUnavailableError(
                "NoSigningKeys",
                f"The cluster publishes no key the gateway can verify tokens with "
                f"({JWKS_PATH}); the gateway keeps its last configuration.",
            )
        config = gateway_config(
            pool,
            signer,
            tenants,
            routes_of(op, models, tenants),
            peers_of(op, name),
            dt.datetime.now(dt.UTC),
        )
        try:
            text = haproxy_config(config)
        except GatewayConfigError as exc:
            raise GatewayUnavailableError("InvalidGatewayConfig", str(exc)) from None
        objects = gateway_objects(pool, site, text, signer.keys, tenants)
    owner = Owner(GATEWAY, {GATEWAY_LABEL: name})
    held = op.cache.in_pool(name, owner.kinds)
    for obj, live in zip(objects, apply_and_prune(op.kube, owner, objects, held), strict=True):
        if obj["kind"] == "Deployment":
            deployment = live
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
