"""A pool's elastic capacity as Kueue objects, the figures read back from Kueue's
ClusterQueue statuses, and a model's replicas that wait for quota."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from prometheus_client import REGISTRY

from shoal.api.conditions import Cond
from shoal.api.constants import KUEUE_ADMISSION_GATE, KUEUE_QUEUE_LABEL
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.kube.client import ApiError
from shoal.kube.kueue import KueueProbe
from shoal.reconcile.model import SCALED_TO_ZERO, rollout_outcome, scaled_to_zero
from shoal.reconcile.pool import parsed_pools
from shoal.reconcile.replica_state import WAITING_FOR_QUOTA, replica_state
from shoal.render.batching import effective_batching
from shoal.render.desired import batched_model_objects, model_objects
from shoal.render.elastic import (
    NO_NAMESPACE,
    Holding,
    Nominal,
    capacity_figures,
    cluster_queue,
    elastic_objects,
    gpu_ceiling,
    model_gpu_ceilings,
    model_queue,
    next_capacity_change,
    nominal_at,
    parked,
    resource_flavor,
    warm_pool_gpus,
)
from shoal.render.pool_plan import cohort_of, next_pool_change
from shoal.render.workload import GPU
from shoal.telemetry import PoolGauges
from tests.support.resources import example


def pool(name: str, capacity: dict[str, Any] | None, source: str = "critical") -> TenantPool:
    doc = example("TenantPool", source)
    doc["metadata"] = {"name": name, "uid": f"uid-{name}"}
    if capacity is not None:
        doc["spec"]["capacity"] = capacity
    return TenantPool.model_validate(doc)


def gpu_quota(queue: dict[str, Any], flavor: str) -> dict[str, Any]:
    group = queue["spec"]["resourceGroups"][0]
    found = next(f for f in group["flavors"] if f["name"] == flavor)
    return next(r for r in found["resources"] if r["name"] == GPU)


def test_a_flavor_carries_the_pools_placement() -> None:
    flavor = resource_flavor(pool("critical", {"gpus": 4}))
    assert flavor["metadata"]["name"] == "shoal-critical"
    assert flavor["spec"]["nodeLabels"] == {
        "shoal.dev/node-group": "dedicated-gpu",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    }
    assert flavor["spec"]["tolerations"] == [
        {"key": "shoal.dev/dedicated", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ]
    assert flavor["metadata"]["ownerReferences"][0]["uid"] == "uid-critical"


def test_a_pool_borrows_every_other_flavor_of_its_cohort_and_lends_its_own() -> None:
    cap = {"gpus": 4, "cohort": "gpu", "weight": 3, "borrowingLimit": 2, "lendingLimit": 1}
    me = pool("me", cap)
    others = [
        pool("zeta", {"gpus": 2, "cohort": "gpu"}),
        pool("alpha", {"gpus": 8, "cohort": "gpu"}),
    ]
    queue = cluster_queue(me, [me, *others], ["team-b", "team-a"], Nominal(4))
    flavors = [f["name"] for f in queue["spec"]["resourceGroups"][0]["flavors"]]
    # Its own GPUs first (Kueue tries flavors in order), then the lenders', by name.
    assert flavors == ["shoal-me", "shoal-alpha", "shoal-zeta"]
    assert gpu_quota(queue, "shoal-me") == {
        "name": GPU,
        "nominalQuota": "4",
        "borrowingLimit": "2",
        "lendingLimit": "1",
    }
    # A lender's flavor: nothing of its own, at most the borrowing limit, nothing to lend.
    assert gpu_quota(queue, "shoal-alpha") == {
        "name": GPU,
        "nominalQuota": "0",
        "borrowingLimit": "2",
    }
    assert queue["spec"]["cohortName"] == "gpu"
    assert queue["spec"]["fairSharing"] == {"weight": "3"}
    assert queue["spec"]["preemption"]["reclaimWithinCohort"] == "Any"
    assert queue["spec"]["preemption"]["borrowWithinCohort"] == {"policy": "Never"}
    selector = queue["spec"]["namespaceSelector"]["matchExpressions"][0]
    assert selector["operator"] == "In"
    assert selector["values"] == ["team-a", "team-b"]


def test_a_pool_without_a_cohort_neither_borrows_nor_lends() -> None:
    me = pool("alone", {"gpus": 3})
    queue = cluster_queue(me, [me, pool("other", {"gpus": 2, "cohort": "gpu"})], [], Nominal(3))
    assert [f["name"] for f in queue["spec"]["resourceGroups"][0]["flavors"]] == ["shoal-alone"]
    assert gpu_quota(queue, "shoal-alone") == {"name": GPU, "nominalQuota": "3"}
    assert "cohortName" not in queue["spec"]
    assert "fairSharing" not in queue["spec"]
    # It admits no namespace yet: not every namespace.
    assert queue["spec"]["namespaceSelector"] == NO_NAMESPACE


def test_every_admitted_namespace_gets_a_local_queue_after_the_flavor_and_queue() -> None:
    me = pool("me", {"gpus": 1})
    objs = elastic_objects(me, [me], ["b", "a"], Nominal(1))
    assert [(o["kind"], o["metadata"].get("namespace")) for o in objs] == [
        ("ResourceFlavor", None),
        ("ClusterQueue", None),
        ("LocalQueue", "a"),
        ("LocalQueue", "b"),
    ]
    assert objs[2]["spec"] == {"clusterQueue": "shoal-me"}


def usage(name: str, flavors: dict[str, tuple[str, str]], pending: int = 0) -> dict[str, Any]:
    """A ClusterQueue's status as Kueue writes it: per flavor, GPUs total and borrowed."""
    return {
        "metadata": {"name": name},
        "status": {
            "pendingWorkloads": pending,
            "flavorsUsage": [
                {
                    "name": flavor,
                    "resources": [
                        {"name": "cpu", "total": "2", "borrowed": "0"},
                        {"name": GPU, "total": total, "borrowed": borrowed},
                    ],
                }
                for flavor, (total, borrowed) in flavors.items()
            ],
        },
    }


