"""A pool's gateway, part of the pool's pass: what it is configured with (the tenants
and their limits in force now, a route for each model with its ready replicas, the
gateway's own replicas as peers, the cluster's signing keys and those of the OIDC
issuers the pool trusts), its objects, and what its status says."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from typing import Any

from pydantic import ValidationError

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.common import parse_object
from shoal.api.conditions import Cond
from shoal.api.constants import GATEWAY_LABEL
from shoal.api.gateway import OidcIssuer
from shoal.api.inferencemodel import InferenceModel
from shoal.api.kinds import GATEWAY
from shoal.api.tenantpool import TenantPool
from shoal.kube.client import ApiError
from shoal.kube.issuer import JWKS_PATH, fetch_issuer
from shoal.kube.oidc import IssuerKeys, IssuerSource
from shoal.reconcile.prune import Owner, apply_and_prune
from shoal.render.gateway import (
    audience,
    gateway_host,
    gateway_name,
    gateway_objects,
    oidc_keys_in,
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


TrustedKeys = Sequence[tuple[OidcIssuer, IssuerKeys]]


def issuer_sources(pools: Iterable[TenantPool]) -> set[IssuerSource]:
    """Where the keys of every OIDC issuer that a pool's gateway trusts come from."""
    return {
        IssuerSource.of(spec)
        for pool in pools
        if pool.spec.gateway.enabled
        for spec in pool.spec.gateway.oidc
    }


def _restore(op: Operator, pool: TenantPool, source: IssuerSource, error: str) -> None:
    """Keys of an issuer this operator has not fetched yet, from the gateway's ConfigMap:
    the gateway keeps verifying with them while the issuer is unreachable (after a
    restart of the operator, say)."""
    site = op.settings.gateway
    try:
        live = op.kube.get("v1", "ConfigMap", gateway_name(pool.metadata.name), site.namespace)
    except ApiError:
        live = None
    op.oidc.remember(source, oidc_keys_in(live or {}).get(source.issuer, ()), error)


def trusted_keys(op: Operator, pool: TenantPool) -> list[tuple[OidcIssuer, IssuerKeys]]:
    """Each OIDC issuer the pool's gateway trusts, with its keys: the last fetched
    (fetched now if they never were, or again a while after a failed fetch)."""
    if not pool.spec.gateway.enabled:
        return []
    out = []
    for spec in pool.spec.gateway.oidc:
        source = IssuerSource.of(spec)
        found = op.oidc.keys(source)
        if found.error and not found.fetched and not found.restored:
            _restore(op, pool, source, found.error)
            found = op.oidc.keys(source)
        out.append((spec, found))
    return out


def oidc_status(trusted: TrustedKeys) -> list[dict[str, Any]]:
    """status.gateway.oidc: each issuer's key ids, and why its last fetch failed."""
    out = []
    for spec, found in trusted:
        entry: dict[str, Any] = {"issuer": spec.issuer, "keys": [k.kid for k in found.keys]}
        if found.jwks_uri:
            entry["jwksURI"] = found.jwks_uri
        if found.error:
            entry["error"] = found.error
        out.append(entry)
    return out


def issuer_keys_condition(pool: TenantPool, trusted: TrustedKeys) -> list[Cond]:
    """IssuerKeysLoaded: whether the keys of every OIDC issuer the gateway trusts were
    fetched on the last try. None for a pool without a gateway."""
    kind = "IssuerKeysLoaded"
    if not pool.spec.gateway.enabled:
        return []
    if not trusted:
        return [
            Cond(
                kind,
                "True",
                "NoIssuers",
                "The gateway trusts no OIDC issuer: ServiceAccount tokens only.",
            )
        ]
    failing = [(spec, found) for spec, found in trusted if found.error]
    if not failing:
        loaded = ", ".join(f"{spec.issuer} ({len(found.keys)})" for spec, found in trusted)
        return [Cond(kind, "True", "Loaded", f"Signing keys loaded: {loaded}.")]
    parts = []
    for spec, found in failing:
        kept = (
            f"its tokens are verified with the {len(found.keys)} key(s) fetched before"
            if found.keys
            else "no key of it is known: its tokens are refused"
        )
        parts.append(f"{spec.issuer}: {found.error}; {kept}")
    reason = (
        "NoUsableKeys" if all(f.fetched and not f.keys for _, f in failing) else "JWKSUnavailable"
    )
    return [Cond(kind, "False", reason, " ".join(parts))]


def converge_gateway(
    op: Operator,
    pool: TenantPool,
    tenants: list[str],
    models: list[dict[str, Any]],
    trusted: TrustedKeys = (),
) -> dict[str, Any] | None:
    """Apply the pool's gateway (or remove it when the pool has none); returns the
    gateway's status, None when there is no gateway. ``trusted``: the OIDC issuers it
    trusts, with their keys (:func:`trusted_keys`)."""
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
            [(spec, found.keys) for spec, found in trusted],
        )
        try:
            text = haproxy_config(config)
        except GatewayConfigError as exc:
            raise GatewayUnavailableError("InvalidGatewayConfig", str(exc)) from None
        oidc_keys = [(spec.issuer, found.keys) for spec, found in trusted]
        objects = gateway_objects(pool, site, text, signer.keys, tenants, oidc_keys)
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
        **({"oidc": oidc_status(trusted)} if trusted else {}),
    }
