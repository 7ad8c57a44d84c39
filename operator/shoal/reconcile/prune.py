"""Apply a plan, then delete what its owner holds that the plan no longer has.

The one way every planner's children come and go (a model's stack, its overflow twin's,
a pool's quotas and policies, its gateway, its Kueue objects). Which kinds a planner
may prune is the table of kinds' (shoal.api.kinds): a kind the table says the planner
renders is pruned with the rest, with no list of its own to keep in step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from shoal.api.kinds import Kind, planned_by
from shoal.cache import Key, key_of
from shoal.kube.client import Kube


@dataclass(frozen=True)
class Owner:
    """Whose children a prune may delete: those of the kinds ``planner`` renders that
    carry every one of ``labels`` and none of ``unmarked`` (another owner's label on an
    object that also carries these: a model's stack carries its pool's label)."""

    planner: str
    labels: Mapping[str, str]
    unmarked: tuple[str, ...] = ()
    _kinds: dict[str, Kind] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_kinds", {k.kind: k for k in planned_by(self.planner)})

    @property
    def kinds(self) -> tuple[str, ...]:
        """The kinds this owner may hold, in the table's order."""
        return tuple(self._kinds)

    def owns(self, kind: str, body: Mapping[str, Any]) -> bool:
        if kind not in self._kinds:
            return False
        labels = (body.get("metadata") or {}).get("labels") or {}
        return all(labels.get(k) == v for k, v in self.labels.items()) and not any(
            k in labels for k in self.unmarked
        )

    def api_version(self, kind: str) -> str:
        return self._kinds[kind].api_version


def stale(
    owner: Owner, live: Iterable[dict[str, Any]], wanted: Iterable[Key]
) -> list[dict[str, Any]]:
    """What ``owner`` holds in ``live`` that ``wanted`` lacks, in the table's kind order
    (Kueue's: LocalQueues before the ClusterQueue before the ResourceFlavor) (pure)."""
    keep = set(wanted)
    order = {kind: i for i, kind in enumerate(owner.kinds)}
    out = [
        {**obj, "apiVersion": owner.api_version(obj["kind"])}
        for obj in live
        if owner.owns(obj["kind"], obj) and key_of(obj["kind"], obj) not in keep
    ]
    return sorted(out, key=lambda obj: order[obj["kind"]])


def keys(objects: Iterable[dict[str, Any]]) -> set[Key]:
    return {key_of(o["kind"], o) for o in objects}


def prune(
    kube: Kube, owner: Owner, live: Iterable[dict[str, Any]], wanted: Iterable[Key]
) -> list[dict[str, Any]]:
    """Delete what ``owner`` holds in ``live`` beyond ``wanted``; returns what went."""
    gone = stale(owner, live, wanted)
    for obj in gone:
        kube.delete(obj)
    return gone


def apply_and_prune(
    kube: Kube, owner: Owner, desired: Iterable[dict[str, Any]], live: Iterable[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Apply ``desired`` in order, then prune what ``owner`` holds beyond it; returns
    each applied object as it stands. ``live``: what the owner held before (the cache's
    objects of ``owner.kinds``, or a listing for a kind nobody watches)."""
    planned = list(desired)
    applied = [kube.apply(obj) for obj in planned]
    prune(kube, owner, live, keys(planned))
    return applied