def test_figures_count_gpus_in_use_borrowed_lent_and_replicas_waiting() -> None:
    queues = [
        usage("shoal-lender", {"shoal-lender": ("1", "0"), "shoal-borrower": ("0", "0")}),
        usage(
            "shoal-borrower",
            {"shoal-borrower": ("2", "0"), "shoal-lender": ("3", "3")},
            pending=2,
        ),
        usage("shoal-third", {"shoal-third": ("0", "0"), "shoal-lender": ("1", "1")}),
    ]
    assert capacity_figures("borrower", queues) == {
        "inUseGpus": 5,
        "borrowedGpus": 3,
        "lentGpus": 0,
        "waitingReplicas": 2,
    }
    assert capacity_figures("lender", queues) == {
        "inUseGpus": 1,
        "borrowedGpus": 0,
        "lentGpus": 4,
        "waitingReplicas": 0,
    }
    # A ClusterQueue Kueue has not reported on yet counts nothing.
    assert capacity_figures("new", [{"metadata": {"name": "shoal-new"}}]) == {
        "inUseGpus": 0,
        "borrowedGpus": 0,
        "lentGpus": 0,
        "waitingReplicas": 0,
    }


def test_a_models_pods_name_a_queue_only_where_kueue_serves_the_pool() -> None:
    elastic, fixed = pool("e", {"gpus": 2}), pool("f", None)
    assert model_queue(elastic, kueue_served=lambda: True) == "shoal-e"
    assert model_queue(elastic, kueue_served=lambda: False) is None

    def unasked() -> bool:
        raise AssertionError("Kueue asked about for a pool without spec.capacity")

    assert model_queue(fixed, kueue_served=unasked) is None


