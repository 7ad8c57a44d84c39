"""Pure parts of the reconcilers: drift detection, conditions, rollout reading."""

from __future__ import annotations

from typing import Any

from shoal.kube.subset import contains
from shoal.reconcile.conditions import Cond, merge_conditions
from shoal.reconcile.model import pod_problem, rollout_outcome
from shoal.reconcile.pool import pool_usage


def test_contains_ignores_server_added_fields_but_not_changes() -> None:
    desired = {"spec": {"ports": [{"name": "http", "port": 8000}], "type": "ClusterIP"}}
    live = {
        "metadata": {"resourceVersion": "7"},
        "spec": {
            "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}],
            "type": "ClusterIP",
            "clusterIP": "10.96.0.9",
        },
    }
    assert contains(live, desired)
    live["spec"]["ports"][0]["port"] = 9000
    assert not contains(live, desired)
    assert not contains({"spec": {"ports": []}}, desired)
    assert not contains(
        {"spec": {"ports": [{"name": "http", "port": 8000}, {"name": "x"}], "type": "ClusterIP"}},
        desired,
    )


def test_transition_time_moves_only_when_status_changes() -> None:
    first = merge_conditions([], [Cond("Ready", "False", "Waiting", "m")], 1, "t1")
    again = merge_conditions(first, [Cond("Ready", "False", "Other", "m2")], 2, "t2")
    assert again[0]["lastTransitionTime"] == "t1"
    assert again[0]["observedGeneration"] == 2
    flipped = merge_conditions(again, [Cond("Ready", "True", "Available", "m3")], 2, "t3")
    assert flipped[0]["lastTransitionTime"] == "t3"


def deployment(**status: Any) -> dict[str, Any]:
    return {"metadata": {"generation": 2}, "status": {"observedGeneration": 2, **status}}


def test_rollout_outcome_reads_the_deployment() -> None:
    done = rollout_outcome(deployment(replicas=2, updatedReplicas=2, availableReplicas=2), 2)
    assert (done.ready.status, done.progressing.status, done.degraded.status) == (
        "True",
        "False",
        "False",
    )
    rolling = rollout_outcome(deployment(replicas=3, updatedReplicas=1, availableReplicas=2), 2)
    assert rolling.progressing.reason == "RollingOut"
    assert rolling.ready.status == "True"
    failed = rollout_outcome(
        deployment(
            replicas=1,
            conditions=[
                {"type": "ReplicaFailure", "status": "True", "message": "forbidden: exceeded quota"}
            ],
        ),
        1,
    )
    assert failed.degraded.reason == "ReplicaFailure"
    assert "exceeded quota" in failed.degraded.message
    assert failed.ready.status == "False"


def test_pod_problem_quotes_the_scheduler() -> None:
    pods = [
        {
            "metadata": {"name": "p"},
            "status": {
                "conditions": [
                    {
                        "type": "PodScheduled",
                        "status": "False",
                        "message": "0/7 nodes are available",
                    }
                ]
            },
        }
    ]
    assert pod_problem(pods) == ("Unschedulable", "Pod p: 0/7 nodes are available")
    assert pod_problem([{"metadata": {"name": "q"}, "status": {}}]) is None


def test_pool_usage_counts_gpus_of_running_replicas() -> None:
    models = [
        {"spec": {"runtime": {"gpus": 2}}, "status": {"replicas": 3}},
        {"spec": {"runtime": {"gpus": 1}}, "status": {}},
    ]
    assert pool_usage(models) == {"gpusUsed": 6, "models": 2, "replicas": 3}
