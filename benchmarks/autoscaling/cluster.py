"""Pods of one Deployment: cold starts, scale-down order, routing, drain, cost.

What the simulated autoscalers act on. Setting the replica count creates pods at once
(the ReplicaSet controller); a new pod is Pending while it is scheduled and its image
pulled, then Running but not Ready while Triton loads the model, then Ready and in the
Service's endpoints. Scaling down deletes pods in the ReplicaSet controller's order
(``pkg/controller/replicaset/replica_set.go`` getPodsToDelete, ranked by
``controller.ActivePodsWithRanks``): pending before running, not-ready before ready, and
among ready pods the most recently ready first. A deleted Ready pod leaves the endpoints
at once and finishes the requests it holds (graceful drain); endpoint propagation delay
is not modelled.

The Service spreads requests round robin over Ready pods (kube-proxy in IPVS mode; the
default iptables mode picks at random, which would queue slightly more).

Cost is pod-seconds from creation to the end of drain: a GPU is bound to a pod from
scheduling on, through the image pull and model load.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from benchmarks.autoscaling.hpa import PodInfo
from benchmarks.autoscaling.replica import BatcherConfig, Replica, Step


@dataclass(frozen=True)
class PodTiming:
    """A new pod's cold start: ``pending_s`` Pending, then Running until ``cold_start_s``."""

    cold_start_s: float = 60.0
    pending_s: float = 30.0


@dataclass
class Pod:
    index: int
    created_at: float
    running_at: float
    ready_at: float
    replica: Replica
    deleted_at: float | None = None
    gone_at: float | None = None
    # Metric state the pipeline reads.
    pending: int = 0  # Triton's pending request count at the end of the last step
    cpu_seconds: float = 0.0
    recent_latencies: list[tuple[float, npt.NDArray[np.float64]]] = field(default_factory=list)
    last_step_concurrency: float = 0.0

    @property
    def name(self) -> str:
        return f"pod-{self.index}"

    def ready(self, t: float) -> bool:
        return self.deleted_at is None and t >= self.ready_at

    def running(self, t: float) -> bool:
        return t >= self.running_at

    def serves_metrics(self, t: float) -> bool:
        """Triton's metrics endpoint is up once the model is loaded, until the pod goes."""
        return t >= self.ready_at and self.gone_at is None

    def info(self, t: float, cpu_request: float) -> PodInfo:
        ready = self.ready(t)
        return PodInfo(
            name=self.name,
            phase="Running" if self.running(t) else "Pending",
            ready=ready,
            start_time=self.created_at,
            ready_transition=self.ready_at if t >= self.ready_at else self.created_at,
            deleting=self.deleted_at is not None,
            cpu_request=cpu_request,
        )


class Cluster:
    """The Deployment's pods and the Service in front of them."""

    def __init__(self, batcher: BatcherConfig, timing: PodTiming, initial: int) -> None:
        self.batcher = batcher
        self.timing = timing
        self.pods: list[Pod] = []  # not gone yet
        self.spec_replicas = 0
        self._next_index = 0
        self._round_robin = 0
        self.replica_seconds = 0.0
        self.history: list[tuple[float, int]] = []  # (time, spec replicas) on each change
        for _ in range(initial):
            self._create(0.0, warm=True)
        self.spec_replicas = initial
        self.history.append((0.0, initial))

    def _create(self, now: float, warm: bool = False) -> None:
        timing = self.timing
        if warm:
            pod = Pod(self._next_index, 0.0, 0.0, 0.0, Replica(self.batcher, 0.0))
        else:
            pod = Pod(
                self._next_index,
                now,
                now + timing.pending_s,
                now + timing.cold_start_s,
                Replica(self.batcher, now + timing.cold_start_s),
            )
        self._next_index += 1
        self.pods.append(pod)

    def live(self) -> list[Pod]:
        """Pods not being deleted: what the Deployment counts."""
        return [p for p in self.pods if p.deleted_at is None]

    def routable(self, t: float) -> list[Pod]:
        return [p for p in self.pods if p.ready(t)]

    def scale_to(self, replicas: int, now: float) -> None:
        """Set the Deployment's replicas: create pods, or delete them in ReplicaSet order."""
        if replicas == self.spec_replicas:
            return
        live = self.live()
        if replicas > len(live):
            for _ in range(replicas - len(live)):
                self._create(now)
        elif replicas < len(live):

            def rank(pod: Pod) -> tuple[int, int, float, float]:
                # Pending < Running; not ready < ready; newer readiness, newer pod first.
                return (
                    1 if pod.running(now) else 0,
                    1 if pod.ready(now) else 0,
                    -pod.ready_at,
                    -pod.created_at,
                )

            for pod in sorted(live, key=rank)[: len(live) - replicas]:
                pod.deleted_at = now
                if not pod.ready_at <= now:
                    pod.gone_at = now  # nothing to drain: it never served
        self.spec_replicas = replicas
        self.history.append((now, replicas))

    def step(
        self, chunk: npt.NDArray[np.float64], t0: float, t1: float, count_cost: bool = True
    ) -> list[tuple[Pod, Step]]:
        """Route the step's arrivals round robin over Ready pods and advance every pod.

        ``count_cost`` False: the step is after the replay's horizon (final drain).
        """
        ready = self.routable(t0)
        n = len(ready)
        if n == 0:
            raise RuntimeError(f"no Ready pod at t={t0}: the warm pool must keep one")
        out: list[tuple[Pod, Step]] = []
        rr = self._round_robin
        for j, pod in enumerate(ready):
            offset = (j - rr) % n
            out.append((pod, pod.replica.advance(chunk[offset::n].tolist(), t0, t1)))
        self._round_robin = (rr + len(chunk)) % n
        for pod in self.pods:
            if pod.deleted_at is not None and pod.gone_at is None:
                out.append((pod, pod.replica.advance([], t0, t1)))  # draining
                if pod.replica.idle_at(t1):
                    pod.gone_at = max(pod.replica.free_at, pod.deleted_at)
        # Cost of this step, then forget pods that are gone.
        cost = 0.0
        for pod in self.pods if count_cost else ():
            start = max(pod.created_at, t0)
            end = t1 if pod.gone_at is None else min(pod.gone_at, t1)
            if end > start:
                cost += end - start
        self.replica_seconds += cost
        self.pods = [p for p in self.pods if p.gone_at is None or p.gone_at > t1]
        return out
