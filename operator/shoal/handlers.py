"""kopf handlers: thin glue from the watches to the cache and the work queue.

kopf runs every indexing handler, for every object of every watched kind, before any
other handler; Shoal's indexing handlers keep the cache (shoal.cache) and, when what a
pass depends on changed, put the affected object's key on the work queue. The queue's
workers start with the first ordinary handler call, i.e. once the cache holds every
object, so no pass ever reads a half-filled cache. Deletions reach the cache through
ordinary event handlers (kopf does not index them). No handler raises for bad input:
reconcilers report problems in status conditions and Events.

The operator's state lives in kopf's ``memo`` (see shoal.runtime); nothing here is a
module-level variable.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from shoal import __version__
from shoal.api.constants import API_VERSION, GATEWAY_LABEL, POOL_LABEL, ROUTED_BY_LABEL
from shoal.kube.client import ApiError
from shoal.reconcile.predictive import PREDICT_SECONDS, predict_round
from shoal.resync import listed, resync_all
from shoal.state import ENDPOINTS_GATHER_SECONDS, Operator
from shoal.telemetry import EVENTS, STALE_WATCH, stale_keys
from shoal.watched import CHILDREN, INDEXED, Watched


def state(memo: Any) -> Operator:
    operator: Operator = memo.operator
    return operator


def route(op: Operator, kind: str, body: dict[str, Any], *, deleted: bool = False) -> None:
    """Request the passes a change to ``body`` calls for."""
    meta = body.get("metadata") or {}
    namespace, name = meta.get("namespace") or "", meta.get("name") or ""
    if kind == "InferenceModel":
        # Its pool may be waiting for its last model before it can go, and the pool's
        # gateway routes to it.
        op.request_pool(
            str((body.get("spec") or {}).get("pool") or ""),
            delay=0 if deleted else ENDPOINTS_GATHER_SECONDS,
        )
        if not deleted:
            op.request_model(namespace, name)
        else:
            # Its pool's later models in the namespace may have been refused for it:
            # its Triton model name, or the pool's count of models.
            pool = (body.get("spec") or {}).get("pool")
            for other in op.cache.all("InferenceModel", [namespace]):
                if (other.get("spec") or {}).get("pool") == pool:
                    op.request_model(namespace, other["metadata"]["name"])
    elif kind == "TenantPool":
        op.request_pool(name)
    elif kind == "BatchPolicy":
        op.request_policy(namespace, name)
        # Its lanes and batch size shape the gateway's routes to its models.
        for pool in {
            str((m.get("spec") or {}).get("pool") or "")
            for m in op.cache.all("InferenceModel", [namespace])
            if ((m.get("spec") or {}).get("batchPolicy") or {}).get("name") == name
        }:
            op.request_pool(pool, delay=ENDPOINTS_GATHER_SECONDS)
    elif kind == "Namespace":
        # Pools admit namespaces by name and by label: any change may admit or release
        # one, and decides whether the models there may run.
        op.request_all_pools()
        op.request_models_in(name)
    elif kind == "EndpointSlice":  # a model's ready replicas: its pool's gateway routes
        labels = meta.get("labels") or {}
        # An overflow stack's are routed by the gateway of the pool it spills from.
        pool = labels.get(ROUTED_BY_LABEL) or labels.get(POOL_LABEL, "")
        op.request_pool(pool, delay=ENDPOINTS_GATHER_SECONDS)
    elif kind == "Pod":  # a gateway's replica: the others share limits with it
        labels = meta.get("labels") or {}
        op.request_pool(labels.get(GATEWAY_LABEL, ""), delay=ENDPOINTS_GATHER_SECONDS)
    else:  # a child: its owner repairs it, or reads its rollout
        for ref in meta.get("ownerReferences") or []:
            if ref.get("apiVersion") != API_VERSION:
                continue
            if ref.get("kind") == "InferenceModel":
                op.request_model(namespace, ref["name"])
            elif ref.get("kind") == "TenantPool":
                op.request_pool(ref["name"])


def _deleted(type: str | None, **_: Any) -> bool:
    return type == "DELETED"


def _register(watched: Watched, *, indexed: bool) -> None:
    """The custom kinds and Namespaces are indexed, so the cache holds all of them before
    any pass runs; children are only watched (indexing them too would make kopf hold
    every new child's events until all others are indexed, a cost that grows with the
    square of a burst), and the cache lists them once when it opens (see ``synced``)."""

    group, version, plural, kind = watched.group, watched.version, watched.plural, watched.kind

    async def index(body: kopf.Body, memo: Any, **_: Any) -> dict[tuple[str, str], str]:
        op = state(memo)
        raw = dict(body)
        relevant = op.cache.put(kind, raw)
        EVENTS.labels(kind, str(relevant).lower()).inc()
        if relevant:
            route(op, kind, raw)
        meta = raw.get("metadata") or {}
        # What the watch itself delivered, for the liveness check of the watches.
        where = (str(meta.get("namespace") or ""), str(meta.get("name") or ""))
        return {where: str(meta.get("resourceVersion") or "")}

    async def event(type: str | None, body: kopf.Body, memo: Any, **_: Any) -> None:
        op = state(memo)
        raw = dict(body)
        if type == "DELETED":
            EVENTS.labels(kind, "true").inc()
            op.cache.drop(kind, raw)
            op.verified.forget(kind, raw)
            route(op, kind, raw, deleted=True)
        elif not indexed:
            relevant = op.cache.put(kind, raw)
            EVENTS.labels(kind, str(relevant).lower()).inc()
            if relevant:
                route(op, kind, raw)

    if indexed:
        # The index is named after the id: handlers receive it as a keyword argument.
        kopf.index(group, version, plural, id=f"index_{plural}")(index)
        # kopf does not index deletions: they reach the cache here.
        kopf.on.event(group, version, plural, id=f"gone_{plural}", when=_deleted)(event)
    else:
        # The API server filters the watch by the kind's label selector (shoal.runtime).
        kopf.on.event(group, version, plural, id=f"event_{plural}")(event)


for _watched in INDEXED:
    _register(_watched, indexed=True)
for _watched in CHILDREN:
    _register(_watched, indexed=False)


@kopf.on.event("", "v1", "namespaces", id="synced")
async def synced(memo: Any, **_: Any) -> None:
    """kopf runs ordinary handlers only once every indexed kind has been listed: the
    first one to run lists the children Shoal made (metadata only) into the cache, then
    opens the work queue."""
    op = state(memo)
    if op.opening.acquire(blocking=False):  # once: the memo is copied per object
        await asyncio.get_running_loop().run_in_executor(None, _list_children, op)
        op.start()
        logging.getLogger(__name__).info(
            "cache filled: %d models", len(op.cache.all("InferenceModel"))
        )


def _list_children(op: Operator) -> None:
    """The objects Shoal made, by name (metadata only): a pass creating one that exists
    reads it first instead of overwriting it blindly."""
    for watched in CHILDREN:
        if watched.kind in ("EndpointSlice", "Pod"):
            continue  # not Shoal's: read in full from their watch
        scopes: list[str | None] = [None]
        if op.settings.namespaces and watched.kind != "PriorityClass":
            scopes = list(op.settings.namespaces)
        for namespace in scopes:
            items = op.kube.list_metadata(
                watched.api_version, watched.kind, namespace, watched.selector
            )
            for item in items:
                op.cache.put(watched.kind, {**item, "kind": watched.kind}, partial=True)


@kopf.on.startup()
async def start(memo: Any, logger: logging.Logger | logging.LoggerAdapter[Any], **_: Any) -> None:
    op = state(memo)
    memo.resync_task = asyncio.create_task(_resync_forever(op))
    memo.predict_task = asyncio.create_task(_predict_forever(op))
    logger.info(
        "shoal operator %s started (resync every %ss)", __version__, op.settings.resync_seconds
    )


@kopf.on.cleanup()
async def stop(memo: Any, **_: Any) -> None:
    for name in ("resync_task", "predict_task"):
        task = getattr(memo, name, None)
        if task is not None:
            task.cancel()
    op = state(memo)
    op.stop()
    if op.leadership is not None:
        # Once nothing reconciles any more: a follower may start at once.
        await asyncio.get_running_loop().run_in_executor(None, op.leadership.release)


async def _resync_forever(op: Operator) -> None:
    """The level-triggered backstop: every object is re-checked periodically even when
    no event arrives. One loop for the whole operator, not a kopf timer per object:
    per-object timers make kopf put a finalizer on every model, which would block
    namespace deletion whenever the operator is down."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, op.synced.wait)
    while True:
        # Wake early when a scheduled window opens or closes, to move the HPA's floor
        # on time (a second after the boundary, so the window is seen open or closed).
        delay = op.settings.resync_seconds
        boundary = op.seconds_to_next_wakeup()
        if boundary is not None:
            delay = min(delay, boundary + 1.0)
        await asyncio.sleep(delay)
        try:
            await loop.run_in_executor(None, resync_all, op)
            op.forget_due_wakeups()
        except ApiError as exc:  # transient: the next round lists again
            logging.getLogger(__name__).warning(
                "periodic resync failed: API error %s %s", exc.status, exc.reason
            )
        except Exception:
            logging.getLogger(__name__).exception("periodic resync failed")


