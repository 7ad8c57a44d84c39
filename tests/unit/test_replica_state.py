"""Where a model's replicas are, from pod statuses shaped as the kubelet writes them
(the init container copying the files, Triton loading, Triton exited on a model it
could not load, an image that cannot be pulled), and what the model's status says."""

from __future__ import annotations

from typing import Any

from shoal.api.conditions import Cond
from shoal.reconcile.model import Outcome, with_replica_states
from shoal.reconcile.replica_state import replica_state, summarise

# The tail of a real tritonserver's log (2.51) on a model whose initialize raised.
TRITON_LOG = (
    "| strict_readiness                 | 1 |\n"
    "| exit_timeout                     | 2 |\n"
    "+----------------------------------+---+\n"
    'I1201 07:19:30.364633 4940 server.cc:336] "All models are stopped, unloading models"\n'
    "error: creating server: Invalid argument - load failed for model 'ranker': version 1 "
    "is at UNAVAILABLE state: Internal: RuntimeError: weights file model.safetensors is "
    "truncated\n"
    "\n"
    "At:\n"
    "  /models/ranker/1/model.py(4): initialize\n"
)


def pod(name: str, init: dict[str, Any] | None, triton: dict[str, Any] | None) -> dict[str, Any]:
    status: dict[str, Any] = {"conditions": [{"type": "PodScheduled", "status": "True"}]}
    if init is not None:
        status["initContainerStatuses"] = [{"name": "fetch-model", "ready": False, **init}]
    if triton is not None:
        status["containerStatuses"] = [{"name": "triton", **triton}]
    return {"metadata": {"name": name}, "status": status}


COPYING = pod("a", {"state": {"running": {"startedAt": "2026-12-01T07:39:00Z"}}}, None)
COPIED = {"state": {"terminated": {"exitCode": 0, "reason": "Completed"}}}
WAITING_TO_START = pod(
    "b",
    {"state": {"running": {}}},
    {"ready": False, "state": {"waiting": {"reason": "PodInitializing"}}},
)
LOADING = pod("c", COPIED, {"ready": False, "started": False, "state": {"running": {}}})
SERVING = pod("d", COPIED, {"ready": True, "started": True, "state": {"running": {}}})
CRASHED = pod(
    "e",
    COPIED,
    {
        "ready": False,
        "restartCount": 3,
        "state": {"waiting": {"reason": "CrashLoopBackOff", "message": "back-off 40s"}},
        "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": TRITON_LOG}},
    },
)
COPY_FAILED = pod(
    "f",
    {
        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
        "lastState": {
            "terminated": {
                "exitCode": 1,
                "message": "ERROR : : error reading source root directory: directory not found",
            }
        },
    },
    None,
)
NO_IMAGE = pod(
    "g",
    COPIED,
    {
        "ready": False,
        "state": {
            "waiting": {
                "reason": "ImagePullBackOff",
                "message": 'Back-off pulling image "mirror.internal/triton:nope"',
            }
        },
    },
)
UNSCHEDULED = {
    "metadata": {"name": "h"},
    "status": {
        "conditions": [
            {"type": "PodScheduled", "status": "False", "message": "0/7 nodes are available"}
        ]
    },
}


def test_each_replica_is_where_its_pod_says() -> None:
    assert replica_state(COPYING).state == "Fetching"
    assert replica_state(WAITING_TO_START).state == "Fetching"
    assert replica_state(LOADING).state == "Loading"
    assert replica_state(SERVING).state == "Ready"
    crashed = replica_state(CRASHED)
    assert crashed.state == "FailedToLoad"
    # Triton's own words, from the termination message its last log lines became.
    assert crashed.message.startswith(
        "Pod e: Triton exited: error: creating server: Invalid argument - load failed for "
        "model 'ranker'"
    )
    assert "exit_timeout" not in crashed.message
    failed_copy = replica_state(COPY_FAILED)
    assert failed_copy.state == "FailedToFetch"
    assert "directory not found" in failed_copy.message
    assert replica_state(NO_IMAGE).state == "ImagePullBackOff"
    assert "mirror.internal/triton:nope" in replica_state(NO_IMAGE).message
    assert replica_state(UNSCHEDULED).message == "Pod h: 0/7 nodes are available"
    assert replica_state({"metadata": {"name": "q"}, "status": {}}).state == "Pending"


def test_a_crash_without_a_message_says_how_it_ended() -> None:
    quiet = pod(
        "i",
        COPIED,
        {
            "ready": False,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
        },
    )
    assert replica_state(quiet).message == "Pod i: Triton exited: exited with code 137 (OOMKilled)"


def test_the_summary_counts_every_state_and_leads_with_the_most_telling() -> None:
    load = summarise([SERVING, LOADING, COPYING, CRASHED])
    assert load.counts == {"Fetching": 1, "FailedToLoad": 1, "Loading": 1, "Ready": 1}
    assert load.headline is not None
    assert load.headline.state == "FailedToLoad"
    assert load.failed
    on_the_way = summarise([COPYING, LOADING])
    assert on_the_way.headline is not None
    assert on_the_way.headline.state == "Loading"
    assert not on_the_way.failed
    terminating = {**CRASHED, "metadata": {"name": "e", "deletionTimestamp": "now"}}
    assert summarise([terminating]).headline is None


def _waiting_outcome() -> Outcome:
    return Outcome(
        ready=Cond("Ready", "False", "NoReplicasAvailable", "No Triton replica is ready yet."),
        progressing=Cond("Progressing", "True", "RollingOut", "0 of 2 replicas updated."),
        degraded=Cond("Degraded", "False", "AsExpected", "All objects are applied."),
        deployment={},
    )


def test_while_none_serves_ready_says_where_they_are_and_a_failure_stalls() -> None:
    loading = with_replica_states(_waiting_outcome(), summarise([LOADING, COPYING]))
    assert (loading.ready.reason, loading.stalled) == ("Loading", False)
    assert loading.ready.message.startswith("1 Fetching, 1 Loading. Pod c:")
    assert loading.degraded.status == "False"
    assert loading.replica_states == {"Fetching": 1, "Loading": 1}

    failed = with_replica_states(_waiting_outcome(), summarise([CRASHED, LOADING]))
    assert (failed.ready.reason, failed.stalled) == ("FailedToLoad", True)
    assert (failed.degraded.status, failed.degraded.reason) == ("True", "FailedToLoad")
    assert "weights file model.safetensors is truncated" in failed.degraded.message


def test_a_serving_model_with_a_failing_new_replica_stays_ready_and_degraded() -> None:
    serving = Outcome(
        ready=Cond("Ready", "True", "Available", "1 of 2 replicas ready to serve."),
        progressing=Cond("Progressing", "True", "RollingOut", "1 of 2 replicas updated."),
        degraded=Cond("Degraded", "False", "AsExpected", "All objects are applied."),
        deployment={},
    )
    rolled = with_replica_states(serving, summarise([SERVING, CRASHED]))
    assert rolled.ready.status == "True"
    assert not rolled.stalled
    assert rolled.degraded.reason == "FailedToLoad"
    assert rolled.replica_states == {"FailedToLoad": 1, "Ready": 1}
