"""Which watch events lead to a pass: status writes do not, drift, deletion and
rollout progress do."""

from __future__ import annotations

import copy
from typing import Any

from shoal.watch_filter import VERIFIED_TTL, WatchFilter


def hpa(generation: int = 1, desired: int = 1) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "m",
            "namespace": "ns",
            "generation": generation,
            "labels": {"a": "b"},
        },
        "status": {"desiredReplicas": desired, "currentReplicas": desired},
    }


def deployment(available: int = 0, ready: int = 0) -> dict[str, Any]:
    return {
        "metadata": {"name": "m", "namespace": "ns", "generation": 1},
        "status": {
            "observedGeneration": 1,
            "replicas": 1,
            "availableReplicas": available,
            "readyReplicas": ready,
        },
    }


def test_the_first_sighting_counts_and_a_status_only_write_does_not() -> None:
    changes = WatchFilter()
    assert changes.relevant(None, "HorizontalPodAutoscaler", hpa())
    assert not changes.relevant("MODIFIED", "HorizontalPodAutoscaler", hpa(desired=3))


def test_spec_and_label_drift_count() -> None:
    changes = WatchFilter()
    changes.relevant(None, "PodDisruptionBudget", hpa())
    assert changes.relevant("MODIFIED", "PodDisruptionBudget", hpa(generation=2))
    relabelled = hpa(generation=2)
    relabelled["metadata"]["labels"] = {"a": "c"}
    assert changes.relevant("MODIFIED", "PodDisruptionBudget", relabelled)
    assert not changes.relevant("MODIFIED", "PodDisruptionBudget", copy.deepcopy(relabelled))


def test_deployment_rollout_progress_counts() -> None:
    changes = WatchFilter()
    changes.relevant(None, "Deployment", deployment())
    assert changes.relevant("MODIFIED", "Deployment", deployment(available=1, ready=1))
    assert not changes.relevant("MODIFIED", "Deployment", deployment(available=1, ready=1))


def test_deletion_counts_and_forgets() -> None:
    changes = WatchFilter()
    changes.relevant(None, "HorizontalPodAutoscaler", hpa())
    assert changes.relevant("DELETED", "HorizontalPodAutoscaler", hpa())
    assert changes.relevant("ADDED", "HorizontalPodAutoscaler", hpa())


def test_services_and_configmaps_count_on_every_change() -> None:
    changes = WatchFilter()
    cm = {"metadata": {"name": "m", "namespace": "ns", "resourceVersion": "5"}}
    assert changes.relevant(None, "ConfigMap", cm)
    assert not changes.relevant("MODIFIED", "ConfigMap", cm)
    assert changes.relevant(
        "MODIFIED", "ConfigMap", {"metadata": {**cm["metadata"], "resourceVersion": "6"}}
    )


def test_a_models_own_status_write_does_not_count_but_its_deletion_does() -> None:
    changes = WatchFilter()
    model = {"metadata": {"name": "m", "namespace": "ns", "generation": 3}, "status": {}}
    assert changes.relevant(None, "InferenceModel", model)
    written = {**model, "status": {"observedGeneration": 3}}
    assert not changes.relevant("MODIFIED", "InferenceModel", written)
    deleting = {**written, "metadata": {**model["metadata"], "deletionTimestamp": "now"}}
    assert changes.relevant("MODIFIED", "InferenceModel", deleting)


def test_the_echo_of_shoals_own_write_does_not_count() -> None:
    changes = WatchFilter()
    meta = {"name": "m", "namespace": "ns", "resourceVersion": "9"}
    changes.observed({"kind": "ConfigMap", "metadata": meta}, {"metadata": meta})
    assert not changes.relevant("MODIFIED", "ConfigMap", {"metadata": meta})


def _hpa_desired(target: str = "8") -> dict[str, Any]:
    return {
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"target": target},
    }


def test_a_verified_child_is_not_read_again_until_something_changes() -> None:
    now = [0.0]
    changes = WatchFilter(clock=lambda: now[0])
    desired = _hpa_desired()
    assert not changes.unchanged(desired)  # never verified
    changes.observed(desired, hpa())
    assert changes.unchanged(desired)
    # The HPA controller's status writes change nothing that matters...
    changes.relevant("MODIFIED", "HorizontalPodAutoscaler", hpa(desired=5))
    assert changes.unchanged(desired)
    # ...wanting something else does,
    assert not changes.unchanged(_hpa_desired("16"))
    # and so does an admin's edit of its spec.
    changes.relevant("MODIFIED", "HorizontalPodAutoscaler", hpa(generation=2))
    assert not changes.unchanged(desired)


def test_a_verification_expires_and_a_deployment_is_always_read() -> None:
    now = [0.0]
    changes = WatchFilter(clock=lambda: now[0])
    desired = _hpa_desired()
    changes.observed(desired, hpa())
    now[0] = VERIFIED_TTL + 1
    assert not changes.unchanged(desired)
    wanted = {"kind": "Deployment", "metadata": {"name": "m", "namespace": "ns"}}
    changes.observed(wanted, deployment(available=1, ready=1))
    assert not changes.unchanged(wanted)