async def _predict_forever(op: Operator) -> None:
    """Predictive scaling's rounds (shoal.reconcile.predictive), on the HPA's own rhythm; a
    round with no predictive model, or no Prometheus, costs nothing."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, op.synced.wait)
    while True:
        await asyncio.sleep(PREDICT_SECONDS)
        try:
            await loop.run_in_executor(None, predict_round, op)
        except Exception:
            logging.getLogger(__name__).exception("predictive scaling round failed")


@kopf.on.probe(id="version")
def version_probe(**_: Any) -> str:
    return __version__


@kopf.on.probe(id="watch")
def watch_freshness(memo: Any, **kwargs: Any) -> int:
    """Liveness that proves the watch is fresh, not just that the process lives: models
    the API server lists at a version the watch never delivered, for longer than the
    allowance, fail the probe and so restart the operator."""
    op = state(memo)
    delivered: kopf.Index[tuple[str, str], str] = kwargs["index_inferencemodels"]
    try:
        models = listed(op, "InferenceModel")
    except Exception as exc:
        # Failing at once: kopf would retry any other error inside the probe's request
        # (a minute later), leaving the probe unanswered for that long.
        raise kopf.PermanentError(f"cannot list the models the watch serves: {exc}") from exc
    listing = {
        (m["metadata"]["namespace"], m["metadata"]["name"]): m["metadata"]["resourceVersion"]
        for m in models
    }
    watched = {key: next(iter(versions)) for key, versions in delivered.items()}
    behind = stale_keys(listing, watched, op.watch_lag)
    late = {key: age for key, age in behind.items() if age > op.settings.watch_stale_seconds}
    STALE_WATCH.set(len(late))
    if late:
        raise kopf.PermanentError(f"the watch missed {len(late)} model update(s): {sorted(late)}")
    return len(listing)
