"""Which replicas a pool in a cohort drains after a window lowered its quota: those
Kueue admitted on its own flavor, beyond the quota, as far as the cohort has room for
their replacements."""

from __future__ import annotations

from typing import Any

from shoal.api.constants import KUEUE_ADMISSION_GATE, MODEL_LABEL
from shoal.api.tenantpool import TenantPool
from shoal.render.elastic import Nominal
from shoal.render.quota_drain import (
    admitted_flavors,
    own_flavor_excess,
    pods_to_drain,
    room_to_borrow,
)
from shoal.render.workload import GPU
from tests.support.resources import example


def pool(name: str, capacity: dict[str, Any]) -> TenantPool:
    doc = example("TenantPool", "critical")
    doc["metadata"] = {"name": name, "uid": f"uid-{name}"}
    doc["spec"]["capacity"] = capacity
    return TenantPool.model_validate(doc)


def queue(name: str, usage: dict[str, int]) -> dict[str, Any]:
    """A ClusterQueue's status as Kueue writes it: GPUs in use per flavor."""
    return {
        "metadata": {"name": name},
        "status": {
            "flavorsUsage": [
                {"name": flavor, "resources": [{"name": GPU, "total": str(gpus)}]}
                for flavor, gpus in usage.items()
            ]
        },
    }


def test_the_excess_is_what_the_pools_own_flavor_holds_beyond_its_quota() -> None:
    queues = [queue("shoal-me", {"shoal-me": 4, "shoal-lender": 1})]
    assert own_flavor_excess("me", 2, queues) == 2
    assert own_flavor_excess("me", 4, queues) == 0
    assert own_flavor_excess("me", 6, queues) == 0
    assert own_flavor_excess("gone", 0, queues) == 0  # Kueue has not reported on it


def test_room_is_the_lenders_idle_gpus_within_both_limits() -> None:
    me = pool("me", {"gpus": 4, "cohort": "gpu"})
    lender = pool("lender", {"gpus": 4, "cohort": "gpu"})
    third = pool("third", {"gpus": 2, "cohort": "gpu"})
    lenders = {
        "me": (me, Nominal(2, "night")),
        "lender": (lender, Nominal(4)),
        "third": (third, Nominal(2)),
    }
    queues = [
        queue("shoal-me", {"shoal-me": 4}),
        queue("shoal-lender", {"shoal-lender": 1}),
        queue("shoal-third", {"shoal-third": 2}),
    ]
    # The lender uses 1 of its 4; the third all of its 2; the pool's own flavor is no room.
    assert room_to_borrow(me, lenders, queues) == 3
    # Another pool already borrows one of the lender's; the lender lends at most 2.
    busy = [*queues[:2], queue("shoal-third", {"shoal-third": 2, "shoal-lender": 1})]
    assert room_to_borrow(me, lenders, busy) == 2
    limited = pool("lender", {"gpus": 4, "cohort": "gpu", "lendingLimit": 2})
    assert room_to_borrow(me, {**lenders, "lender": (limited, Nominal(4))}, busy) == 1
    # The pool may borrow at most 1 from each lender, and already does from the lender.
    capped = pool("me", {"gpus": 4, "cohort": "gpu", "borrowingLimit": 1})
    mine = [queue("shoal-me", {"shoal-me": 4, "shoal-lender": 1}), *queues[1:]]
    assert room_to_borrow(capped, lenders, mine) == 0


def workload(pod_uid: str, flavor: str | None) -> dict[str, Any]:
    status: dict[str, Any] = {}
    if flavor is not None:
        status["admission"] = {"podSetAssignments": [{"flavors": {GPU: flavor, "cpu": "x"}}]}
    return {
        "metadata": {"ownerReferences": [{"kind": "Pod", "uid": pod_uid}]},
        "status": status,
    }


def replica(
    name: str, created: str, model: str = "m", ready: bool = True, gpus: int = 1, **extra: Any
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "uid": f"uid-{name}",
            "namespace": "team-a",
            "creationTimestamp": created,
            "labels": {MODEL_LABEL: model},
            **extra.pop("metadata", {}),
        },
        "spec": {"containers": [{"resources": {"requests": {GPU: str(gpus)}}}], **extra},
        "status": {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        },
    }


def test_the_flavor_is_kueues_record_of_the_admission() -> None:
    flavors = admitted_flavors(
        [workload("a", "shoal-me"), workload("b", "shoal-lender"), workload("c", None)]
    )
    assert flavors == {"a": "shoal-me", "b": "shoal-lender"}


def names(pods: list[dict[str, Any]]) -> list[str]:
    return [p["metadata"]["name"] for p in pods]


def test_drained_first_are_the_not_ready_then_replicas_with_company_newest_first() -> None:
    pods = [
        replica("old", "2026-12-02T00:00:00Z"),
        replica("new", "2026-12-02T00:05:00Z"),
        replica("starting", "2026-12-01T00:00:00Z", ready=False),
        replica("single", "2026-12-02T00:09:00Z", model="alone"),
        replica("borrowed", "2026-12-02T00:09:00Z"),
        replica("gated", "2026-12-02T00:09:00Z", schedulingGates=[{"name": KUEUE_ADMISSION_GATE}]),
    ]
    flavors = {f"uid-{p['metadata']['name']}": "shoal-me" for p in pods}
    flavors["uid-borrowed"] = "shoal-lender"  # on a lender's GPUs: not the pool's own
    # Own GPUs held: old, new, starting, single (4); at a quota of 1, three go.
    assert names(pods_to_drain("me", pods, flavors, 1, room=8)) == ["starting", "new", "old"]
    # No more than the cohort has room for.
    assert names(pods_to_drain("me", pods, flavors, 1, room=1)) == ["starting"]
    assert pods_to_drain("me", pods, flavors, 1, room=0) == []
    # A model's only replica goes last.
    assert names(pods_to_drain("me", pods, flavors, 0, room=8))[-1] == "single"
    # A replica already terminating is gone for the count, and is not evicted again.
    pods[2]["metadata"]["deletionTimestamp"] = "2026-12-02T00:10:00Z"
    assert names(pods_to_drain("me", pods, flavors, 2, room=8)) == ["new"]
    assert pods_to_drain("me", pods, flavors, 4, room=8) == []


def test_a_replica_needing_more_room_than_is_left_stays() -> None:
    pods = [
        replica("big", "2026-12-02T00:07:00Z", gpus=2),
        replica("small", "2026-12-02T00:00:00Z"),
        replica("other", "2026-12-02T00:01:00Z", model="n"),
        replica("finished", "2026-12-02T00:08:00Z"),
    ]
    pods[3]["status"]["phase"] = "Failed"
    flavors = {f"uid-{p['metadata']['name']}": "shoal-me" for p in pods}
    # Four own GPUs held (the failed pod holds none), quota 2: the newest, two GPUs, goes.
    assert names(pods_to_drain("me", pods, flavors, 2, room=2)) == ["big"]
    # With room for one GPU only, the two-GPU replica stays; a one-GPU one goes.
    assert names(pods_to_drain("me", pods, flavors, 2, room=1)) == ["small"]
