"""One replica: a Triton server with one model instance behind the dynamic batcher.

Shoal renders one instance group with ``dynamic_batching`` from the BatchPolicy, so a
replica is a FIFO queue in front of one executor. A batch forms when the instance is
free: it takes up to maxBatchSize waiting requests; with fewer waiting and the oldest
younger than maxQueueDelay, it waits until the delay expires or the batch fills. So a
batch starts at ``max(instance free, min(oldest + delay, arrival of the max-th))`` and
takes every request that arrived by then, up to the maximum. Preferred batch sizes,
priority levels and queue timeouts are not modelled (Shoal's default BatchPolicy sets
none of them). A request's latency is its queue wait plus its batch's execution time.

The simulator advances replicas in short steps (one second); within a step the work is
one loop iteration per batch, not per request. A batch whose start would fall after the
step's end, or whose size could still grow with arrivals not yet seen, waits for the
next step, so stepping changes nothing in the result.
"""

from __future__ import annotations

from bisect import bisect_right
from dataclasses import dataclass
from operator import mul


@dataclass(frozen=True)
class BatcherConfig:
    """The dynamic batcher's settings and the calibrated execution time."""

    max_batch: int
    max_queue_delay_s: float
    base_s: float
    per_item_s: float


@dataclass
class Step:
    """What one replica did during one step [t0, t1)."""

    # Arrival times of the requests whose batch started, in order.
    started: list[float]
    # One per batch started: when it completes, and how many requests it holds.
    ends: list[float]
    sizes: list[int]
    # The integral over the step of the requests in the replica, waiting or running.
    concurrency_area: float
    # Requests waiting (not executing) at the step's end: Triton's pending request count.
    pending: int


class Replica:
    """The queue and executor of one Triton server (state advanced step by step)."""

    __slots__ = (
        "_carry_end",
        "_carry_size",
        "arrived",
        "batches",
        "completed",
        "compute_s",
        "config",
        "free_at",
        "in_system",
        "inferences",
        "queue",
    )

    def __init__(self, config: BatcherConfig, now: float = 0.0) -> None:
        self.config = config
        self.queue: list[float] = []
        self.free_at = now
        self.arrived = 0
        self.completed = 0
        self.batches = 0
        self.inferences = 0  # requests in the batches started (nv_inference_count)
        # nv_inference_compute_infer_*: per request, so a batch's time times its size
        self.compute_s = 0.0
        self.in_system = 0
        self._carry_end = 0.0
        self._carry_size = 0

    def idle_at(self, t: float) -> bool:
        """No request waiting or running at t: a draining replica may go."""
        return not self.queue and self.free_at <= t

    def advance(self, arrivals: list[float], t0: float, t1: float) -> Step:
        """Take the step's arrivals (sorted, all in [t0, t1)) and run batches up to t1."""
        cfg = self.config
        big, delay = cfg.max_batch, cfg.max_queue_delay_s
        base, per_item = cfg.base_s, cfg.per_item_s
        q = self.queue
        area = self.in_system * (t1 - t0)
        if arrivals:
            q.extend(arrivals)
            area += len(arrivals) * t1 - sum(arrivals)
            self.arrived += len(arrivals)
            self.in_system += len(arrivals)
        n = len(q)
        h = 0
        free = self.free_at
        ends: list[float] = []
        sizes: list[int] = []
        add_end, add_size = ends.append, sizes.append
        last_full = n - big  # from here on, fewer than a full batch is waiting
        while h < n:
            ready = q[h] + delay
            if h <= last_full:
                fill = q[h + big - 1]
                if fill < ready:
                    ready = fill
                start = free if free > ready else ready
                if start >= t1:
                    break
                size = big if fill <= start else bisect_right(q, start, h, h + big) - h
            else:
                if ready >= t1:
                    break  # later arrivals may still join this batch
                start = free if free > ready else ready
                if start >= t1:
                    break
                size = n - h if q[n - 1] <= start else bisect_right(q, start, h, n) - h
            free = start + base + per_item * size
            add_end(free)
            add_size(size)
            h += size
        self.free_at = free
        started = q[:h]
        del q[:h]
        self.batches += len(sizes)
        self.inferences += h
        # As Triton counts it: each batch's time once per request in it.
        self.compute_s += base * h + per_item * sum(map(mul, sizes, sizes))
        # Completions inside the step lower the area; only the last batch can end later.
        done = 0
        if self._carry_size and self._carry_end < t1:
            area -= self._carry_size * (t1 - self._carry_end)
            done += self._carry_size
            self._carry_size = 0
        if sizes:
            finished = h
            if ends[-1] >= t1:
                self._carry_end, self._carry_size = ends[-1], sizes[-1]
                finished -= sizes[-1]
                area -= finished * t1 - sum(map(mul, sizes[:-1], ends[:-1]))
            else:
                area -= finished * t1 - sum(map(mul, sizes, ends))
            done += finished
        self.completed += done
        self.in_system -= done
        return Step(started, ends, sizes, area, len(q))
