"""Whether a child still holds what Shoal last applied to it (pure functions).

A live object is compared with the desired one in two ways, and both must agree before
a write is skipped:

- the digest Shoal stamps on every object it applies (``APPLIED_ANNOTATION``) must be the
  digest of the desired object: a field Shoal stopped sending changes the digest, so the
  server-side apply that drops it is sent. A subset check of live against desired can
  never see such a removal;
- every field of the desired object must hold the same value live, so an edit someone
  else made to a field Shoal manages is repaired. Fields the server or other managers
  added are ignored; quantities are compared by value, since the server stores
  ``0.5`` as ``500m``.
"""

from __future__ import annotations

import copy
import hashlib
import json
from decimal import Decimal, InvalidOperation
from typing import Any

from kubernetes.utils import parse_quantity

from shoal.api.constants import APPLIED_ANNOTATION

# Keys whose values (or whose map's values) are Kubernetes quantities the server
# normalises: container resources, quota limits, emptyDir sizes, HPA targets.
_QUANTITY_MAPS = frozenset({"requests", "limits", "hard"})
_QUANTITY_KEYS = frozenset({"sizeLimit", "averageValue"})


def digest(desired: dict[str, Any]) -> str:
    """A short digest of a desired object, the annotation itself left out."""
    body = desired
    if APPLIED_ANNOTATION in ((desired.get("metadata") or {}).get("annotations") or {}):
        body = copy.deepcopy(desired)
        meta = body["metadata"]
        meta["annotations"].pop(APPLIED_ANNOTATION)
        if not meta["annotations"]:
            del meta["annotations"]
    text = json.dumps(body, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(text.encode(), digest_size=12).hexdigest()


def stamped(desired: dict[str, Any], wanted: str | None = None) -> dict[str, Any]:
    """``desired`` with its digest (``wanted``, if already known) in the applied
    annotation: a new dict, sharing all but its metadata with ``desired``."""
    meta = dict(desired.get("metadata") or {})
    stamp = digest(desired) if wanted is None else wanted
    meta["annotations"] = {**(meta.get("annotations") or {}), APPLIED_ANNOTATION: stamp}
    return {**desired, "metadata": meta}


def last_applied(live: dict[str, Any]) -> str | None:
    return ((live.get("metadata") or {}).get("annotations") or {}).get(APPLIED_ANNOTATION)


def _quantity(value: Any) -> Decimal | None:
    try:
        return Decimal(parse_quantity(value))  # type: ignore[no-untyped-call]
    except (ValueError, TypeError, InvalidOperation):
        return None


def _same_scalar(live: Any, desired: Any, quantity: bool) -> bool:
    if live == desired:
        return True
    if quantity and isinstance(desired, str | int | float) and not isinstance(desired, bool):
        wanted = _quantity(desired)
        return wanted is not None and wanted == _quantity(live)
    return False


def holds(live: Any, desired: Any, *, _key: str = "", _in_map: str = "") -> bool:
    """True when every field set in ``desired`` has the same value in ``live``.

    Lists are compared item by item and must be equally long (a removed item is a
    difference); extra keys in live dicts are ignored.
    """
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return False
        return all(
            key in live and holds(live[key], value, _key=key, _in_map=_key)
            for key, value in desired.items()
        )
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return False
        return all(holds(lv, dv, _key=_key) for lv, dv in zip(live, desired, strict=True))
    quantity = (
        _key in _QUANTITY_KEYS
        or _in_map in _QUANTITY_MAPS
        or (_key == "value" and _in_map == "target")
    )
    return _same_scalar(live, desired, quantity)


def current(live: dict[str, Any] | None, desired: dict[str, Any]) -> bool:
    """Whether ``live`` is what applying ``desired`` would leave: Shoal's last apply was
    this very intent, and nobody has changed a field of it since."""
    return live is not None and last_applied(live) == digest(desired) and holds(live, desired)
