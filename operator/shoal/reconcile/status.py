"""Every status Shoal writes is assembled and written here.

Each kind's status is computed from scratch on every pass: the keys a pass computes are
the status, and a key a previous pass wrote but this one does not (the endpoints and
replicas of a model that became blocked) is removed by the same write.

Conditions follow the Kubernetes API conventions and are readable by kstatus (Flux,
``kubectl wait``) and Argo CD: besides ``Ready``, ``Reconciling`` is True while Shoal
is still working towards the spec, and ``Stalled`` is True when it cannot get there
without a change to the spec or its surroundings (an invalid spec, a namespace the pool
does not admit, a quota the model does not fit), so a GitOps sync reports Failed at once
instead of waiting for its timeout.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from shoal.api.conditions import Cond, merge_conditions, now_rfc3339
from shoal.api.crd import KINDS
from shoal.cache import Cache
from shoal.kube.client import Kube

# Each kind's status model: a status is checked against it before it is written.
STATUS_MODELS: dict[str, type[BaseModel]] = {k.name: k.status for k in KINDS}
NOT_STALLED = Cond("Stalled", "False", "AsExpected", "Nothing blocks the spec.")


def kstatus(
    ready: Cond, *, stalled: bool, progressing: Cond | None = None, settled: bool = False
) -> list[Cond]:
    """``Stalled`` and ``Reconciling`` from the outcome of a pass (pure). ``settled``:
    not Ready by design (a model its pool's window parked), which is where the spec
    says it should be, so GitOps health does not wait on it."""
    if settled:
        return [NOT_STALLED, Cond("Reconciling", "False", ready.reason, ready.message)]
    if stalled:
        return [
            Cond("Stalled", "True", ready.reason, ready.message),
            Cond("Reconciling", "False", ready.reason, "Waiting for a change to the spec."),
        ]
    rolling = progressing is not None and progressing.status == "True"
    if ready.status != "True" or rolling:
        working = progressing if rolling and progressing is not None else ready
        return [NOT_STALLED, Cond("Reconciling", "True", working.reason, working.message)]
    return [NOT_STALLED, Cond("Reconciling", "False", "Reconciled", ready.message)]


def assemble(body: dict[str, Any], conditions: list[Cond], **fields: Any) -> dict[str, Any]:
    """The whole status of ``body``: observedGeneration, ``conditions`` merged with the
    live ones (a transition time moves only when a status changes), and ``fields``
    (those set to None are left out). Pure."""
    generation = (body.get("metadata") or {}).get("generation")
    live = (body.get("status") or {}).get("conditions") or []
    return {
        "observedGeneration": generation,
        "conditions": merge_conditions(live, conditions, generation, now_rfc3339()),
        **{k: v for k, v in fields.items() if v is not None},
    }


def status_patch(live: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any] | None:
    """The merge patch that turns status ``live`` into ``new``, or None when they are
    already equal. Pure.

    A JSON merge patch merges objects key by key, at every depth: a key ``new`` lacks,
    in a nested object too (``capacity.nominalGpus`` once capacity is unset), is only
    removed when the patch sets it to null. Lists are replaced whole."""
    live = live or {}
    if _without_nulls(live) == _without_nulls(new):
        return None
    return _merge_patch(live, new)


def _without_nulls(value: Any) -> Any:
    """``value`` as the server keeps it: a key set to null is no key."""
    if isinstance(value, dict):
        return {k: _without_nulls(v) for k, v in value.items() if v is not None}
    return value


def _merge_patch(live: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    patch: dict[str, Any] = {key: None for key in live if key not in new}
    for key, value in new.items():
        before = live.get(key)
        if isinstance(value, dict) and isinstance(before, dict):
            patch[key] = _merge_patch(before, value)
        else:
            patch[key] = value
    return patch


def write_status(kube: Kube, cache: Cache, body: dict[str, Any], new: dict[str, Any]) -> bool:
    """Write ``new`` as ``body``'s status if it differs; True when a write was sent. The
    cache keeps the reply, so the next pass compares against what was written even
    before the watch brings it back.

    ``new`` is checked against the kind's status model first, as the API server checks
    a spec: a key the model does not have, or a value of the wrong type, raises
    pydantic's ValidationError here instead of being pruned silently by the server."""
    STATUS_MODELS[body["kind"]].model_validate(new)
    patch = status_patch(body.get("status"), new)
    if patch is None:
        return False
    written = kube.patch_status(body, patch)
    if written is not None:
        cache.put(body["kind"], written)
    return True
