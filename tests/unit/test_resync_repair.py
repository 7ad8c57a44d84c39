"""The periodic resync makes the cache agree with a listing of the custom resources,
and the operator's wakeups at window boundaries (pure state, a stand-in API for GETs:
the real watch-and-list race is what tests/chaos exercises)."""

from __future__ import annotations

import datetime as dt
from typing import Any, cast

from shoal.cache import Cache
from shoal.kube.client import Kube
from shoal.resync import _repair
from shoal.settings import Settings
from shoal.state import Operator
from shoal.verified import Verified


class ApiServer:
    """What a GET of an InferenceModel answers; records the reads."""

    def __init__(self, objects: dict[str, dict[str, Any]]) -> None:
        self.objects = objects
        self.reads: list[str] = []

    def get(self, api_version: str, kind: str, name: str, namespace: str | None = None) -> Any:
        self.reads.append(name)
        return self.objects.get(name)


def model(name: str, uid: str, rv: str) -> dict[str, Any]:
    return {
        "apiVersion": "shoal.dev/v1alpha1",
        "kind": "InferenceModel",
        "metadata": {"name": name, "namespace": "ns", "uid": uid, "resourceVersion": rv},
        "spec": {"pool": "p"},
    }


def operator(api: ApiServer) -> Operator:
    cache = Cache()
    return Operator(Settings(), cast(Kube, api), cache, Verified(cache), None)


def listing(*bodies: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"metadata": dict(b["metadata"])} for b in bodies]


def test_a_model_created_after_the_listing_stays_in_the_cache() -> None:
    new = model("new", "u-new", "20")
    op = operator(ApiServer({"new": new}))
    op.cache.put("InferenceModel", new)  # the watch delivered it; the listing predates it
    _repair(op, "InferenceModel", listing())
    assert op.cache.get("InferenceModel", "new", "ns") is not None
    # Nor is it buried: its next watch event is taken.
    assert op.cache.put(
        "InferenceModel",
        {**new, "spec": {"pool": "q"}, "metadata": {**new["metadata"], "resourceVersion": "21"}},
    )


def test_a_model_whose_deletion_never_came_is_dropped_once_a_read_confirms_it() -> None:
    gone = model("gone", "u-gone", "7")
    api = ApiServer({})
    op = operator(api)
    op.cache.put("InferenceModel", gone)
    _repair(op, "InferenceModel", listing())
    assert op.cache.get("InferenceModel", "gone", "ns") is None
    assert api.reads == ["gone"]
    assert op.cache.buried("InferenceModel", gone)  # a late reply cannot bring it back


def test_a_listed_model_the_cache_lacks_is_read() -> None:
    missed = model("missed", "u-m", "3")
    op = operator(ApiServer({"missed": missed}))
    _repair(op, "InferenceModel", listing(missed))
    assert op.cache.get("InferenceModel", "missed", "ns") is not None


def test_due_wakeups_are_forgotten_after_a_resync_and_later_ones_kept() -> None:
    op = operator(ApiServer({}))
    now = dt.datetime.now(dt.UTC)
    op.set_wakeup("TenantPool", "due", now - dt.timedelta(seconds=1))
    op.set_wakeup("InferenceModel", "later", now + dt.timedelta(hours=1), "ns")
    assert op.seconds_to_next_wakeup() == 0.0  # the resync loop would run at once
    op.forget_due_wakeups()
    left = op.seconds_to_next_wakeup()
    assert left is not None
    assert 3500 < left <= 3600
