"""Where each of a model's replicas is on its way to serving, from its pod's status.

A replica goes Pending (not scheduled yet) -> Fetching (the init container copies the
model's files) -> Loading (Triton runs and loads the model; its readiness probe,
``/v2/health/ready`` with ``--strict-readiness``, answers once every model is loaded)
-> Ready. It fails as FailedToFetch (the copy failed) or FailedToLoad (Triton exited:
with ``--exit-on-error`` a model that does not load stops the server, and the
container's ``FallbackToLogsOnError`` policy makes Triton's last log lines, which name
the error, the termination message quoted here).

The kubelet's own failures (an image that cannot be pulled, a config it cannot build)
keep the kubelet's reason. Pure: pods in, states out.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from shoal.api.constants import KUEUE_ADMISSION_GATE, KUEUE_QUEUE_LABEL
from shoal.render.names import FETCH_CONTAINER, SERVING_CONTAINER

PENDING = "Pending"
FETCHING = "Fetching"
LOADING = "Loading"
READY = "Ready"
FAILED_TO_FETCH = "FailedToFetch"
FAILED_TO_LOAD = "FailedToLoad"
UNSCHEDULABLE = "Unschedulable"
# Held by Kueue until its pool's quota (its own GPUs, or those it may borrow) admits it.
WAITING_FOR_QUOTA = "WaitingForQuota"

# Waiting reasons that mean the kubelet cannot start the container at all.
KUBELET_FAILURES = (
    "ImagePullBackOff",
    "ErrImagePull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "InvalidImageName",
)
# Waiting reasons of a container that ran and exited with an error.
CRASHED = ("CrashLoopBackOff", "RunContainerError")
# The most telling state first: what blocks serving outranks what is still on its way.
PRECEDENCE = (
    FAILED_TO_LOAD,
    FAILED_TO_FETCH,
    *KUBELET_FAILURES,
    UNSCHEDULABLE,
    WAITING_FOR_QUOTA,
    LOADING,
    FETCHING,
    PENDING,
    READY,
)
# States no waiting resolves: only a change to the spec or its surroundings (the
# model's files, its storage, the image) helps.
FAILURES = frozenset({FAILED_TO_LOAD, FAILED_TO_FETCH, *KUBELET_FAILURES})
MESSAGE_CHARS = 1024
# An error-severity line of glog, which Triton logs with: E<month><day> <time> ...
GLOG_ERROR = re.compile(r"^E\d{4} ")


@dataclass(frozen=True)
class ReplicaState:
    state: str
    message: str


def _telling(message: str) -> str:
    """The lines of a log tail that say what went wrong: Triton's ``error:`` line and
    its error-severity (``E1201 ...``) lines, else the last lines."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:") or GLOG_ERROR.match(line)]
    return " ".join(errors[-3:] or lines[-3:])[-MESSAGE_CHARS:]


def _last_words(container: dict[str, Any]) -> str:
    """What a container that exited said last: its termination message, else how it
    ended (the exit code)."""
    ended = ((container.get("lastState") or {}).get("terminated")) or (
        (container.get("state") or {}).get("terminated")
    )
    if not ended:
        return ""
    message = _telling(ended.get("message") or "")
    if message:
        return message
    return f"exited with code {ended.get('exitCode')} ({ended.get('reason') or 'Error'})"


def _failed(container: dict[str, Any]) -> tuple[str, str] | None:
    """(kubelet reason or 'crashed', message) for a container that cannot run."""
    waiting = (container.get("state") or {}).get("waiting") or {}
    reason = waiting.get("reason")
    if reason in KUBELET_FAILURES:
        return reason, waiting.get("message") or reason
    terminated = (container.get("state") or {}).get("terminated") or {}
    if reason in CRASHED or (terminated and terminated.get("exitCode", 0) != 0):
        return "crashed", _last_words(container) or waiting.get("message") or str(reason)
    return None


def replica_state(pod: dict[str, Any]) -> ReplicaState:
    """The state of one replica: its pod's scheduling, then its fetch (init) container,
    then its serving container."""
    name = (pod.get("metadata") or {}).get("name", "")
    status = pod.get("status") or {}
    gates = {g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []}
    if KUEUE_ADMISSION_GATE in gates:
        queue = ((pod.get("metadata") or {}).get("labels") or {}).get(KUEUE_QUEUE_LABEL, "")
        return ReplicaState(
            WAITING_FOR_QUOTA,
            f"Pod {name} waits for Kueue to admit it: LocalQueue {queue} has no free GPU of "
            "its pool's own, nor one it may borrow from its cohort.",
        )
    for cond in status.get("conditions") or []:
        if cond.get("type") == "PodScheduled" and cond.get("status") == "False":
            return ReplicaState(UNSCHEDULABLE, f"Pod {name}: {cond.get('message', '')}")
    inits = {c.get("name"): c for c in status.get("initContainerStatuses") or []}
    mains = {c.get("name"): c for c in status.get("containerStatuses") or []}
    fetch, serving = inits.get(FETCH_CONTAINER), mains.get(SERVING_CONTAINER)
    if fetch is not None:
        failure = _failed(fetch)
        if failure is not None:
            reason, message = failure
            if reason != "crashed":
                return ReplicaState(reason, f"Pod {name} container {FETCH_CONTAINER}: {message}")
            return ReplicaState(
                FAILED_TO_FETCH, f"Pod {name}: copying the model's files failed: {message}"
            )
        if "terminated" not in (fetch.get("state") or {}):
            return ReplicaState(FETCHING, f"Pod {name} is copying the model's files.")
    if serving is None:
        return ReplicaState(PENDING, f"Pod {name} has not started yet.")
    failure = _failed(serving)
    if failure is not None:
        reason, message = failure
        if reason != "crashed":
            return ReplicaState(reason, f"Pod {name} container {SERVING_CONTAINER}: {message}")
        return ReplicaState(FAILED_TO_LOAD, f"Pod {name}: Triton exited: {message}")
    if serving.get("ready"):
        return ReplicaState(READY, f"Pod {name} serves.")
    if "running" in (serving.get("state") or {}):
        return ReplicaState(LOADING, f"Pod {name}: Triton is loading the model.")
    return ReplicaState(PENDING, f"Pod {name} has not started yet.")


@dataclass(frozen=True)
class ModelLoadState:
    """Replicas per state, and the most telling one with its message."""

    counts: dict[str, int]
    headline: ReplicaState | None

    @property
    def failed(self) -> bool:
        return self.headline is not None and self.headline.state in FAILURES


def summarise(pods: list[dict[str, Any]]) -> ModelLoadState:
    """The states of the pods that are not being deleted."""
    states = [
        replica_state(pod)
        for pod in pods
        if not (pod.get("metadata") or {}).get("deletionTimestamp")
    ]
    if not states:
        return ModelLoadState({}, None)
    counts = Counter(s.state for s in states)
    headline = min(states, key=lambda s: PRECEDENCE.index(s.state))
    return ModelLoadState(dict(sorted(counts.items())), headline)
