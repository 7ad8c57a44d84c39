"""The cache the watches fill: which events need a pass (status writes do not; drift,
deletion and rollout progress do), and which children a pass may skip reading."""

from __future__ import annotations

from typing import Any

from shoal.cache import TOMBSTONES, Cache
from shoal.kube.drift import digest
from shoal.verified import DEFAULT_TTL, Verified


def hpa(generation: int = 1, desired: int = 1, rv: str = "1", target: int = 8) -> dict[str, Any]:
    return {
        "kind": "HorizontalPodAutoscaler",
        "metadata": {
            "name": "m",
            "namespace": "ns",
            "generation": generation,
            "resourceVersion": rv,
            "labels": {"a": "b", "shoal.dev/pool": "p"},
        },
        "spec": {"maxReplicas": target},
        "status": {"desiredReplicas": desired, "currentReplicas": desired},
    }


def deployment(available: int = 0, ready: int = 0, rv: str = "1") -> dict[str, Any]:
    return {
        "kind": "Deployment",
        "metadata": {"name": "m", "namespace": "ns", "generation": 1, "resourceVersion": rv},
        "spec": {"template": {}},
        "status": {
            "observedGeneration": 1,
            "replicas": 1,
            "availableReplicas": available,
            "readyReplicas": ready,
        },
    }


def test_the_first_sighting_counts_and_a_status_only_write_does_not() -> None:
    cache = Cache()
    assert cache.put("HorizontalPodAutoscaler", hpa())
    assert not cache.put("HorizontalPodAutoscaler", hpa(desired=3, rv="2"))


def test_spec_and_label_drift_count() -> None:
    cache = Cache()
    cache.put("PodDisruptionBudget", hpa())
    assert cache.put("PodDisruptionBudget", hpa(generation=2, target=9, rv="2"))
    relabelled = hpa(generation=2, target=9, rv="3")
    relabelled["metadata"]["labels"] = {"a": "c"}
    assert cache.put("PodDisruptionBudget", relabelled)
    assert not cache.put(
        "PodDisruptionBudget",
        {**relabelled, "metadata": {**relabelled["metadata"], "resourceVersion": "4"}},
    )


def test_deployment_rollout_progress_counts() -> None:
    cache = Cache()
    cache.put("Deployment", deployment())
    assert cache.put("Deployment", deployment(available=1, ready=1, rv="2"))
    assert not cache.put("Deployment", deployment(available=1, ready=1, rv="3"))


def test_an_older_copy_changes_nothing() -> None:
    cache = Cache()
    cache.put("HorizontalPodAutoscaler", hpa(rv="5", target=9))
    assert not cache.put("HorizontalPodAutoscaler", hpa(rv="4", target=8))
    kept = cache.get("HorizontalPodAutoscaler", "m", "ns")
    assert kept is not None
    assert kept["metadata"]["resourceVersion"] == "5"


def test_a_models_own_status_write_does_not_count_but_its_deletion_does() -> None:
    cache = Cache()
    model: dict[str, Any] = {
        "kind": "InferenceModel",
        "metadata": {"name": "m", "namespace": "ns", "generation": 3, "resourceVersion": "1"},
        "spec": {"pool": "p"},
        "status": {},
    }
    assert cache.put("InferenceModel", model)
    written = {**model, "status": {"observedGeneration": 3}}
    written["metadata"] = {**model["metadata"], "resourceVersion": "2"}
    assert not cache.put("InferenceModel", written)
    deleting = {**written, "metadata": {**written["metadata"], "deletionTimestamp": "now"}}
    assert cache.put("InferenceModel", deleting)


def test_indexes_follow_pools_and_drop() -> None:
    cache = Cache()
    cache.put(
        "InferenceModel", {"metadata": {"name": "a", "namespace": "x"}, "spec": {"pool": "p"}}
    )
    cache.put("HorizontalPodAutoscaler", hpa())
    assert [m["metadata"]["name"] for m in cache.in_pool("p", ["InferenceModel"])] == ["a"]
    assert len(cache.in_pool("p", ["InferenceModel", "HorizontalPodAutoscaler"])) == 2
    cache.put(
        "InferenceModel",
        {
            "metadata": {"name": "a", "namespace": "x", "resourceVersion": "2"},
            "spec": {"pool": "q"},
        },
    )
    assert cache.in_pool("p", ["InferenceModel"]) == []
    cache.drop("InferenceModel", {"metadata": {"name": "a", "namespace": "x"}})
    assert cache.all("InferenceModel") == []


def _hpa_desired(target: int = 8) -> dict[str, Any]:
    return {
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "m", "namespace": "ns"},
        "spec": {"maxReplicas": target},
    }


def test_a_verified_child_is_not_read_again_until_something_changes() -> None:
    now = [0.0]
    cache = Cache()
    verified = Verified(cache, clock=lambda: now[0])
    desired = _hpa_desired()
    wanted = digest(desired)
    assert verified.vouch(desired, wanted) is None  # never verified
    verified.record(wanted, hpa())
    assert verified.vouch(desired, wanted) is not None
    # The HPA controller's status writes change nothing that matters...
    cache.put("HorizontalPodAutoscaler", hpa(desired=5, rv="2"))
    assert verified.vouch(desired, wanted) is not None
    # ...wanting something else does,
    assert verified.vouch(_hpa_desired(16), digest(_hpa_desired(16))) is None
    # and so does an admin's edit of its spec.
    cache.put("HorizontalPodAutoscaler", hpa(generation=2, target=9, rv="3"))
    assert verified.vouch(desired, wanted) is None


