"""A deduplicating, delaying work queue of object keys, in the manner of client-go's.

Watch events arrive far more often than objects need reconciling: one Deployment rollout
sends a dozen events, a status write echoes back as an event, and a pool whose usage
changes on every model's scale-up would be re-checked once per model. The queue turns
that stream into work:

- a key waiting in the queue is there once, however often it is added (the earliest
  requested time wins), so a burst of events costs one reconcile;
- a key is never handed to two workers at once (no per-object locks needed);
- a key added while it is being processed runs again once that pass ends, so no change
  is lost: the pass that follows reads the newest state (level-triggered);
- ``delay`` lets a caller gather a burst: every request within the delay is served by
  one pass;
- a key whose pass failed is retried after a per-key exponential backoff (``retry``),
  reset when a pass over it succeeds (``forget``), as client-go's rate-limited queue does;
- a failure that was the server's, not the object's (unreachable, shedding load,
  restarting), backs off to ``TRANSIENT_MAX_SECONDS`` at most: a key that failed through
  a 15 s API-server restart must not then wait a minute once the server is back.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import threading
import time
from collections.abc import Callable, Hashable

log = logging.getLogger(__name__)


BACKOFF_BASE_SECONDS = 0.5
BACKOFF_MAX_SECONDS = 60.0
TRANSIENT_MAX_SECONDS = 4.0


class WorkQueue:
    def __init__(
        self,
        handle: Callable[[Hashable], None],
        workers: int,
        name: str = "work",
        backoff: tuple[float, float] = (BACKOFF_BASE_SECONDS, BACKOFF_MAX_SECONDS),
    ):
        self._handle = handle
        self._backoff = backoff
        self._failures: dict[Hashable, int] = {}
        self._workers = workers
        self._name = name
        self._cond = threading.Condition()
        self._heap: list[tuple[float, int, Hashable]] = []
        self._due: dict[Hashable, float] = {}  # waiting keys and when they are due
        self._processing: set[Hashable] = set()
        self._again: dict[Hashable, float] = {}  # added while processing
        self._seq = itertools.count()
        self._threads: list[threading.Thread] = []
        self._stopped = False

    # ------------------------------------------------------------------ producers
    def add(self, key: Hashable, delay: float = 0.0) -> None:
        due = time.monotonic() + delay
        with self._cond:
            if key in self._processing:
                self._again[key] = min(due, self._again.get(key, math.inf))
                return
            self._push(key, due)

    def _push(self, key: Hashable, due: float) -> None:
        current = self._due.get(key)
        if current is not None and current <= due:
            return
        self._due[key] = due
        heapq.heappush(self._heap, (due, next(self._seq), key))
        self._cond.notify()

    def retry(self, key: Hashable, transient: bool = False) -> float:
        """Add ``key`` again after its backoff, which doubles with each failure in a row;
        returns the delay. A ``transient`` failure (the server's) neither waits longer
        than TRANSIENT_MAX_SECONDS nor lengthens the backoff of a failure that follows."""
        base, ceiling = self._backoff
        if transient:
            ceiling = min(ceiling, TRANSIENT_MAX_SECONDS)
        with self._cond:
            failures = self._failures.get(key, 0)
            delay = float(min(base * 2**failures, ceiling))
            if not transient or base * 2**failures < ceiling:
                self._failures[key] = failures + 1
        self.add(key, delay)
        return delay

    def forget(self, key: Hashable) -> None:
        """A pass over ``key`` succeeded: its next failure starts the backoff afresh."""
        with self._cond:
            self._failures.pop(key, None)

    def __len__(self) -> int:
        """Keys waiting (not counting those being processed)."""
        with self._cond:
            return len(self._due)

    # ------------------------------------------------------------------ workers
    def start(self) -> None:
        for i in range(self._workers):
            thread = threading.Thread(target=self._work, name=f"{self._name}-{i}", daemon=True)
            thread.start()
            self._threads.append(thread)

    def stop(self, timeout: float = 10.0) -> None:
        with self._cond:
            self._stopped = True
            self._cond.notify_all()
        for thread in self._threads:
            thread.join(timeout)

    def _take(self) -> Hashable | None:
        """The next due key, marked as processing; None once stopped."""
        with self._cond:
            while not self._stopped:
                # Entries whose key was re-added with an earlier time are stale.
                while self._heap and self._due.get(self._heap[0][2]) != self._heap[0][0]:
                    heapq.heappop(self._heap)
                if self._heap:
                    due, _, key = self._heap[0]
                    wait = due - time.monotonic()
                    if wait <= 0:
                        heapq.heappop(self._heap)
                        del self._due[key]
                        self._processing.add(key)
                        return key
                    self._cond.wait(wait)
                else:
                    self._cond.wait()
            return None

    def _done(self, key: Hashable) -> None:
        with self._cond:
            self._processing.discard(key)
            again = self._again.pop(key, None)
            if again is not None:
                self._push(key, again)

    def _work(self) -> None:
        while (key := self._take()) is not None:
            try:
                self._handle(key)
            except Exception:
                # The handler reports its own failures; this only keeps the worker alive.
                log.exception("%s: reconciling %s failed", self._name, key)
            finally:
                self._done(key)
