"""The periodic, level-triggered backstop, and the liveness check of the watches.

Every ``resync_seconds`` every custom resource the operator serves is listed (metadata
only, in the watched namespaces alone), whatever the cache missed is repaired (an object
whose event never came is read; one whose deletion never came is dropped, once a read
confirms it is gone), and every
object gets a pass. Models also read fresh figures from Prometheus on that pass.
"""

from __future__ import annotations

import logging
from typing import Any

from shoal.api.constants import API_VERSION
from shoal.kube.client import ApiError
from shoal.kube.issuer import fetch_issuer
from shoal.reconcile.gateway import issuer_sources
from shoal.reconcile.pool import parsed_pools
from shoal.state import Operator
from shoal.telemetry import MANAGED, RESYNCS

log = logging.getLogger(__name__)
NAMESPACED = {"InferenceModel": True, "BatchPolicy": True, "TenantPool": False}


def listed(op: Operator, kind: str) -> list[dict[str, Any]]:
    """Metadata of every object of ``kind`` the operator serves: those of the watched
    namespaces only, when it watches some."""
    if not NAMESPACED[kind] or not op.settings.namespaces:
        return op.kube.list_metadata(API_VERSION, kind)
    out: list[dict[str, Any]] = []
    for namespace in op.settings.namespaces:
        out += op.kube.list_metadata(API_VERSION, kind, namespace)
    return out


def _repair(op: Operator, kind: str, items: list[dict[str, Any]]) -> None:
    """Make the cache agree with the listing."""
    present = set()
    for item in items:
        meta = item["metadata"]
        namespace, name = meta.get("namespace") or "", meta["name"]
        present.add((namespace, name))
        cached = op.cache.get(kind, name, namespace)
        if cached is None or cached["metadata"].get("resourceVersion") != meta.get(
            "resourceVersion"
        ):
            body = op.kube.get(API_VERSION, kind, name, namespace or None)
            if body is not None:
                op.cache.put(kind, body)
    for cached in op.cache.all(kind):
        meta = cached["metadata"]
        namespace = meta.get("namespace") or ""
        served = not NAMESPACED[kind] or op.watches(namespace)
        if (namespace, meta["name"]) not in present and served:
            # The listing may predate a create the watch has already delivered: the
            # object is dropped (and buried) only once the API server says it is gone.
            body = op.kube.get(API_VERSION, kind, meta["name"], namespace or None)
            if body is None:
                op.cache.drop(kind, cached)
            else:
                op.cache.put(kind, body)


def resync_all(op: Operator) -> None:
    """Request a pass over every object (the periodic backstop), with the cluster's
    token signing keys and those of the OIDC issuers pools trust read again (the
    gateways verify callers with them)."""
    try:
        op.issuer = fetch_issuer(op.kube)
    except ApiError as exc:
        log.warning("reading the service-account issuer's keys failed: %s", exc.reason)
    pools = [pool for pool, deleting in parsed_pools(op.cache.all("TenantPool")) if not deleting]
    op.oidc.refresh_all(issuer_sources(pools))
    for kind in ("TenantPool", "BatchPolicy", "InferenceModel"):
        items = listed(op, kind)
        MANAGED.labels(kind).set(len(items))
        _repair(op, kind, items)
        for item in items:
            meta = item["metadata"]
            if kind == "TenantPool":
                op.request_pool(meta["name"])
            elif kind == "BatchPolicy":
                op.request_policy(meta["namespace"], meta["name"])
            else:
                op.request_model(meta["namespace"], meta["name"], refresh_metrics=True)
    RESYNCS.inc()
