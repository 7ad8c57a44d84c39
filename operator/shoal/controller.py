"""The operator's reconcile entry points, shared by every kopf trigger.

Triggers (a watch event on the object, on a BatchPolicy or TenantPool it uses, on one
of its children, or the periodic resync) only *request* a pass: they put the object's
key on a work queue that folds repeated requests into one (see workqueue.py). Each pass
re-reads the object, so whatever triggered it leads to the same level-triggered pass.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import threading
import time
from collections.abc import Callable, Hashable
from typing import Any, TypeVar, cast

from shoal.kube.client import ApiError, Kube
from shoal.metrics.reader import MetricsReader
from shoal.metrics.status import metrics_status
from shoal.reconcile.conditions import (
    Cond,
    condition,
    merge_conditions,
    now_rfc3339,
    status_differs,
)
from shoal.reconcile.model import reconcile_model
from shoal.reconcile.policy import reconcile_policy
from shoal.reconcile.pool import models_of_pool, reconcile_pool
from shoal.telemetry import QUEUE_DEPTH, RECONCILE_SECONDS, RECONCILES
from shoal.workqueue import WorkQueue

log = logging.getLogger(__name__)
GV = "shoal.dev/v1alpha1"
F = TypeVar("F", bound=Callable[..., Any])
POOL_FINALIZER = "shoal.dev/pool-in-use"
# A pool's usage changes with every replica of every model it holds; its re-check waits
# this long so that a burst of scale events costs one pass, not one per model (the
# usage in its status is informational: quotas are enforced by ResourceQuotas).
POOL_GATHER_SECONDS = 5.0
ALL_POOLS = ("AllPools", "", "")


def _quietly(what: str) -> Callable[[F], F]:
    """API failures end one pass with a warning, not a traceback: the object is looked
    at again on its next event or periodic re-check."""

    def wrap(fn: F) -> F:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            started = time.monotonic()
            try:
                result = fn(*args, **kwargs)
            except ApiError as exc:
                RECONCILES.labels(what, "error").inc()
                log.warning(
                    "%s %s: API error %s %s; will retry", what, args[1:], exc.status, exc.reason
                )
                return None
            RECONCILES.labels(what, "ok").inc()
            RECONCILE_SECONDS.labels(what).observe(time.monotonic() - started)
            return result

        return cast(F, run)

    return wrap


def _spec_changed(body: dict[str, Any] | None) -> bool:
    """Gone, going, or its spec changed since the operator last handled it: the objects
    that depend on it need a pass too. A status write alone does not count, or every
    pool usage update would re-check all of the pool's models."""
    if body is None or body["metadata"].get("deletionTimestamp"):
        return True
    observed = (body.get("status") or {}).get("observedGeneration")
    return bool(observed != body["metadata"].get("generation"))


