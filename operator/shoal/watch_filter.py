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
"""

from __future__ import annotations

import threading
from collections.abc import Hashable
from typing import Any

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

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str, str], Hashable] = {}
        self._lock = threading.Lock()

    def relevant(self, event_type: str | None, kind: str, body: dict[str, Any]) -> bool:
        meta = body.get("metadata") or {}
        key = (kind, meta.get("namespace") or "", meta.get("name") or "")
        with self._lock:
            if event_type == "DELETED":
                self._seen.pop(key, None)
                return True
            new = signature(kind, body)
            if key in self._seen and self._seen[key] == new:
                return False
            self._seen[key] = new
            return True
