"""The merge patch a status write sends: it must turn the live status into the new one
at every depth, since a JSON merge patch keeps any nested key it does not null."""

from __future__ import annotations

from typing import Any

from shoal.reconcile.status import status_patch


def merged(target: Any, patch: Any) -> Any:
    """RFC 7386, as the API server applies a merge patch."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merged(out.get(key), value)
    return out


def test_a_nested_key_the_new_status_lacks_is_removed() -> None:
    live = {
        "observedGeneration": 3,
        "capacity": {"mode": "HardQuota", "nominalGpus": 4},
        "gateway": {"http": "http://gw:8000", "replicas": 2},
    }
    new = {"observedGeneration": 4, "capacity": {"mode": "HardQuota"}}
    patch = status_patch(live, new)
    assert patch is not None
    assert merged(live, patch) == new


def test_equal_statuses_need_no_write_and_a_null_is_no_key() -> None:
    live = {"capacity": {"mode": "Kueue", "nominalGpus": 2}, "conditions": [{"type": "Ready"}]}
    assert status_patch(live, {**live}) is None
    assert status_patch({**live, "gateway": None}, live) is None
    assert status_patch(None, {}) is None


def test_lists_are_replaced_whole() -> None:
    live = {"admittedNamespaces": ["a", "b"], "conditions": [{"type": "Ready", "status": "True"}]}
    new = {"admittedNamespaces": ["a"], "conditions": [{"type": "Ready", "status": "False"}]}
    patch = status_patch(live, new)
    assert merged(live, patch) == new
