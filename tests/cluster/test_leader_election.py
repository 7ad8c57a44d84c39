"""Two operator replicas, one leader: the follower waits, answering its liveness probe,
takes over within the lease duration when the leader is killed (kill -9: no chance to
hand the Lease over), and at its next retry when the leader stops gracefully. Real
``shoal run`` processes as the operator's ServiceAccount, with the Role manifests/base
grants for the Lease.

Only the leader runs kopf. Every replica serves its metrics (a target that answered
only while leading would read as down), and ``shoal_leader`` says which one leads: a
follower reports 0 and no pass.
"""

from __future__ import annotations

import os
import signal
import time
import uuid
from pathlib import Path

import httpx
from e2e.operator import running_operator
from kubernetes import client

from shoal.leader import LEASE_NAME, LEASE_SECONDS, RETRY_SECONDS
from tests.support.shoal_objects import Shoal, batch_policy
from tests.support.wait import wait_for

LEASE_NAMESPACE = "shoal-system"


def _holder(coordination: client.CoordinationV1Api) -> str | None:
    try:
        lease = coordination.read_namespaced_lease(LEASE_NAME, LEASE_NAMESPACE)
    except client.ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return lease.spec.holder_identity if lease.spec else None


def _serves(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def _leads(metrics_url: str) -> bool:
    """The replica serves metrics and reports itself the leader."""
    try:
        text = httpx.get(metrics_url, timeout=2).text
    except httpx.HTTPError:
        return False
    return "\nshoal_leader 1.0\n" in f"\n{text}"


def _reconciles(metrics_url: str) -> float:
    text = httpx.get(metrics_url, timeout=5).text
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("shoal_reconciles_total{")
    )


def _settings(name: str, namespace: str) -> dict[str, str]:
    return {
        "SHOAL_LEADER_ELECTION_NAMESPACE": LEASE_NAMESPACE,
        "POD_NAME": name,
        "SHOAL_NAMESPACES": namespace,
    }


def _forget_lease(coordination: client.CoordinationV1Api) -> None:
    try:
        coordination.delete_namespaced_lease(LEASE_NAME, LEASE_NAMESPACE)
    except client.ApiException as exc:
        if exc.status != 404:
            raise


def test_the_follower_takes_over_when_the_leader_is_killed(
    api: client.ApiClient, operator_kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    coordination = client.CoordinationV1Api(api)
    run = uuid.uuid4().hex[:6]
    first, second = f"shoal-operator-a-{run}", f"shoal-operator-b-{run}"

    def settings(name: str) -> dict[str, str]:
        return _settings(name, namespace)

    try:
        with running_operator(
            operator_kubeconfig, tmp_path / "a.log", env=settings(first)
        ) as leader:
            wait_for("a to lead", lambda: _holder(coordination), lambda h: h == first, timeout=60)
            wait_for("a to reconcile", lambda: _leads(leader.metrics_url), bool, timeout=60)
            with running_operator(
                operator_kubeconfig, tmp_path / "b.log", env=settings(second)
            ) as follower:
                # The follower is alive for its probes and serves its metrics, and does
                # nothing else: no kopf, no pass, through two renewals of the leader's
                # Lease (each a chance for the follower's own tries to take it).
                renewals: list[object] = []

                def renewed() -> int:
                    lease = coordination.read_namespaced_lease(LEASE_NAME, LEASE_NAMESPACE)
                    when = lease.spec.renew_time if lease.spec else None
                    if not renewals or renewals[-1] != when:
                        renewals.append(when)
                    return len(renewals)

                wait_for(
                    "two renewals by a",
                    renewed,
                    lambda seen: seen >= 3,
                    timeout=4 * RETRY_SECONDS + 5,
                    interval=0.2,
                )
                assert _serves(follower.health_url)
                assert _serves(follower.metrics_url)
                assert not _leads(follower.metrics_url)
                assert _reconciles(follower.metrics_url) == 0
                assert _holder(coordination) == first

                os.kill(leader.pid, signal.SIGKILL)
                killed = time.monotonic()
                wait_for(
                    "b to take the Lease",
                    lambda: _holder(coordination),
                    lambda h: h == second,
                    timeout=LEASE_SECONDS + 30,
                    interval=0.2,
                )
                took_lease = time.monotonic() - killed
                wait_for("b to run", lambda: _leads(follower.metrics_url), bool, timeout=60)
                running = time.monotonic() - killed
                print(f"takeover: Lease in {took_lease:.1f} s, reconciling in {running:.1f} s")
                # A Lease is taken only after it has gone unrenewed for its duration.
                assert took_lease <= LEASE_SECONDS + 2 * RETRY_SECONDS + 3, took_lease

                # The new leader reconciles what comes next.
                before = _reconciles(follower.metrics_url)
                Shoal(api).create(batch_policy("after-takeover"), namespace)
                wait_for(
                    "b to reconcile the new BatchPolicy",
                    lambda: _reconciles(follower.metrics_url),
                    lambda n: n > before,
                    timeout=30,
                )
    finally:
        _forget_lease(coordination)


def test_a_leader_that_stops_hands_the_lease_over(
    api: client.ApiClient, operator_kubeconfig: Path, namespace: str, tmp_path: Path
) -> None:
    """SIGTERM (a rolling update, a drain): the leader stops reconciling and clears the
    Lease's holder, and the follower leads at its next retry, not a lease duration on."""
    coordination = client.CoordinationV1Api(api)
    run = uuid.uuid4().hex[:6]
    first, second = f"shoal-operator-c-{run}", f"shoal-operator-d-{run}"
    try:
        with running_operator(
            operator_kubeconfig, tmp_path / "c.log", env=_settings(first, namespace)
        ) as leader:
            wait_for("c to lead", lambda: _holder(coordination), lambda h: h == first, timeout=60)
            with running_operator(
                operator_kubeconfig, tmp_path / "d.log", env=_settings(second, namespace)
            ) as follower:
                wait_for("c to reconcile", lambda: _leads(leader.metrics_url), bool, timeout=60)
                os.kill(leader.pid, signal.SIGTERM)
                stopped = time.monotonic()
                wait_for(
                    "d to take the Lease",
                    lambda: _holder(coordination),
                    lambda h: h == second,
                    timeout=LEASE_SECONDS + 30,
                    interval=0.2,
                )
                took_lease = time.monotonic() - stopped
                wait_for("d to run", lambda: _leads(follower.metrics_url), bool, timeout=60)
                print(f"handover: Lease in {took_lease:.1f} s")
                # Well before the Lease could have expired.
                assert took_lease < LEASE_SECONDS / 2, took_lease
        assert "released the leader Lease" in (tmp_path / "c.log").read_text()
    finally:
        _forget_lease(coordination)
