"""The pieces a model's ``spec.runtime`` adds to its pods (shoal.api.pod_overrides), in
the Pod API's shape (pure)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from shoal.api.pod_overrides import ExtraVolume
from shoal.api.scheduling import Affinity, TopologySpreadConstraint

_SOURCES = ("configMap", "secret", "persistentVolumeClaim", "emptyDir")


def read_only(extra: ExtraVolume) -> bool:
    """As the spec says; unset, read-only but for scratch space."""
    if extra.read_only is not None:
        return extra.read_only
    return extra.empty_dir is None


def volume(extra: ExtraVolume) -> dict[str, Any]:
    """The pod's volume: its name and its one source, as the Pod API spells it."""
    wire = extra.to_wire()
    source = next(key for key in _SOURCES if key in wire)
    body = wire[source]
    if source == "persistentVolumeClaim":
        body = {**body, "readOnly": read_only(extra)}
    return {"name": extra.name, source: body}


def mount(extra: ExtraVolume) -> dict[str, Any]:
    """Its mount in Triton's container."""
    out: dict[str, Any] = {"name": extra.name, "mountPath": extra.mount_path}
    if extra.sub_path is not None:
        out["subPath"] = extra.sub_path
    out["readOnly"] = read_only(extra)
    return out


def _without_empty(value: Any) -> Any:
    """``value`` without the empty lists and maps an unset selector's parts default to,
    as the API server stores a pod spec; a label selector stays even when empty (it then
    selects every pod or namespace)."""
    if isinstance(value, dict):
        return {
            k: _without_empty(v)
            for k, v in value.items()
            if k in ("labelSelector", "namespaceSelector")
            or not (isinstance(v, dict | list) and not v)
        }
    if isinstance(value, list):
        return [_without_empty(v) for v in value]
    return value


def affinity(spec: Affinity | None) -> dict[str, Any] | None:
    """The pod's affinity; None when the model sets none (or sets only empty parts)."""
    if spec is None:
        return None
    wire: dict[str, Any] = _without_empty(spec.to_wire())
    return wire or None


def spread(
    constraints: Sequence[TopologySpreadConstraint], own_pods: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The model's spread constraints; one without a labelSelector counts ``own_pods``
    (the labels of the model's Deployment selector)."""
    out = []
    for constraint in constraints:
        wire = _without_empty(constraint.to_wire())
        wire.setdefault("labelSelector", {"matchLabels": dict(own_pods)})
        out.append(wire)
    return out