def test_a_cohort_is_the_live_pools_that_name_it() -> None:
    me = pool("me", {"gpus": 2, "cohort": "gpu"})

    def body(name: str, capacity: dict[str, Any] | None, deleting: bool = False) -> dict[str, Any]:
        doc = example("TenantPool", "critical")
        doc["metadata"] = {"name": name}
        if deleting:
            doc["metadata"]["deletionTimestamp"] = "2026-12-01T00:00:00Z"
        if capacity is not None:
            doc["spec"]["capacity"] = capacity
        return doc

    bodies = [
        body("me", {"gpus": 2, "cohort": "gpu"}),
        body("peer", {"gpus": 4, "cohort": "gpu"}),
        body("elsewhere", {"gpus": 4, "cohort": "cpu"}),
        body("fixed", None),
        body("leaving", {"gpus": 4, "cohort": "gpu"}, deleting=True),
        body("broken", {"gpus": -1, "cohort": "gpu"}),
    ]
    parsed = parsed_pools(bodies)
    assert sorted(p.metadata.name for p, _ in parsed) == [
        "elsewhere",
        "fixed",
        "leaving",
        "me",
        "peer",
    ]
    live = [p for p, deleting in parsed if not deleting]
    assert sorted(p.metadata.name for p in cohort_of(me, live)) == ["me", "peer"]
    assert [p.metadata.name for p in cohort_of(pool("solo", {"gpus": 1}), live)] == ["solo"]


class Discovery:
    """The API server's discovery answer for Kueue's group, counted."""

    def __init__(self, status: int | None) -> None:
        self.status = status
        self.calls = 0

    def get_path(self, path: str) -> dict[str, Any]:
        self.calls += 1
        assert path == "/apis/kueue.x-k8s.io/v1beta2"
        if self.status is not None:
            raise ApiError(status=self.status, reason="discovery")
        return {"resources": [{"kind": "ClusterQueue"}, {"kind": "LocalQueue"}]}


def test_the_kueue_probe_asks_once_per_ttl() -> None:
    now = [0.0]
    probe = KueueProbe(ttl=10, clock=lambda: now[0])
    served = Discovery(None)
    assert probe.served(served)  # type: ignore[arg-type]
    assert probe.served(served)  # type: ignore[arg-type]
    assert served.calls == 1
    gone = Discovery(404)
    now[0] = 11
    assert not probe.served(gone)  # type: ignore[arg-type]
    assert gone.calls == 1


def test_the_kueue_probe_raises_what_it_cannot_read_as_absent() -> None:
    with pytest.raises(ApiError):
        KueueProbe().served(Discovery(500))  # type: ignore[arg-type]


def test_a_pod_kueue_holds_waits_for_quota() -> None:
    held = {
        "metadata": {"name": "m-1", "labels": {KUEUE_QUEUE_LABEL: "shoal-shared"}},
        "spec": {"schedulingGates": [{"name": KUEUE_ADMISSION_GATE}]},
        "status": {"phase": "Pending"},
    }
    state = replica_state(held)
    assert state.state == WAITING_FOR_QUOTA
    assert "shoal-shared" in state.message
    other_gate = {**held, "spec": {"schedulingGates": [{"name": "example.com/other"}]}}
    assert replica_state(other_gate).state != WAITING_FOR_QUOTA


def test_a_queued_models_pods_name_the_queue_and_leave_placement_to_the_flavor() -> None:
    model = InferenceModel.model_validate(example("InferenceModel", "search-ranker"))
    critical = pool("critical", {"gpus": 4})
    plain = next(o for o in model_objects(model, None, critical) if o["kind"] == "Deployment")
    queued = next(
        o
        for o in model_objects(model, None, critical, queue="shoal-critical")
        if o["kind"] == "Deployment"
    )
    template, pod = queued["spec"]["template"], queued["spec"]["template"]["spec"]
    assert template["metadata"]["labels"][KUEUE_QUEUE_LABEL] == "shoal-critical"
    assert KUEUE_QUEUE_LABEL not in plain["spec"]["template"]["metadata"]["labels"]
    assert plain["spec"]["template"]["spec"]["nodeSelector"]["shoal.dev/node-group"] == (
        "dedicated-gpu"
    )
    assert "nodeSelector" not in pod or not pod["nodeSelector"]
    # Only the GPU taint's toleration stays: the flavor brings the pool's own.
    assert [t["key"] for t in pod.get("tolerations", [])] == [GPU]


