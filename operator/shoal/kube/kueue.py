"""Whether the cluster serves Kueue's API, asked of the API server and remembered a while."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from shoal.api.constants import KUEUE_GROUP, KUEUE_VERSION
from shoal.kube.client import ApiError, Kube

# How long an answer to "does the cluster serve Kueue?" is trusted.
PROBE_SECONDS = 10.0


@dataclass
class KueueProbe:
    """Whether the API server serves Kueue's API, asked at most every ``ttl`` seconds
    (a model's pass asks too, and there may be thousands)."""

    ttl: float = PROBE_SECONDS
    clock: Callable[[], float] = time.monotonic
    _answer: tuple[bool, float] | None = field(default=None, init=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False)

    def served(self, kube: Kube) -> bool:
        with self._lock:
            if self._answer is not None and self.clock() - self._answer[1] < self.ttl:
                return self._answer[0]
        try:
            document = kube.get_path(f"/apis/{KUEUE_GROUP}/{KUEUE_VERSION}")
            served = any(r.get("kind") == "ClusterQueue" for r in document.get("resources", []))
        except ApiError as exc:
            if exc.status not in (403, 404, 503):
                raise
            served = False
        with self._lock:
            self._answer = (served, self.clock())
        return served
