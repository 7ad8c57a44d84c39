"""What the watches have delivered: the operator's informer-style cache.

Every kind the operator acts on is watched (kopf), and each event's object is kept here
as a projection: the custom resources and Namespaces without their managedFields, the
children (Deployments, Services, ...) as their metadata plus, for Deployments, the
rollout figures, and for HPAs whether they can read their metrics. A pass reads its
model, pool, policy and namespace from here instead of asking the API server, and
lists a pool's models and objects from the indexes here.

kopf fills the cache from its indexing handlers, which it runs for every object of every
watched kind before it runs any other handler (the initial lists of all kinds complete
first), so a pass never sees a half-filled cache.

A deleted object leaves a tombstone: the reply to a write that raced its deletion (a
status write, an apply read back) arrives after the watch's DELETED event, and must not
bring it back, or the next pass would act for a model that no longer exists and create
children for it in a namespace of the same name.

Each entry carries a signature of what a pass depends on: everything but the status and
the fields the server changes on every write, plus a Deployment's rollout figures. An
event whose signature equals the stored one (a status write, the echo of Shoal's own
apply) needs no pass.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict, defaultdict
from collections.abc import Hashable, Iterable
from dataclasses import dataclass
from typing import Any

from shoal.api.constants import GROUP, MODEL_LABEL, POOL_LABEL
from shoal.render.autoscaler import scaling_active
from shoal.render.pods import is_ready

Key = tuple[str, str, str]  # (kind, namespace or "", name)
# Tombstones kept, oldest forgotten first: a reply races its deletion by seconds.
TOMBSTONES = 10_000
CUSTOM_KINDS = ("InferenceModel", "TenantPool", "BatchPolicy")
# Metadata the server rewrites without anyone changing what the object says.
_OWN_PREFIX = f"{GROUP}/"
_VOLATILE_METADATA = ("resourceVersion", "managedFields", "creationTimestamp", "uid")
ROLLOUT_FIELDS = (
    "observedGeneration",
    "replicas",
    "updatedReplicas",
    "readyReplicas",
    "availableReplicas",
    "unavailableReplicas",
)


def key_of(kind: str, body: dict[str, Any]) -> Key:
    meta = body.get("metadata") or {}
    return (kind, meta.get("namespace") or "", meta.get("name") or "")


def _pod(body: dict[str, Any]) -> dict[str, Any]:
    """Of a pod, what a gateway's peers need: its address and whether it is ready."""
    status = body.get("status") or {}
    return {"podIP": status.get("podIP"), "phase": status.get("phase"), "ready": is_ready(body)}


