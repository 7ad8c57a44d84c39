"""The operator's reconcile entry points, shared by every kopf trigger.

Each entry point re-reads the object it is asked about, so whatever triggered it (a
watch event on the object, on a BatchPolicy or TenantPool it uses, on one of its
children, or the periodic resync) leads to the same level-triggered pass.
"""

from __future__ import annotations

import datetime as dt
import functools
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Callable
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
from shoal.telemetry import RECONCILE_SECONDS, RECONCILES

log = logging.getLogger(__name__)
GV = "shoal.dev/v1alpha1"
F = TypeVar("F", bound=Callable[..., Any])
POOL_FINALIZER = "shoal.dev/pool-in-use"


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


class Controller:
    def __init__(self, kube: Kube, metrics: MetricsReader | None = None) -> None:
        self.kube = kube
        self.metrics = metrics
        self._locks: defaultdict[tuple[str, str, str], threading.Lock] = defaultdict(threading.Lock)
        self._guard = threading.Lock()
        # When each model's next scheduled window opens or closes.
        self._wakeups: dict[tuple[str, str], dt.datetime] = {}

    def _lock(self, kind: str, namespace: str | None, name: str) -> threading.Lock:
        with self._guard:
            return self._locks[(kind, namespace or "", name)]

    # ------------------------------------------------------------------ models
    @_quietly("InferenceModel")
    def model(self, namespace: str, name: str, *, refresh_metrics: bool = False) -> None:
        """Reconcile one model. Figures are read from Prometheus on the periodic pass
        (or the model's first), not on every event: they change all the time, and
        writing them on every event would feed the next event."""
        with self._lock("InferenceModel", namespace, name):
            body = self.kube.get(GV, "InferenceModel", name, namespace)
            if body is None or body["metadata"].get("deletionTimestamp"):
                return
            before = (body.get("status") or {}).get("replicas")
            first = condition(body.get("status"), "MetricsAvailable") is None
            metrics = None
            if self.metrics is None:
                metrics = metrics_status(None)
            elif refresh_metrics or first:
                metrics = metrics_status(self.metrics.figures(namespace, name))
            outcome = reconcile_model(self.kube, body, metrics)
            with self._guard:
                if outcome.next_change is None:
                    self._wakeups.pop((namespace, name), None)
                else:
                    self._wakeups[(namespace, name)] = outcome.next_change
        after = outcome.deployment and (outcome.deployment.get("status") or {}).get("replicas", 0)
        if before != after:
            self.pool(body["spec"]["pool"])  # its GPU use changed

    def models_using_policy(self, namespace: str, policy: str) -> list[str]:
        return [
            m["metadata"]["name"]
            for m in self.kube.list(GV, "InferenceModel", namespace)
            if ((m.get("spec") or {}).get("batchPolicy") or {}).get("name") == policy
        ]

    # ------------------------------------------------------------------ policies
    @_quietly("BatchPolicy")
    def policy(self, namespace: str, name: str, *, cascade: bool) -> None:
        users = self.models_using_policy(namespace, name)
        with self._lock("BatchPolicy", namespace, name):
            body = self.kube.get(GV, "BatchPolicy", name, namespace)
            if body is not None and not body["metadata"].get("deletionTimestamp"):
                reconcile_policy(self.kube, body, len(users))
        if cascade:
            for model in users:
                self.model(namespace, model)

    # ------------------------------------------------------------------ pools
    @_quietly("TenantPool")
    def pool(self, name: str, *, cascade: bool = False) -> None:
        """Reconcile a pool; while models use it, hold deletion with a finalizer.

        The finalizer is Shoal's own and level-triggered: present exactly while the pool
        has models, so an unused pool deletes at once and a used one waits, saying why,
        until its last model leaves (a model's deletion re-checks its pool)."""
        models = models_of_pool(self.kube, name)
        with self._lock("TenantPool", None, name):
            body = self.kube.get(GV, "TenantPool", name)
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
        if cascade:
            for model in models:
                meta = model["metadata"]
                self.model(meta["namespace"], meta["name"])

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

    def all_pools(self) -> None:
        """A namespace appeared, changed labels or went away: every pool re-checks."""
        for pool in self.kube.list(GV, "TenantPool"):
            self.pool(pool["metadata"]["name"])

    def seconds_to_next_window_change(self) -> float | None:
        with self._guard:
            soonest = min(self._wakeups.values(), default=None)
        if soonest is None:
            return None
        return max((soonest - dt.datetime.now(dt.UTC)).total_seconds(), 0.0)

    def resync_all(self) -> None:
        """Re-check every object (the periodic backstop)."""
        for pool in self.kube.list(GV, "TenantPool"):
            self.pool(pool["metadata"]["name"])
        for policy in self.kube.list(GV, "BatchPolicy"):
            meta = policy["metadata"]
            self.policy(meta["namespace"], meta["name"], cascade=False)
        for model in self.kube.list(GV, "InferenceModel"):
            meta = model["metadata"]
            self.model(meta["namespace"], meta["name"], refresh_metrics=True)

    # ------------------------------------------------------------------ children
    def owner_of(self, body: dict[str, Any]) -> None:
        """A child changed (an admin edit, a rollout step): reconcile its owner."""
        meta = body.get("metadata") or {}
        for ref in meta.get("ownerReferences") or []:
            if ref.get("apiVersion") == GV and ref.get("kind") == "InferenceModel":
                self.model(meta["namespace"], ref["name"])
