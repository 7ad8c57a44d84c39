"""Conditions in the Kubernetes API conventions shape (pure functions)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Cond:
    """A condition as a reconciler decides it, before timestamps."""

    type: str
    status: str  # "True" | "False" | "Unknown"
    reason: str
    message: str


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def merge_conditions(
    existing: list[dict[str, Any]], wanted: list[Cond], generation: int | None, now: str
) -> list[dict[str, Any]]:
    """The new conditions list: lastTransitionTime moves only when a status changes."""
    previous = {c.get("type"): c for c in existing or []}
    out = []
    for cond in wanted:
        before = previous.get(cond.type)
        since = now
        if before is not None and before.get("status") == cond.status:
            since = before.get("lastTransitionTime", now)
        entry: dict[str, Any] = {
            "type": cond.type,
            "status": cond.status,
            "reason": cond.reason,
            "message": cond.message,
            "lastTransitionTime": since,
        }
        if generation is not None:
            entry["observedGeneration"] = generation
        out.append(entry)
    return out


def condition(status: dict[str, Any] | None, type_: str) -> dict[str, Any] | None:
    for cond in (status or {}).get("conditions", []) or []:
        if cond.get("type") == type_:
            return dict(cond)
    return None
