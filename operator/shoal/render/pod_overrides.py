"""The pieces a model's ``spec.runtime`` adds to its pods (shoal.api.pod_overrides), in
the Pod API's shape (pure)."""

from __future__ import annotations

from typing import Any

from shoal.api.pod_overrides import ExtraVolume

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