def _endpoints(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Of an EndpointSlice, each endpoint's addresses, readiness and pod."""
    return [
        {
            "addresses": e.get("addresses") or [],
            "ready": (e.get("conditions") or {}).get("ready") is not False,
            "pod": (e.get("targetRef") or {}).get("name"),
        }
        for e in body.get("endpoints") or []
    ]


def _status_of(kind: str, body: dict[str, Any]) -> dict[str, Any] | None:
    """The part of a child's status a pass depends on (None: none of it)."""
    if kind == "Deployment":
        return _rollout(body)
    if kind == "Pod":
        return _pod(body)
    if kind == "HorizontalPodAutoscaler":
        active = scaling_active(body.get("status") or {})
        return {"conditions": [active]} if active else {}
    return None


def _rollout(body: dict[str, Any]) -> dict[str, Any]:
    status = body.get("status") or {}
    out: dict[str, Any] = {f: status[f] for f in ROLLOUT_FIELDS if f in status}
    conditions = [
        {k: c.get(k) for k in ("type", "status", "reason", "message")}
        for c in status.get("conditions") or []
    ]
    if conditions:
        out["conditions"] = conditions
    return out


def content_digest(body: dict[str, Any]) -> str:
    """A digest of what an object says: all but status, volatile metadata and the
    annotations of others (a Deployment's ``deployment.kubernetes.io/revision``, a
    GitOps tool's): Shoal neither sets nor reads them, so their changes neither call for
    a pass nor make a verified child need reading again."""
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    if "annotations" in meta:
        meta["annotations"] = {
            k: v for k, v in (meta["annotations"] or {}).items() if k.startswith(_OWN_PREFIX)
        }
    rest = {k: v for k, v in body.items() if k not in ("metadata", "status")}
    text = json.dumps([meta, rest], sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def signature(kind: str, body: dict[str, Any], content: str | None = None) -> Hashable:
    """What of an object a pass depends on (pure); equal signatures, no pass needed."""
    content = content_digest(body) if content is None else content
    status = _status_of(kind, body)
    if status is not None:
        return (content, json.dumps(status, sort_keys=True))
    return content


def projection(kind: str, body: dict[str, Any]) -> dict[str, Any]:
    """What the cache keeps of an object (pure)."""
    meta = {k: v for k, v in (body.get("metadata") or {}).items() if k != "managedFields"}
    if kind in CUSTOM_KINDS:
        return {
            "apiVersion": body.get("apiVersion"),
            "kind": kind,
            "metadata": meta,
            "spec": body.get("spec") or {},
            "status": body.get("status") or {},
        }
    kept = {
        k: meta[k]
        for k in (
            "name",
            "namespace",
            "labels",
            "generation",
            "resourceVersion",
            "deletionTimestamp",
        )
        if k in meta
    }
    out: dict[str, Any] = {"kind": kind, "metadata": kept}
    status = _status_of(kind, body)
    if status is not None:
        out["status"] = status
    if kind == "EndpointSlice":
        out["endpoints"] = _endpoints(body)
    return out


@dataclass(frozen=True)
class Tombstone:
    uid: str | None
    resource_version: str | None

    def buries(self, body: dict[str, Any]) -> bool:
        """Whether ``body`` is a copy of the deleted object from before its deletion: the
        same incarnation (uid) at a version not after the DELETED event's. A later
        version of the same object is not buried: a filtered watch also says DELETED
        when a label leaves its selector, and the object may come back into it."""
        meta = body.get("metadata") or {}
        if self.uid and meta.get("uid") and meta["uid"] != self.uid:
            return False  # another object of the same name
        return not _newer(meta.get("resourceVersion"), self.resource_version, strictly=True)


def _newer(incoming: str | None, stored: str | None, *, strictly: bool = False) -> bool:
    """Whether a resourceVersion is not older than the stored one. They are opaque to
    clients, but the API server's are etcd revisions; anything else is taken as newer."""
    try:
        if strictly:
            return int(incoming or 0) > int(stored or 0)
        return int(incoming or 0) >= int(stored or 0)
    except ValueError:
        return True


@dataclass(frozen=True)
class Entry:
    body: dict[str, Any]
    content: str  # content_digest: changes only when what the object says changes
    signature: Hashable


class Cache:
    """Thread-safe: kopf's handlers write, the reconcile workers read."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[Key, Entry] = {}
        self._by_pool: dict[str, set[Key]] = defaultdict(set)  # models and pool objects
        self._by_kind: dict[str, set[Key]] = defaultdict(set)
        # (namespace, model label): a model's children, or its overflow twin's.
        self._by_model: dict[tuple[str, str], set[Key]] = defaultdict(set)
        self._tombstones: OrderedDict[Key, Tombstone] = OrderedDict()

    # ------------------------------------------------------------------ writes
    def put(self, kind: str, body: dict[str, Any], *, partial: bool = False) -> bool:
        """Keep ``body``; True when what a pass depends on changed (or it is new).

        An older copy than the one kept (a write's reply that lost the race with the
        watch, or the reverse) changes nothing. A ``partial`` body (metadata only, from
        a listing) is kept only for an object not seen yet. A copy of an object whose
        deletion was seen is not kept (``buried``)."""
        key = key_of(kind, body)
        content = content_digest(body)
        new = Entry(projection(kind, body), content, signature(kind, body, content))
        version = (body.get("metadata") or {}).get("resourceVersion")
        with self._lock:
            tombstone = self._tombstones.get(key)
            if tombstone is not None:
                if tombstone.buries(body):
                    return False
                del self._tombstones[key]  # created again
            old = self._entries.get(key)
            if partial and old is not None:
                return False
            if old is not None and not _newer(version, old.body["metadata"].get("resourceVersion")):
                return False
            if old is not None:
                self._unindex(key, old.body)
            self._entries[key] = new
            self._index(key, new.body)
        return old is None or old.signature != new.signature

    def drop(self, kind: str, body: dict[str, Any]) -> None:
        """Forget a deleted object, and refuse any older copy of it from now on."""
        key = key_of(kind, body)
        meta = body.get("metadata") or {}
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._unindex(key, old.body)
            self._tombstones.pop(key, None)
            self._tombstones[key] = Tombstone(meta.get("uid"), meta.get("resourceVersion"))
            while len(self._tombstones) > TOMBSTONES:
                self._tombstones.popitem(last=False)

    def buried(self, kind: str, body: dict[str, Any]) -> bool:
        """Whether ``body`` is a copy of an object whose deletion was seen."""
        with self._lock:
            tombstone = self._tombstones.get(key_of(kind, body))
        return tombstone is not None and tombstone.buries(body)

    def _pool_of(self, key: Key, body: dict[str, Any]) -> str | None:
        if key[0] == "InferenceModel":
            return str((body.get("spec") or {}).get("pool") or "") or None
        return ((body.get("metadata") or {}).get("labels") or {}).get(POOL_LABEL)

    @staticmethod
    def _model_of(key: Key, body: dict[str, Any]) -> tuple[str, str] | None:
        model = ((body.get("metadata") or {}).get("labels") or {}).get(MODEL_LABEL)
        return (key[1], model) if model and key[0] not in CUSTOM_KINDS else None

    def _index(self, key: Key, body: dict[str, Any]) -> None:
        self._by_kind[key[0]].add(key)
        pool = self._pool_of(key, body)
        if pool:
            self._by_pool[pool].add(key)
        model = self._model_of(key, body)
        if model:
            self._by_model[model].add(key)

    def _unindex(self, key: Key, body: dict[str, Any]) -> None:
        self._by_kind[key[0]].discard(key)
        pool = self._pool_of(key, body)
        if pool:
            self._by_pool[pool].discard(key)
            if not self._by_pool[pool]:
                del self._by_pool[pool]
        model = self._model_of(key, body)
        if model:
            self._by_model[model].discard(key)
            if not self._by_model[model]:
                del self._by_model[model]

    # ------------------------------------------------------------------ reads
    def get(self, kind: str, name: str, namespace: str = "") -> dict[str, Any] | None:
        with self._lock:
            entry = self._entries.get((kind, namespace, name))
        return entry.body if entry is not None else None

    def content_of(self, key: Key) -> tuple[str, dict[str, Any]] | None:
        """The content digest and projection kept for ``key``, if any."""
        with self._lock:
            entry = self._entries.get(key)
        return (entry.content, entry.body) if entry is not None else None

    def has(self, kind: str, name: str, namespace: str = "") -> bool:
        with self._lock:
            return (kind, namespace, name) in self._entries

    def all(self, kind: str, namespaces: Iterable[str] | None = None) -> list[dict[str, Any]]:
        """Every kept object of ``kind`` (in ``namespaces`` when given)."""
        wanted = None if namespaces is None else set(namespaces)
        with self._lock:
            keys = sorted(self._by_kind.get(kind, ()))
            return [self._entries[k].body for k in keys if wanted is None or k[1] in wanted]

    def in_pool(self, pool: str, kinds: Iterable[str]) -> list[dict[str, Any]]:
        """Objects of ``kinds`` that belong to ``pool``: its InferenceModels (by
        spec.pool) and the objects labelled with it."""
        wanted = set(kinds)
        with self._lock:
            keys = sorted(k for k in self._by_pool.get(pool, ()) if k[0] in wanted)
            return [self._entries[k].body for k in keys]

    def of_model(self, namespace: str, model: str, kinds: Iterable[str]) -> list[dict[str, Any]]:
        """Objects of ``kinds`` in ``namespace`` labelled as ``model``'s (its stack, or
        for a twin's name, its overflow twin's)."""
        wanted = set(kinds)
        with self._lock:
            keys = sorted(k for k in self._by_model.get((namespace, model), ()) if k[0] in wanted)
            return [self._entries[k].body for k in keys]

    def versions(self, kind: str) -> dict[tuple[str, str], str]:
        """(namespace, name) -> resourceVersion of every kept object of ``kind``."""
        with self._lock:
            return {
                (k[1], k[2]): str(self._entries[k].body["metadata"].get("resourceVersion", ""))
                for k in self._by_kind.get(kind, ())
            }
