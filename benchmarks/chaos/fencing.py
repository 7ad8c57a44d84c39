"""Fenced leadership: a leader deposed while it cannot see it makes no write afterwards.

Two replicas with leader election, the old leader busy with a wave of changes; then one
of three faults: it is paused (SIGSTOP) past its Lease, it is cut off from the API
server by a silent partition, or an admin hands its Lease to the other replica by hand.
The follower takes over and converges a further change while the old leader is still
out; then the old leader is resumed, or the partition healed. The API server's audit
log, which names each replica by its user agent, must show no write by the old leader
received after the new leader's first write of the Lease; the old leader must step down
(exit); and the fleet must converge exactly, with a no-op resync writing nothing.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
from e2e.operator import OperatorProcess

from benchmarks.chaos.fleet import rescaled
from benchmarks.chaos.partition import partitionable
from benchmarks.chaos.rig import Rig, audit_events, succeeded
from benchmarks.chaos.scenarios import LEASE_NAMESPACE, Size, in_background, settled
from shoal.leader import LEASE_CALL_SECONDS, LEASE_NAME, RENEW_DEADLINE_SECONDS, RETRY_SECONDS

LEASE_PATH = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}"
FAULTS = ("pause", "partition", "handover")
# The longest a step-down may take once due: the election loop may be inside one Lease
# call, and a process needs a moment to exit.
STEP_DOWN_SLACK_SECONDS = LEASE_CALL_SECONDS + 1.0


def _exited(pid: int) -> bool:
    """The process has ended (a zombie until its parent reaps it, or gone)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except (FileNotFoundError, IndexError):
        return True


def _leads(operator: OperatorProcess) -> bool:
    try:
        return "\nshoal_leader 1.0\n" in "\n" + httpx.get(operator.metrics_url, timeout=2).text
    except httpx.HTTPError:
        return False


def _exit_time(pid: int) -> Callable[[], float | None]:
    """Watch ``pid`` from now on; the returned function tells when (monotonic) it
    exited, or None while it runs."""
    exited: list[float] = []

    def watch() -> None:
        while not _exited(pid):
            time.sleep(0.05)
        exited.append(time.monotonic())

    threading.Thread(target=watch, daemon=True).start()
    return lambda: exited[0] if exited else None


def _until(what: str, check: Callable[[], bool], timeout: float) -> float:
    """Seconds until ``check()`` holds (polled every 0.1 s)."""
    began = time.monotonic()
    while not check():
        assert time.monotonic() - began < timeout, f"{what}: not within {timeout:.0f} s"
        time.sleep(0.1)
    return time.monotonic() - began


def _received(event: dict[str, Any]) -> dt.datetime:
    return dt.datetime.fromisoformat(event["requestReceivedTimestamp"].replace("Z", "+00:00"))


def _by(events: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [e for e in events if f"({name})" in (e.get("userAgent") or "")]


def _described(event: dict[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    return f"{event['verb']} {ref.get('resource')} {ref.get('namespace', '')}/{ref.get('name')}"


def fenced(rig: Rig, size: Size, fault: str, seed: int) -> dict[str, Any]:
    """One fault (``pause``, ``partition`` or ``handover``) to a busy leader; returns the
    figures, having asserted that the old leader wrote nothing after the takeover."""
    rng = random.Random(seed)
    rig.stop()
    with rig.http() as http:
        http.delete(LEASE_PATH)
    old_name, new_name = (f"shoal-operator-{fault}-{seed}-{side}" for side in ("a", "b"))

    def settings(name: str) -> dict[str, str]:
        return {"SHOAL_LEADER_ELECTION_NAMESPACE": LEASE_NAMESPACE, "POD_NAME": name}

    with partitionable(rig.sa_kubeconfig, rig.work / f"relayed-{fault}.kubeconfig") as (
        relayed,
        partition,
    ):
        old = rig.start_operator(
            settings(old_name), kubeconfig=relayed if fault == "partition" else None
        )
        _until("the first replica to lead", lambda: _leads(old), 60)
        new = rig.start_operator(settings(new_name))
        fleet = size.fleet(max_replicas=2)
        rig.reset(fleet)
        rig.converge(fleet)
        began_events = len(audit_events(rig.audit_log))

        # The fault strikes while the leader is writing a wave.
        join = in_background(lambda: rig.apply(rescaled(fleet, 3)))
        time.sleep(rng.uniform(0.2, 2.0))
        if fault == "pause":
            os.kill(old.pid, signal.SIGSTOP)
        elif fault == "partition":
            partition.cut()
        else:
            with rig.http() as http:
                http.patch(
                    LEASE_PATH,
                    json={"spec": {"holderIdentity": new_name}},
                    headers={"Content-Type": "application/merge-patch+json"},
                ).raise_for_status()
        faulted, faulted_at = time.monotonic(), dt.datetime.now(dt.UTC)
        exit_time = _exit_time(old.pid)
        join()
        _until("the follower to lead", lambda: _leads(new), 3 * 15 + 15)
        takeover_s = time.monotonic() - faulted
        # The new leader's work, which the old one's queued passes would undo.
        fleet = rescaled(fleet, 4)
        rig.apply(fleet)
        rig.converge(fleet)
        stepped_while_out = exit_time() is not None
        out_s = time.monotonic() - faulted
        if fault == "pause":
            os.kill(old.pid, signal.SIGCONT)
        elif fault == "partition":
            partition.heal()
        restored = time.monotonic()
        _until("the old leader to step down", lambda: exit_time() is not None, 30)
        stepped_down = exit_time() or 0.0
        figures = settled(rig, fleet)

    events = audit_events(rig.audit_log)[began_events:]
    acquired = [
        e
        for e in _by(events, new_name)
        if succeeded(e) and (e.get("objectRef") or {}).get("resource") == "leases"
    ]
    assert acquired, "the new leader's acquisition of the Lease is not in the audit log"
    took_at = _received(acquired[0])
    old_writes = _by(events, old_name)
    late = [_described(e) for e in old_writes if _received(e) >= took_at]
    assert not late, f"the old leader wrote {len(late)} times after the takeover: {late}"
    log = old.log.read_text()
    assert "stepping down" in log, "the old leader did not say it stepped down"

    if fault == "pause":
        step_down_s = stepped_down - restored
        # On its first write or its election loop's first tick after the pause.
        assert step_down_s <= STEP_DOWN_SLACK_SECONDS + RETRY_SECONDS, step_down_s
    elif fault == "partition":
        step_down_s = stepped_down - faulted
        assert stepped_while_out, "the cut-off leader did not step down while cut off"
        assert step_down_s <= RENEW_DEADLINE_SECONDS + STEP_DOWN_SLACK_SECONDS, step_down_s
    else:
        step_down_s = stepped_down - faulted
        # At its next renew, which reads the Lease.
        assert step_down_s <= RETRY_SECONDS + STEP_DOWN_SLACK_SECONDS, step_down_s
    return {
        "fault": fault,
        "models": size.models,
        "takeover_s": round(takeover_s, 1),
        "old_leader_out_s": round(out_s, 1),
        # From the resume (pause) or the fault (partition, hand-over).
        "step_down_s": round(step_down_s, 1),
        "stepped_down_while_cut_off": stepped_while_out if fault == "partition" else None,
        "old_leader_writes_after_fault": sum(1 for e in old_writes if _received(e) >= faulted_at),
        "old_leader_writes_after_takeover": len(late),
        **figures,
    }
