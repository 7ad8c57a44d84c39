"""The merge patch a status write sends: it must turn the live status into the new one
at every depth, since a JSON merge patch keeps any nested key it does not null."""

from __future__ import annotations

from typing import Any, cast

import pytest
from pydantic import ValidationError

from shoal.cache import Cache
from shoal.kube.client import Kube
from shoal.reconcile.status import status_patch, write_status


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


class _Refusing:
    """A Kube that fails the test if a status write reaches it."""

    def patch_status(self, body: Any, patch: Any) -> Any:
        raise AssertionError(f"a status write was sent: {patch}")


def test_a_status_key_its_model_lacks_is_refused_before_it_is_written() -> None:
    body = {"kind": "TenantPool", "metadata": {"name": "p", "generation": 1}, "status": {}}
    for wrong in ({"gpusUsd": 1}, {"gpusUsed": "one"}, {"capacity": {"mode": "Elastic"}}):
        with pytest.raises(ValidationError):
            write_status(cast(Kube, _Refusing()), Cache(), body, wrong)
