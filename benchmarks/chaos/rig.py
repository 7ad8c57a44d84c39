"""The chaos rig: a local cluster of its own, the operator as a process it can kill, and
the means to tell when the fleet has converged and what the operator wrote.

The cluster is the control-plane benchmark's (its simulated GPU nodes, 50 tenant
namespaces, four pools, an API server audit log of the operator's requests), started
fresh for the rig, so restarting its API server or etcd disturbs nothing else. The
operator runs as ``shoal run`` under its least-privilege ServiceAccount, as in every
tier.
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import yaml
from e2e.cluster import local
from e2e.install import install_crds, kubectl_for, operator_kubeconfig
from e2e.operator import OperatorProcess, running_operator

from benchmarks import control_plane as bench
from benchmarks.chaos.fleet import EndState, end_state
from shoal.kube.paths import path_of

# Short enough that a no-op resync is observed in seconds, long enough that 200 models'
# passes do not keep this machine busy.
RESYNC_SECONDS = 10.0
# The admin's requests (applies, deletes) give up and are retried after this long: one
# sent to an API server as it is killed or still starting must not hold the wave up
# for the client's default 30 s.
ADMIN_TIMEOUT_SECONDS = 5.0
POLL_SECONDS = 1.0
# Answers a client retries when the API server is away or shedding load.
RETRIABLE = frozenset({429, 500, 502, 503, 504})
# The admission policy's answers while the API server is still resolving, then
# syncing, its TenantPool parameters after a restart (kubernetes#124237, #141367).
POLICY_WARMING = (
    "failed to find resource referenced by paramKind",
    "not yet synced to use for admission",
)


def audit_events(audit_log: Path) -> list[dict[str, Any]]:
    """The operator's completed write requests (the audit policy logs nothing else)."""
    if not audit_log.exists():
        return []
    # The API server may be writing the last line: read only complete ones.
    lines = audit_log.read_text().split("\n")[:-1]
    events = (json.loads(line) for line in lines)
    return [e for e in events if e.get("stage") == "ResponseComplete"]


def succeeded(event: dict[str, Any]) -> bool:
    return int((event.get("responseStatus") or {}).get("code", 0)) < 400


@dataclass
class Rig:
    cluster: local.LocalCluster
    sa_kubeconfig: Path
    work: Path
    # The operator's resync period (a no-op resync is observed over two of them).
    resync_seconds: float = RESYNC_SECONDS
    stack: ExitStack = field(default_factory=ExitStack)
    operator: OperatorProcess | None = None
    operator_starts: int = 0
    # What the last convergence wait saw last before the end state was exact.
    last_pending: str = ""

    # ----------------------------------------------------------------- the operator
    def start_operator(
        self, env: dict[str, str] | None = None, kubeconfig: Path | None = None
    ) -> OperatorProcess:
        """``shoal run`` (healthy before this returns); a new log per start. With
        ``kubeconfig``, it reaches the API server by that one (the same credentials)."""
        self.operator_starts += 1
        log = self.work / f"operator-{self.operator_starts}.log"
        self.operator = self.stack.enter_context(
            running_operator(
                kubeconfig or self.sa_kubeconfig,
                log,
                resync_seconds=self.resync_seconds,
                env=env,
            )
        )
        return self.operator

    def kill_operator(self) -> None:
        """kill -9: no graceful stop, no Lease handed over, a pass cut wherever it is."""
        assert self.operator is not None
        os.kill(self.operator.pid, signal.SIGKILL)
        self.operator = None

    def stop(self) -> None:
        """Stop whatever the rig started (the operator), gracefully."""
        self.stack.close()
        self.stack = ExitStack()
        self.operator = None

    # ----------------------------------------------------------------- the cluster
    def http(self, timeout: float = 30.0) -> httpx.Client:
        return local.admin_client(self.cluster, timeout)

    @property
    def audit_log(self) -> Path:
        return self.cluster.logs / "audit.log"

    def writes(self) -> int:
        """The operator's successful writes so far (every create, update, patch, delete)."""
        return sum(1 for e in audit_events(self.audit_log) if succeeded(e))

    def apply(self, docs: list[dict[str, Any]]) -> None:
        """Server-side apply ``docs`` as an admin would, retrying while the API server is
        away or shedding load (the admin's side of a fault is not under test)."""

        def one(http: httpx.Client, doc: dict[str, Any]) -> None:
            _retrying(
                lambda: http.patch(
                    path_of(doc),
                    params={"fieldManager": "chaos-admin", "force": "true"},
                    headers={"Content-Type": "application/apply-patch+yaml"},
                    content=json.dumps(doc),
                )
            )

        bench.parallel(self.cluster, docs, one, timeout=ADMIN_TIMEOUT_SECONDS)

    def delete(self, docs: list[dict[str, Any]]) -> None:
        def one(http: httpx.Client, doc: dict[str, Any]) -> None:
            _retrying(lambda: http.delete(path_of(doc)), also_ok=(404,))

        bench.parallel(self.cluster, docs, one, timeout=ADMIN_TIMEOUT_SECONDS)

    def reset(self, fleet: list[dict[str, Any]]) -> None:
        """Make the cluster's models exactly ``fleet``: apply it, delete every other."""
        with self.http() as http:
            items = http.get(f"{bench.GROUP_PATH}/inferencemodels").raise_for_status().json()
        wanted = {(d["metadata"]["namespace"], d["metadata"]["name"]) for d in fleet}
        self.delete(
            [
                {"apiVersion": i["apiVersion"], "kind": i["kind"], "metadata": i["metadata"]}
                for i in items["items"]
                if (i["metadata"]["namespace"], i["metadata"]["name"]) not in wanted
            ]
        )
        self.apply(fleet)

    def end_state(self, models: list[dict[str, Any]], autoscaled: bool = True) -> EndState:
        with self.http() as http:
            return end_state(http, models, autoscaled)

    def converge(
        self, models: list[dict[str, Any]], timeout: float = 300.0, autoscaled: bool = True
    ) -> float:
        """Seconds until the fleet's end state is exact; fails with what differs.
        ``autoscaled``: every model's HPA has been evaluated (False for an operator older
        than the AutoscalerReady condition)."""
        began = time.monotonic()
        state: EndState | str = "<not read yet>"
        while time.monotonic() - began < timeout:
            try:
                state = self.end_state(models, autoscaled)
                if state.converged:
                    return time.monotonic() - began
            except httpx.HTTPError as exc:
                state = f"{type(exc).__name__}: {exc}"
            self.last_pending = f"{time.monotonic() - began:.1f} s in: {state}"
            time.sleep(POLL_SECONDS)
        raise AssertionError(f"not converged after {timeout:.0f} s: {state}")

    def noop_writes(self, rounds: int = 2, timeout: float = 180.0) -> tuple[list[str], int]:
        """The operator's writes (``verb resource namespace/name``) while it runs
        ``rounds`` more resync rounds with a pass over every object each, and the passes
        it ran: proof by passes, not by a sleep."""
        assert self.operator is not None
        url = self.operator.metrics_url
        events_before = len(audit_events(self.audit_log))
        resyncs_before = sum(_plain(url, "shoal_resyncs_total"))
        passes_before = bench.reconcile_count(url)
        served = sum(bench.counters(url, "shoal_managed_objects").values())
        deadline = time.monotonic() + timeout
        while True:
            resynced = sum(_plain(url, "shoal_resyncs_total")) - resyncs_before
            passes = bench.reconcile_count(url) - passes_before
            if resynced >= rounds and passes >= rounds * served:
                break
            if time.monotonic() > deadline:
                raise AssertionError(f"{resynced} resync rounds, {passes} passes in {timeout} s")
            time.sleep(POLL_SECONDS)
        # The leader renewing its Lease is the election's heartbeat, not a reconcile.
        writes = [
            _described(e)
            for e in audit_events(self.audit_log)[events_before:]
            if succeeded(e) and (e.get("objectRef") or {}).get("resource") != "leases"
        ]
        return writes, round(passes)


