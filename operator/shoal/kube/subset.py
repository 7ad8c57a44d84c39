"""Whether a live object already holds everything a desired object says (pure)."""

from __future__ import annotations

from typing import Any


def contains(live: Any, desired: Any) -> bool:
    """True when every field set in ``desired`` has the same value in ``live``.

    Fields the server added (defaults, status, other managers' fields) are ignored;
    list items are compared in order, each as a subset, and lists must be equally long
    (a removed item is a difference). This lets a resync skip the write entirely when
    nothing drifted.
    """
    if isinstance(desired, dict):
        if not isinstance(live, dict):
            return False
        return all(key in live and contains(live[key], value) for key, value in desired.items())
    if isinstance(desired, list):
        if not isinstance(live, list) or len(live) != len(desired):
            return False
        return all(contains(lv, dv) for lv, dv in zip(live, desired, strict=True))
    return bool(live == desired)
