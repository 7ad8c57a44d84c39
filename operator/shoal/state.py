"""The operator's state: one object, built at start-up, that every part is handed.

It holds the settings, the API client, the cache the watches fill, the record of
verified children, the reconcile work queue and what the passes tell each other (which
models should read fresh figures, when a scheduled window opens or closes). kopf's
handlers find it in their ``memo``; the reconcile workers are given it.
"""

from __future__ import annotations

import datetime as dt
import threading
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field

from shoal.autoscale.predictions import Predictions
from shoal.cache import Cache
from shoal.kube.client import Kube
from shoal.kube.kueue import KueueProbe
from shoal.kube.oidc import Keyring
from shoal.leader import Elector
from shoal.metrics.reader import MetricsReader
from shoal.render.keys import Issuer
from shoal.settings import Settings
from shoal.telemetry import QUEUE_DEPTH, ModelGauges, PoolGauges
from shoal.verified import Verified
from shoal.workqueue import WorkQueue

# A pool's usage changes with every replica of every model it holds; its re-check waits
# this long so that a burst of scale events costs one pass, not one per model (the
# usage in its status is informational: quotas are enforced by ResourceQuotas).
POOL_GATHER_SECONDS = 5.0
# A model's replicas coming and going reach its pool's gateway after this, so a rollout's
# burst of endpoint changes costs one gateway update.
ENDPOINTS_GATHER_SECONDS = 0.5

Key = tuple[str, str, str]  # (kind, namespace or "", name)


@dataclass
class Operator:
    settings: Settings
    kube: Kube
    cache: Cache
    verified: Verified
    metrics: MetricsReader | None
    queue: WorkQueue = field(init=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, init=False)
    # Models whose next pass should read fresh figures from Prometheus.
    _refresh: set[tuple[str, str]] = field(default_factory=set, init=False)
    # When each object's next time window (a model's scheduled floor, a gateway's limits)
    # opens or closes: (kind, namespace, name) -> moment.
    _wakeups: dict[tuple[str, str, str], dt.datetime] = field(default_factory=dict, init=False)
    # This replica's hold on the leader Lease, released on a graceful stop (shoal.leader).
    leadership: Elector | None = field(default=None, init=False)
    # What the predictive loop found for each model (shoal.reconcile.predictive).
    predictions: Predictions = field(default_factory=Predictions, init=False)
    # Each model's conditions and P95 target, as gauges the alerts read.
    model_gauges: ModelGauges = field(default_factory=ModelGauges, init=False)
    # Each elastic pool's GPUs and waiting replicas, as gauges the dashboard and the
    # reclaim alert read.
    pool_gauges: PoolGauges = field(default_factory=PoolGauges, init=False)
    # The cluster's service-account token issuer and keys, for the gateways.
    issuer: Issuer | None = field(default=None, init=False)
    # The signing keys of the OIDC issuers pools' gateways trust.
    oidc: Keyring = field(default_factory=Keyring, init=False)
    # Models the API server lists at a version the watch has not delivered, and since
    # when (the liveness check of the watches).
    watch_lag: dict[tuple[str, str], float] = field(default_factory=dict, init=False)
    # One lock per (pool, namespace): a pool's pass and its models' passes apply the
    # same isolation objects, and must not both create them.
    _isolation_locks: dict[tuple[str, str], threading.Lock] = field(
        default_factory=dict, init=False
    )
    # Whether the cluster serves Kueue (pools with elastic capacity need it).
    kueue: KueueProbe = field(default_factory=KueueProbe, init=False)
    # Taken by whoever lists the children into the cache and opens the queue (once).
    opening: threading.Lock = field(default_factory=threading.Lock, init=False)
    # Set once the watches have listed every object: passes may run.
    synced: threading.Event = field(default_factory=threading.Event, init=False)

    def attach(self, handle: Callable[[Operator, Hashable], None]) -> None:
        """Create the work queue whose workers run ``handle(self, key)``."""
        self.queue = WorkQueue(
            lambda key: handle(self, key), self.settings.workers, name="reconcile"
        )
        queue = self.queue
        QUEUE_DEPTH.set_function(lambda: len(queue))

    def start(self) -> None:
        """The cache holds every watched object: start running passes."""
        if not self.synced.is_set():
            self.verified.synced = True
            self.synced.set()
            self.queue.start()

    def stop(self) -> None:
        self.queue.stop()

    # ------------------------------------------------------------------ requests
    def watches(self, namespace: str) -> bool:
        """Whether ``namespace`` is among those the operator serves."""
        return not self.settings.namespaces or namespace in self.settings.namespaces

    def request_model(self, namespace: str, name: str, *, refresh_metrics: bool = False) -> None:
        if not self.watches(namespace):
            return
        if refresh_metrics:
            with self._guard:
                self._refresh.add((namespace, name))
        self.queue.add(("InferenceModel", namespace, name))

    def request_pool(self, name: str, delay: float = 0.0) -> None:
        if name:
            self.queue.add(("TenantPool", "", name), delay)

    def request_policy(self, namespace: str, name: str) -> None:
        if self.watches(namespace):
            self.queue.add(("BatchPolicy", namespace, name))

    def request_models_in(self, namespace: str) -> None:
        for model in self.cache.all("InferenceModel", [namespace]):
            self.request_model(namespace, model["metadata"]["name"])

    def request_all_pools(self) -> None:
        for pool in self.cache.all("TenantPool"):
            self.request_pool(pool["metadata"]["name"])

    def isolation_lock(self, pool: str, namespace: str) -> threading.Lock:
        with self._guard:
            return self._isolation_locks.setdefault((pool, namespace), threading.Lock())

    # ------------------------------------------------------------------ pass notes
    def take_refresh(self, namespace: str, name: str) -> bool:
        """Whether this model's pass should read fresh figures (and forget the wish)."""
        with self._guard:
            wanted = (namespace, name) in self._refresh
            self._refresh.discard((namespace, name))
        return wanted

    def set_wakeup(
        self, kind: str, name: str, when: dt.datetime | None, namespace: str = ""
    ) -> None:
        key = (kind, namespace, name)
        with self._guard:
            if when is None:
                self._wakeups.pop(key, None)
            else:
                self._wakeups[key] = when

    def forget_due_wakeups(self) -> None:
        """Drop the wakeups that are due: a resync has just requested a pass over every
        object, and each pass sets its next one. Kept, a due wakeup would make the
        resync loop run again every second until that object's pass had run."""
        now = dt.datetime.now(dt.UTC)
        with self._guard:
            for key in [k for k, when in self._wakeups.items() if when <= now]:
                del self._wakeups[key]

    def seconds_to_next_wakeup(self) -> float | None:
        with self._guard:
            soonest = min(self._wakeups.values(), default=None)
        if soonest is None:
            return None
        return max((soonest - dt.datetime.now(dt.UTC)).total_seconds(), 0.0)