def _described(event: dict[str, Any]) -> str:
    ref = event.get("objectRef") or {}
    resource = ref.get("resource", "?") + (
        f"/{ref['subresource']}" if ref.get("subresource") else ""
    )
    return f"{event['verb']} {resource} {ref.get('namespace', '')}/{ref.get('name', '')}"


def _plain(metrics_url: str, name: str) -> list[float]:
    """Values of an unlabelled metric ``name``."""
    text = httpx.get(metrics_url, timeout=10).text
    return [float(line.split(" ")[1]) for line in text.splitlines() if line.startswith(name + " ")]


def _policy_warming(response: httpx.Response) -> bool:
    """The admission policy refuses everything for a while after an API server restart,
    until the API server has found the TenantPool kind again and synced its objects; an
    admin's apply meeting it is retried, as a GitOps controller would."""
    return response.status_code == 422 and any(m in response.text for m in POLICY_WARMING)


def _retrying(
    request: Callable[[], httpx.Response], also_ok: tuple[int, ...] = (), timeout: float = 120.0
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            response = request()
            if response.status_code in also_ok or response.status_code < 400:
                return
            if response.status_code not in RETRIABLE and not _policy_warming(response):
                raise AssertionError(
                    f"{response.request.method} {response.request.url.path}: "
                    f"{response.status_code} {response.text}"
                )
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            raise TimeoutError("the API server did not take the request in time")
        time.sleep(0.5)


@contextmanager
def rig(
    work: Path,
    resync_seconds: float = RESYNC_SECONDS,
    hpa_sync_period: str = bench.UPSTREAM_HPA_SYNC_PERIOD,
) -> Iterator[Rig]:
    """A fresh local cluster with the CRDs, the benchmark's pools and the operator's
    ServiceAccount; the operator is started by each scenario. A small fleet can afford
    a shorter resync and HPA sync than ``make chaos`` runs with."""
    with bench.fresh_cluster(work, hpa_sync_period) as cluster:
        kubectl = kubectl_for(cluster.kubeconfig)
        install_crds(kubectl)
        sa_kubeconfig = operator_kubeconfig(cluster.kubeconfig, kubectl, work / "operator-sa")
        pools = work / "pools.yaml"
        pools.write_text(yaml.safe_dump_all(bench.pools()))
        kubectl("apply", "--server-side", f"--filename={pools}")
        the_rig = Rig(cluster, sa_kubeconfig, work, resync_seconds)
        try:
            yield the_rig
        finally:
            the_rig.stop()
