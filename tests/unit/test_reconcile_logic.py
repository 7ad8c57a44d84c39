"""Pure parts of the reconcilers: drift detection, conditions, rollout reading."""

from __future__ import annotations

from typing import Any

from shoal.api.conditions import Cond, merge_conditions
from shoal.kube.drift import current, digest, holds, stamped
from shoal.reconcile.model import rollout_outcome
from shoal.reconcile.pool import pool_usage


def test_holds_ignores_server_added_fields_but_not_changes() -> None:
    desired = {"spec": {"ports": [{"name": "http", "port": 8000}], "type": "ClusterIP"}}
    live: dict[str, Any] = {
        "metadata": {"resourceVersion": "7"},
        "spec": {
            "ports": [{"name": "http", "port": 8000, "protocol": "TCP"}],
            "type": "ClusterIP",
            "clusterIP": "10.96.0.9",
        },
    }
    assert holds(live, desired)
    live["spec"]["ports"][0]["port"] = 9000
    assert not holds(live, desired)
    assert not holds({"spec": {"ports": []}}, desired)
    assert not holds(
        {"spec": {"ports": [{"name": "http", "port": 8000}, {"name": "x"}], "type": "ClusterIP"}},
        desired,
    )


def test_quantities_compare_by_value_where_the_server_normalises_them() -> None:
    desired = {"resources": {"requests": {"cpu": "0.5", "memory": "1024Mi"}}}
    assert holds({"resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}}, desired)
    assert not holds({"resources": {"requests": {"cpu": "600m", "memory": "1Gi"}}}, desired)
    target = {"target": {"type": "Value", "value": "0.25"}}
    assert holds({"target": {"type": "Value", "value": "250m"}}, target)
    # Elsewhere a string is a string: a label value "500m" is not "0.5".
    assert not holds({"labels": {"x": "500m"}}, {"labels": {"x": "0.5"}})
    assert not holds({"tolerations": [{"value": "500m"}]}, {"tolerations": [{"value": "0.5"}]})


def test_a_removed_field_is_seen_through_the_applied_digest() -> None:
    """A subset check cannot see a field Shoal stopped sending; the digest can."""
    before = {
        "kind": "ResourceQuota",
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "8", "x": "1"}},
    }
    after = {"kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"x": "1"}}}
    live = stamped(before)
    assert current(live, before)
    assert holds(live, after)  # the subset check alone would skip the write
    assert not current(live, after)
    assert digest(stamped(after)) == digest(after)


def test_an_edit_to_a_managed_field_is_seen_though_the_digest_matches() -> None:
    desired = {"kind": "Service", "metadata": {"name": "s"}, "spec": {"type": "ClusterIP"}}
    live = stamped(desired)
    live["spec"]["type"] = "NodePort"
    assert not current(live, desired)
    assert not current(None, desired)


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


def test_pool_usage_counts_gpus_of_running_replicas() -> None:
    models: list[dict[str, Any]] = [
        {"spec": {"runtime": {"gpus": 2}}, "status": {"replicas": 3}},
        {"spec": {"runtime": {"gpus": 1}}, "status": {}},
    ]
    assert pool_usage(models) == {"gpusUsed": 6, "models": 2, "replicas": 3}