class Controller:
    def __init__(self, kube: Kube, metrics: MetricsReader | None = None, workers: int = 16):
        self.kube = kube
        self.metrics = metrics
        self.queue = WorkQueue(self._reconcile, workers, name="reconcile")
        QUEUE_DEPTH.set_function(lambda: len(self.queue))
        self._guard = threading.Lock()
        # Models whose next pass should read fresh figures from Prometheus.
        self._refresh: set[tuple[str, str]] = set()
        # When each model's next scheduled window opens or closes.
        self._wakeups: dict[tuple[str, str], dt.datetime] = {}

    def start(self) -> None:
        self.queue.start()

    def stop(self) -> None:
        self.queue.stop()

    # ------------------------------------------------------------------ requests
    def request_model(self, namespace: str, name: str, *, refresh_metrics: bool = False) -> None:
        if refresh_metrics:
            with self._guard:
                self._refresh.add((namespace, name))
        self.queue.add(("InferenceModel", namespace, name))

    def request_pool(self, name: str, delay: float = 0.0) -> None:
        self.queue.add(("TenantPool", "", name), delay)

    def request_policy(self, namespace: str, name: str) -> None:
        self.queue.add(("BatchPolicy", namespace, name))

    def request_all_pools(self) -> None:
        """A namespace appeared, changed labels or went away: every pool re-checks."""
        self.queue.add(ALL_POOLS)

    def _reconcile(self, key: Hashable) -> None:
        kind, namespace, name = cast(tuple[str, str, str], key)
        if kind == "InferenceModel":
            self.model(namespace, name)
        elif kind == "TenantPool":
            self.pool(name)
        elif kind == "BatchPolicy":
            self.policy(namespace, name)
        elif key == ALL_POOLS:
            for pool in self.kube.list_metadata(GV, "TenantPool"):
                self.request_pool(pool["metadata"]["name"])

    # ------------------------------------------------------------------ models
    @_quietly("InferenceModel")
    def model(self, namespace: str, name: str) -> None:
        """Reconcile one model. Figures are read from Prometheus on the periodic pass
        (or the model's first), not on every event: they change all the time, and
        writing them on every event would feed the next event."""
        with self._guard:
            refresh = (namespace, name) in self._refresh
            self._refresh.discard((namespace, name))
        body = self.kube.get(GV, "InferenceModel", name, namespace)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return
        before = (body.get("status") or {}).get("replicas")
        first = condition(body.get("status"), "MetricsAvailable") is None
        metrics = None
        if self.metrics is None:
            metrics = metrics_status(None)
        elif refresh or first:
            metrics = metrics_status(self.metrics.figures(namespace, name))
        outcome = reconcile_model(self.kube, body, metrics)
        with self._guard:
            if outcome.next_change is None:
                self._wakeups.pop((namespace, name), None)
            else:
                self._wakeups[(namespace, name)] = outcome.next_change
        after = outcome.deployment and (outcome.deployment.get("status") or {}).get("replicas", 0)
        if before != after:
            # Its GPU use changed: the pool's usage, gathered over a burst of models.
            self.request_pool(body["spec"]["pool"], delay=POOL_GATHER_SECONDS)

    def models_using_policy(self, namespace: str, policy: str) -> list[str]:
        return [
            m["metadata"]["name"]
            for m in self.kube.list(GV, "InferenceModel", namespace)
            if ((m.get("spec") or {}).get("batchPolicy") or {}).get("name") == policy
        ]

    # ------------------------------------------------------------------ policies
    @_quietly("BatchPolicy")
    def policy(self, namespace: str, name: str) -> None:
        users = self.models_using_policy(namespace, name)
        body = self.kube.get(GV, "BatchPolicy", name, namespace)
        cascade = _spec_changed(body)
        if body is not None and not body["metadata"].get("deletionTimestamp"):
            reconcile_policy(self.kube, body, len(users))
        if cascade:  # its models re-render their configs, or report it missing
            for model in users:
                self.request_model(namespace, model)

    # ------------------------------------------------------------------ pools
    @_quietly("TenantPool")
    def pool(self, name: str) -> None:
        """Reconcile a pool; while models use it, hold deletion with a finalizer.

        The finalizer is Shoal's own and level-triggered: present exactly while the pool
        has models, so an unused pool deletes at once and a used one waits, saying why,
        until its last model leaves (a model's deletion re-checks its pool)."""
        models = models_of_pool(self.kube, name)
        body = self.kube.get(GV, "TenantPool", name)
        if _spec_changed(body):  # its models re-place, re-check quotas, or report it gone
            for model in models:
                meta = model["metadata"]
                self.request_model(meta["namespace"], meta["name"])
        if body is None:
            return
        finalizers = list(body["metadata"].get("finalizers") or [])
        held = POOL_FINALIZER in finalizers
        others = [f for f in finalizers if f != POOL_FINALIZER]
        if body["metadata"].get("deletionTimestamp"):
            if models:
                self._report_blocked(body, models)
            elif held:
                self.kube.set_finalizers(body, others)
            return
        if bool(models) != held:
            self.kube.set_finalizers(body, [*others, POOL_FINALIZER] if models else others)
            body = self.kube.get(GV, "TenantPool", name) or body
        reconcile_pool(self.kube, body, models, self.kube.list("v1", "Namespace"))

    def _report_blocked(self, body: dict[str, Any], models: list[dict[str, Any]]) -> None:
        users = sorted(f"{m['metadata']['namespace']}/{m['metadata']['name']}" for m in models)
        message = (
            f"Deletion waits until no InferenceModel uses the pool; {len(users)} still "
            f"do: {', '.join(users[:10])}."
        )
        cond = Cond("Ready", "False", "DeletionBlocked", message)
        live = body.get("status") or {}
        conditions = merge_conditions(
            live.get("conditions", []), [cond], body["metadata"].get("generation"), now_rfc3339()
        )
        if status_differs(live, {"conditions": conditions}):
            self.kube.patch_status(body, {"conditions": conditions})
            self.kube.event(body, "Warning", "DeletionBlocked", message)

    def seconds_to_next_window_change(self) -> float | None:
        with self._guard:
            soonest = min(self._wakeups.values(), default=None)
        if soonest is None:
            return None
        return max((soonest - dt.datetime.now(dt.UTC)).total_seconds(), 0.0)

    def resync_all(self) -> None:
        """Request a pass over every object (the periodic backstop)."""
        for pool in self.kube.list_metadata(GV, "TenantPool"):
            self.request_pool(pool["metadata"]["name"])
        for policy in self.kube.list_metadata(GV, "BatchPolicy"):
            meta = policy["metadata"]
            self.request_policy(meta["namespace"], meta["name"])
        for model in self.kube.list_metadata(GV, "InferenceModel"):
            meta = model["metadata"]
            self.request_model(meta["namespace"], meta["name"], refresh_metrics=True)

    # ------------------------------------------------------------------ children
    def owner_of(self, body: dict[str, Any]) -> None:
        """A child changed (an admin edit, a rollout step): reconcile its owner."""
        meta = body.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("apiVersion") == GV and ref.get("kind") == "InferenceModel":
                self.request_model(meta["namespace"], ref["name"])