def series(name: str) -> dict[tuple[tuple[str, str], ...], float]:
    out = {}
    for family in REGISTRY.collect():
        for sample in family.samples:
            if sample.name == name:
                out[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_an_elastic_pools_figures_are_gauges_that_go_when_it_does() -> None:
    gauges = PoolGauges()
    figures = {
        "mode": "Kueue",
        "nominalGpus": 4,
        "inUseGpus": 1,
        "borrowedGpus": 0,
        "lentGpus": 3,
        "waitingReplicas": 2,
    }
    gauges.publish("gauge-pool", "Dedicated", figures)
    lent = (("isolation", "Dedicated"), ("kind", "lent"), ("tenantpool", "gauge-pool"))
    assert series("shoal_pool_gpus")[lent] == 3
    waiting = (("isolation", "Dedicated"), ("tenantpool", "gauge-pool"))
    assert series("shoal_pool_waiting_replicas")[waiting] == 2
    # Isolation changed: the old series go, the new ones come.
    gauges.publish("gauge-pool", "Shared", figures)
    assert lent not in series("shoal_pool_gpus")
    assert series("shoal_pool_gpus")[(("isolation", "Shared"), *lent[1:])] == 3
    # No longer elastic (hard quotas), then gone: nothing of the pool is left.
    gauges.publish("gauge-pool", "Shared", {"mode": "HardQuota", "nominalGpus": 4})
    assert not [k for k in series("shoal_pool_gpus") if ("tenantpool", "gauge-pool") in k]
    gauges.publish("gauge-pool", "Shared", figures)
    gauges.forget("gauge-pool")
    assert not [k for k in series("shoal_pool_gpus") if ("tenantpool", "gauge-pool") in k]
    assert not [
        k for k in series("shoal_pool_waiting_replicas") if ("tenantpool", "gauge-pool") in k
    ]


# ------------------------------------------------------------------ capacity windows
NIGHT = {"name": "night", "start": "0 22 * * *", "duration": "8h", "gpus": 1}
PEAK = {"name": "peak", "start": "0 9 * * 1-5", "duration": "9h", "gpus": 6}


def at(text: str) -> dt.datetime:
    return dt.datetime.fromisoformat(text).replace(tzinfo=dt.UTC)


def test_the_first_open_window_sets_the_nominal_gpus() -> None:
    capacity = pool("p", {"gpus": 4, "windows": [NIGHT, PEAK]}).spec.capacity
    assert capacity is not None
    assert nominal_at(capacity, at("2026-12-02T23:00:00")) == Nominal(1, "night")
    assert nominal_at(capacity, at("2026-12-03T05:59:59")) == Nominal(1, "night")
    assert nominal_at(capacity, at("2026-12-03T06:00:00")) == Nominal(4)  # night closed
    assert nominal_at(capacity, at("2026-12-02T10:00:00")) == Nominal(6, "peak")  # Wednesday
    assert nominal_at(capacity, at("2026-12-05T10:00:00")) == Nominal(4)  # Saturday
    # Overlapping windows: the first listed wins.
    overlap = pool("p", {"gpus": 4, "windows": [{**NIGHT, "start": "0 9 * * *"}, PEAK]})
    assert overlap.spec.capacity is not None
    assert nominal_at(overlap.spec.capacity, at("2026-12-02T10:00:00")) == Nominal(1, "night")


def test_the_pool_looks_again_when_a_window_opens_or_closes() -> None:
    capacity = pool("p", {"gpus": 4, "windows": [NIGHT]}).spec.capacity
    assert next_capacity_change(capacity, at("2026-12-02T12:00:00")) == at("2026-12-02T22:00:00")
    assert next_capacity_change(capacity, at("2026-12-02T22:00:00")) == at("2026-12-03T06:00:00")
    assert next_capacity_change(pool("p", {"gpus": 4}).spec.capacity, at("2026-12-02")) is None
    assert next_capacity_change(None, at("2026-12-02")) is None


def test_a_window_sets_the_queues_quota_and_lends_at_most_what_it_has() -> None:
    me = pool("me", {"gpus": 4, "cohort": "gpu", "lendingLimit": 3, "windows": [NIGHT]})
    queue = cluster_queue(me, [me], [], Nominal(1, "night"))
    assert gpu_quota(queue, "shoal-me") == {"name": GPU, "nominalQuota": "1", "lendingLimit": "1"}
    queue = cluster_queue(me, [me], [], Nominal(4))
    assert gpu_quota(queue, "shoal-me")["lendingLimit"] == "3"


def test_a_pool_without_a_cohort_caps_its_models_at_its_gpus_now() -> None:
    alone = pool("alone", {"gpus": 4, "windows": [NIGHT]})
    assert gpu_ceiling(alone, at("2026-12-02T12:00:00")) == 4
    assert gpu_ceiling(alone, at("2026-12-02T23:00:00")) == 1
    # A pool that borrows has no ceiling of its own; one without capacity neither.
    assert gpu_ceiling(pool("b", {"gpus": 4, "cohort": "gpu"}), at("2026-12-02")) is None
    assert gpu_ceiling(pool("c", None), at("2026-12-02")) is None


def test_each_model_of_a_pool_without_a_cohort_stops_at_its_share() -> None:
    # A warm pool of 3 replicas of 2 GPUs holds 6; the API's defaults hold 1.
    assert warm_pool_gpus({"scaling": {"minReplicas": 3}, "runtime": {"gpus": 2}}) == 6
    assert warm_pool_gpus({}) == 1
    assert warm_pool_gpus({"runtime": {"gpus": 0}}) == 0
    a, b = ("ns", "a"), ("ns", "b")
    # Within the quota: each may grow into all but the other's warm pool.
    assert model_gpu_ceilings(4, [Holding(a, 1, 1), Holding(b, 3, 3)]) == {a: 1, b: 3}
    assert model_gpu_ceilings(4, [Holding(a, 1, 0)]) == {a: 4}
    # A window of 2 GPUs under warm pools of 1 and 3: a's share is none (its HPA keeps
    # one replica), b's 1; nothing is above a warm pool to give back.
    assert model_gpu_ceilings(2, [Holding(a, 1, 1), Holding(b, 3, 3)]) == {a: 0, b: 1}


def test_models_above_their_warm_pools_give_back_what_a_window_takes() -> None:
    a, b = ("ns", "a"), ("ns", "b")
    # Both grew to 2 on warm pools of 1; a window of 3: each one's share (3 - 1 = 2)
    # would keep all 4. One GPU goes back, from the first by name on a tie.
    assert model_gpu_ceilings(3, [Holding(b, 1, 2), Holding(a, 1, 2)]) == {a: 1, b: 2}
    # In proportion to what each holds above its warm pool (4 and 2 of an excess of 2:
    # 1.33 and 0.67), largest remainders first: 1 each, 6 in all.
    assert model_gpu_ceilings(6, [Holding(a, 1, 5), Holding(b, 1, 3)]) == {a: 4, b: 2}
    # Never below its warm pool: a gives back 2, b (at its warm pool) nothing.
    assert model_gpu_ceilings(2, [Holding(a, 1, 3), Holding(b, 1, 1)]) == {a: 1, b: 1}
    # Whatever the split, the models come down to the quota exactly, where it holds
    # their warm pools (3 GPUs here) and they hold more (11).
    held = [Holding(a, 1, 4), Holding(b, 2, 5), Holding(("ns", "c"), 0, 2)]
    for quota in range(3, 11):
        assert sum(model_gpu_ceilings(quota, held).values()) == quota, quota


def _hpa(min_replicas: int, gpus: int, ceiling: int | None) -> dict[str, Any]:
    doc = example("InferenceModel", "labs-embedder")
    doc["metadata"]["namespace"] = "team-a"
    doc["spec"]["runtime"]["gpus"] = gpus
    doc["spec"]["scaling"] = {"minReplicas": min_replicas, "maxReplicas": 8}
    im = InferenceModel.model_validate(doc)
    tp = pool("p", {"gpus": 16})
    objs = batched_model_objects(im, effective_batching(im, None), tp, gpu_ceiling=ceiling)
    return next(o for o in objs if o["kind"] == "HorizontalPodAutoscaler")["spec"]


def test_the_hpa_stops_at_the_gpus_the_pool_can_admit() -> None:
    assert (_hpa(4, 1, None)["minReplicas"], _hpa(4, 1, None)["maxReplicas"]) == (4, 8)
    # A window of 2 GPUs: the warm pool of 4 and the maximum of 8 both come down to 2.
    assert (_hpa(4, 1, 2)["minReplicas"], _hpa(4, 1, 2)["maxReplicas"]) == (2, 2)
    # Two GPUs a replica in 5: two replicas; at 0 GPUs one stays, waiting for quota.
    assert _hpa(1, 2, 5)["maxReplicas"] == 2
    assert (_hpa(1, 1, 0)["minReplicas"], _hpa(1, 1, 0)["maxReplicas"]) == (1, 1)


def test_a_model_is_parked_only_when_not_one_replica_fits_the_pool() -> None:
    assert parked(0, 1)
    assert parked(1, 2)
    assert not parked(1, 1)
    assert not parked(4, 2)
    # A model without GPUs is never parked by a GPU window.
    assert not parked(0, 0)


def _deployment(parked_now: bool) -> dict[str, Any]:
    doc = example("InferenceModel", "labs-embedder")
    doc["metadata"]["namespace"] = "team-a"
    im = InferenceModel.model_validate(doc)
    objs = batched_model_objects(
        im, effective_batching(im, None), pool("p", {"gpus": 0}), parked=parked_now
    )
    return next(o for o in objs if o["kind"] == "Deployment")["spec"]


def test_a_parked_model_has_zero_replicas_and_otherwise_leaves_them_to_the_hpa() -> None:
    assert _deployment(True)["replicas"] == 0
    assert "replicas" not in _deployment(False)
    # Everything else is the same Deployment: unparking changes only the replicas.
    assert {**_deployment(True), "replicas": None} == {**_deployment(False), "replicas": None}


def test_a_parked_model_says_which_window_and_does_not_warn_about_its_hpa() -> None:
    night = {**NIGHT, "gpus": 0}
    tp = pool("p", {"gpus": 4, "windows": [night]})
    rollout = rollout_outcome({"metadata": {"generation": 2}, "status": {}}, 1)
    outcome = scaled_to_zero(rollout, tp, 1, at("2026-12-02T23:00:00"))
    assert (outcome.ready.status, outcome.ready.reason) == ("False", SCALED_TO_ZERO)
    assert "capacity window night gives it 0 GPUs" in outcome.ready.message
    assert outcome.autoscaler == Cond(
        "AutoscalerReady", "Unknown", SCALED_TO_ZERO, outcome.ready.message
    )
    assert not outcome.stalled
    # Outside a window: the pool's own capacity is what leaves it none.
    outcome = scaled_to_zero(rollout, pool("p", {"gpus": 0}), 1, at("2026-12-02T12:00:00"))
    assert "pool's capacity gives it 0 GPUs" in outcome.ready.message


def test_the_pool_wakes_for_its_gateways_windows_and_its_capacitys_alike() -> None:
    doc = example("TenantPool", "critical")
    doc["metadata"] = {"name": "p"}
    doc["spec"]["capacity"] = {"gpus": 4, "windows": [NIGHT]}
    doc["spec"]["gateway"] = {
        "windows": [
            {"name": "lunch", "start": "0 12 * * *", "duration": "1h", "limits": {"concurrency": 2}}
        ]
    }
    both = TenantPool.model_validate(doc)
    assert next_pool_change(both, at("2026-12-02T11:00:00")) == at("2026-12-02T12:00:00")
    assert next_pool_change(both, at("2026-12-02T13:30:00")) == at("2026-12-02T22:00:00")
    # A disabled gateway's windows change nothing.
    doc["spec"]["gateway"]["enabled"] = False
    assert next_pool_change(TenantPool.model_validate(doc), at("2026-12-02T11:00:00")) == at(
        "2026-12-02T22:00:00"
    )
    doc["spec"].pop("capacity")
    assert next_pool_change(TenantPool.model_validate(doc), at("2026-12-02T11:00:00")) is None
