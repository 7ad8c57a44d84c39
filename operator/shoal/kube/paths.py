"""REST paths of the kinds the operator reads and writes."""

from __future__ import annotations

from typing import Any

from shoal.api.kinds import KINDS as TABLE

# (apiVersion, kind) -> (plural, namespaced), from the table of kinds.
KINDS: dict[tuple[str, str], tuple[str, bool]] = {
    (k.api_version, k.kind): (k.plural, k.namespaced) for k in TABLE
}


def collection_path(api_version: str, kind: str, namespace: str | None) -> str:
    """A collection in one namespace, or across all of them when namespace is None."""
    plural, namespaced = KINDS[(api_version, kind)]
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    if namespaced and namespace:
        return f"{base}/namespaces/{namespace}/{plural}"
    return f"{base}/{plural}"


def object_path(api_version: str, kind: str, name: str, namespace: str | None = None) -> str:
    if KINDS[(api_version, kind)][1] and not namespace:
        raise ValueError(f"{kind} {name} is namespaced: a namespace is needed")
    return f"{collection_path(api_version, kind, namespace)}/{name}"


def path_of(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    return object_path(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