def test_a_verification_expires() -> None:
    now = [0.0]
    cache = Cache()
    verified = Verified(cache, clock=lambda: now[0])
    desired = _hpa_desired()
    verified.record(digest(desired), hpa())
    now[0] = DEFAULT_TTL + 1
    assert verified.vouch(desired, digest(desired)) is None


def test_a_vouched_deployment_comes_with_its_rollout_from_the_watch() -> None:
    cache = Cache()
    verified = Verified(cache)
    wanted = {"kind": "Deployment", "metadata": {"name": "m", "namespace": "ns"}}
    verified.record(digest(wanted), deployment())
    cache.put("Deployment", deployment(available=1, ready=1, rv="2"))
    seen = verified.vouch(wanted, digest(wanted))
    assert seen is not None
    assert seen["status"]["availableReplicas"] == 1


def test_absence_is_vouched_only_once_the_cache_is_filled() -> None:
    cache = Cache()
    verified = Verified(cache)
    desired = _hpa_desired()
    assert not verified.absent(desired)
    verified.synced = True
    assert verified.absent(desired)
    cache.put("HorizontalPodAutoscaler", hpa())
    assert not verified.absent(desired)


def _model(uid: str, rv: str) -> dict[str, Any]:
    return {
        "kind": "InferenceModel",
        "metadata": {"name": "m", "namespace": "ns", "uid": uid, "resourceVersion": rv},
        "spec": {"pool": "p"},
        "status": {},
    }


def test_a_reply_that_lost_the_race_with_the_deletion_does_not_bring_the_object_back() -> None:
    cache = Cache()
    cache.put("InferenceModel", _model("u1", "5"))
    cache.drop("InferenceModel", _model("u1", "9"))  # the watch's DELETED event
    # The reply to a status write sent before the deletion, read after it.
    assert not cache.put("InferenceModel", _model("u1", "7"))
    assert cache.get("InferenceModel", "m", "ns") is None
    assert cache.all("InferenceModel") == []
    assert cache.in_pool("p", ["InferenceModel"]) == []
    # Created again under the same name: a new object, kept.
    assert cache.put("InferenceModel", _model("u2", "12"))
    assert cache.get("InferenceModel", "m", "ns") is not None
    # A later copy of the new one is no longer judged by the old tombstone.
    cache.put("InferenceModel", {**_model("u2", "13"), "spec": {"pool": "q"}})
    assert cache.in_pool("q", ["InferenceModel"]) != []


def test_without_a_uid_a_copy_older_than_the_deletion_is_refused() -> None:
    cache = Cache()
    cache.drop("HorizontalPodAutoscaler", hpa(rv="9"))
    assert cache.buried("HorizontalPodAutoscaler", hpa(rv="9"))
    assert not cache.put("HorizontalPodAutoscaler", hpa(rv="8"))
    assert cache.put("HorizontalPodAutoscaler", hpa(rv="10"))


def test_a_childs_reply_after_its_deletion_is_not_vouched_for() -> None:
    cache = Cache()
    verified = Verified(cache)
    verified.synced = True
    desired = _hpa_desired()
    wanted = digest(desired)
    child = {**hpa(rv="5"), "metadata": {**hpa(rv="5")["metadata"], "uid": "c1"}}
    verified.record(wanted, child)
    gone = {**child, "metadata": {**child["metadata"], "resourceVersion": "6"}}
    cache.drop("HorizontalPodAutoscaler", gone)
    verified.forget("HorizontalPodAutoscaler", gone)
    verified.record(wanted, child)  # an apply's read-back that raced the deletion
    assert verified.vouch(desired, wanted) is None
    assert verified.absent(desired)  # so the next pass creates it again


def test_tombstones_are_bounded() -> None:
    cache = Cache()
    for i in range(TOMBSTONES + 5):
        cache.drop("InferenceModel", {"metadata": {"name": f"m{i}", "namespace": "ns", "uid": "u"}})
    body = {"metadata": {"name": "m0", "namespace": "ns", "uid": "u"}, "spec": {}}
    assert not cache.buried("InferenceModel", body)  # the oldest was forgotten
    last = {"metadata": {"name": f"m{TOMBSTONES + 4}", "namespace": "ns", "uid": "u"}}
    assert cache.buried("InferenceModel", last)


def test_a_child_back_in_the_watchs_selector_is_kept() -> None:
    """A filtered watch says DELETED when a label leaves its selector; Shoal's apply puts
    it back, and that later version of the same object is not buried."""
    cache = Cache()
    child = {**hpa(rv="5"), "metadata": {**hpa(rv="5")["metadata"], "uid": "c1"}}
    unlabelled = {**child, "metadata": {**child["metadata"], "resourceVersion": "6"}}
    cache.drop("HorizontalPodAutoscaler", unlabelled)
    assert not cache.put("HorizontalPodAutoscaler", child)  # from before: buried
    relabelled = {**child, "metadata": {**child["metadata"], "resourceVersion": "7"}}
    assert cache.put("HorizontalPodAutoscaler", relabelled)
    assert cache.get("HorizontalPodAutoscaler", "m", "ns") is not None
