"""Reading a Pod's readiness (pure): one definition for every part that asks."""

from __future__ import annotations

from typing import Any


def ready_condition(pod: dict[str, Any]) -> dict[str, Any] | None:
    """The pod's ``Ready`` condition when it is True (its ``lastTransitionTime`` says
    since when); None while the pod is not ready."""
    for cond in (pod.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") == "True":
            return dict(cond)
    return None


def is_ready(pod: dict[str, Any]) -> bool:
    return ready_condition(pod) is not None
