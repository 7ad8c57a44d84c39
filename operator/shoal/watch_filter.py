"""Which watch events are worth a reconcile pass.

Status is written all the time: the HPA controller on every sync, the disruption
controller whenever a pod comes or goes, the deployment controller several times per
rollout, and Shoal itself on its own objects (each write comes back as an event). A
pass reads a dozen objects, so reacting to every such write would cost the API server
far more than the operator's useful work. A pass is needed only when something it acts
on changed:

- the object's spec (``metadata.generation``), labels, annotations, owners, finalizers
  or deletion (for a child: drift an admin made, which Shoal puts back);
- for a Deployment, the rollout figures the model's status is computed from;
- the object's removal.

Services and ConfigMaps have no generation and no controller writing them: every event
on them counts. The first sighting of an object always counts, and the periodic resync
does not go through this filter: it remains the backstop.

The same signatures spare reads: once a pass has verified (or written) a watched child
against what it wants, a later pass wanting the very same object can skip re-reading it
as long as no watch event changed its signature since. A verification expires after
``VERIFIED_TTL`` so that every child is read again now and then, even if a watch were
to stall silently.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
from collections.abc import Hashable
from typing import Any

VERIFIED_TTL = 600.0
# Children the operator watches (handlers.py): only their signatures are kept current.
WATCHED_CHILDREN = frozenset(
    {"Deployment", "Service", "ConfigMap", "PodDisruptionBudget", "HorizontalPodAutoscaler"}
)

ROLLOUT_FIELDS = (
    "observedGeneration",
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
)


def signature(kind: str, body: dict[str, Any]) -> Hashable:
    """What of an object a pass depends on (pure); equal signatures, no pass needed."""
    meta = body.get("metadata") or {}
    if kind in ("Service", "ConfigMap"):
        return meta.get("resourceVersion")
    watched_meta = (
        meta.get("generation"),
        meta.get("deletionTimestamp"),
        tuple(meta.get("finalizers") or []),
        tuple(sorted((meta.get("labels") or {}).items())),
        tuple(sorted((meta.get("annotations") or {}).items())),
        tuple(ref.get("uid") for ref in meta.get("ownerReferences") or []),
    )
    if kind != "Deployment":
        return watched_meta
    status = body.get("status") or {}
    conditions = tuple(
        (c.get("type"), c.get("status"), c.get("reason")) for c in status.get("conditions") or []
    )
    return (watched_meta, tuple(status.get(f) for f in ROLLOUT_FIELDS), conditions)


class WatchFilter:
    """Remembers each object's last signature; thread-safe (kopf runs handlers in
    threads)."""

    def __init__(self, clock: Any = time.monotonic) -> None:
        self._seen: dict[tuple[str, str, str], Hashable] = {}
        # key -> (digest of what was wanted, signature then, when)
        self._verified: dict[tuple[str, str, str], tuple[str, Hashable, float]] = {}
        self._lock = threading.Lock()
        self._clock = clock

    def observed(self, desired: dict[str, Any], body: dict[str, Any]) -> None:
        """A pass found (or made) ``body`` holding everything ``desired`` says: the event
        echoing its write changes nothing, and the next pass wanting the same may skip
        the read."""
        kind = desired["kind"]
        key = _key(kind, body)
        with self._lock:
            self._seen[key] = sig = signature(kind, body)
            if kind in WATCHED_CHILDREN and kind != "Deployment":
                self._verified[key] = (_digest(desired), sig, self._clock())

    def unchanged(self, desired: dict[str, Any]) -> bool:
        """Whether ``desired`` was verified recently and no event touched it since."""
        key = _key(desired["kind"], desired)
        with self._lock:
            record = self._verified.get(key)
            if record is None or self._clock() - record[2] > VERIFIED_TTL:
                return False
            return record[:2] == (_digest(desired), self._seen.get(key))

    def relevant(self, event_type: str | None, kind: str, body: dict[str, Any]) -> bool:
        key = _key(kind, body)
        with self._lock:
            if event_type == "DELETED":
                self._seen.pop(key, None)
                self._verified.pop(key, None)
                return True
            new = signature(kind, body)
            if key in self._seen and self._seen[key] == new:
                return False
            self._seen[key] = new
            return True


def _key(kind: str, body: dict[str, Any]) -> tuple[str, str, str]:
    meta = body.get("metadata") or {}
    return (kind, meta.get("namespace") or "", meta.get("name") or "")


def _digest(desired: dict[str, Any]) -> str:
    return hashlib.blake2b(json.dumps(desired, sort_keys=True).encode(), digest_size=16).hexdigest()
