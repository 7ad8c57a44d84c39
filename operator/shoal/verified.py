"""Which children Shoal has verified (or written) to hold what it wanted, and since when.

A pass that wants a child to say exactly what it said when a previous pass verified it,
while the watch shows the child unchanged since, can skip reading it: nothing it could
read would lead to a write. A verification expires after ``ttl`` seconds, so every child
is read again now and then even if a watch were to stall silently.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection
from typing import Any

from shoal.cache import Cache, content_digest, key_of

DEFAULT_TTL = 600.0


class Verified:
    def __init__(
        self,
        cache: Cache,
        ttl: float = DEFAULT_TTL,
        clock: Callable[[], float] = time.monotonic,
        watched: Collection[str] | None = None,
    ) -> None:
        self._cache = cache
        # The kinds a watch keeps the cache current for (None: all). A child of another
        # kind (Kueue's, watched by no one) is read before every apply.
        self._watched = None if watched is None else frozenset(watched)
        self._ttl = ttl
        self._clock = clock
        self._lock = threading.Lock()
        # child key -> (digest of what was wanted, content digest then, when)
        self._records: dict[tuple[str, str, str], tuple[str, str, float]] = {}
        self.synced = False  # set once the cache holds every watched object

    def record(self, wanted: str, body: dict[str, Any]) -> None:
        """``body`` (the child as read or as the write left it) holds intent ``wanted``."""
        key = key_of(body["kind"], body)
        if self._cache.buried(body["kind"], body):
            return  # the reply lost the race with the child's deletion
        # Kept in the cache too, so the watch's echo of a write is known not to matter.
        self._cache.put(body["kind"], body)
        with self._lock:
            self._records[key] = (wanted, content_digest(body), self._clock())

    def vouch(self, desired: dict[str, Any], wanted: str) -> dict[str, Any] | None:
        """The cached projection of ``desired``'s child if it was verified to hold intent
        ``wanted`` and the watch shows it unchanged since; else None."""
        if not self._watches(desired["kind"]):
            return None
        key = key_of(desired["kind"], desired)
        with self._lock:
            record = self._records.get(key)
        if record is None or record[0] != wanted or self._clock() - record[2] > self._ttl:
            return None
        cached = self._cache.content_of(key)
        if cached is None or cached[0] != record[1]:
            return None
        return cached[1]

    def absent(self, desired: dict[str, Any]) -> bool:
        """Whether the watch vouches that the child does not exist (so there is nothing
        to read before creating it)."""
        key = key_of(desired["kind"], desired)
        watched = self._watches(desired["kind"])
        return watched and self.synced and self._cache.content_of(key) is None

    def _watches(self, kind: str) -> bool:
        return self._watched is None or kind in self._watched

    def forget(self, kind: str, body: dict[str, Any]) -> None:
        with self._lock:
            self._records.pop(key_of(kind, body), None)
