"""Running the real operator process (``shoal run``) against a cluster: for the tests
and the control-plane benchmark."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from e2e.cluster.local import free_port
from e2e.process import stop, wait_http

RESYNC_SECONDS = 3


@dataclass(frozen=True)
class OperatorProcess:
    """A running ``shoal run``: its log and its endpoints."""

    log: Path
    health_url: str
    metrics_url: str
    pid: int


@contextmanager
def running_operator(
    kubeconfig: Path,
    log: Path,
    *,
    resync_seconds: float = RESYNC_SECONDS,
    env: dict[str, str] | None = None,
) -> Iterator[OperatorProcess]:
    """``shoal run`` as a subprocess, healthy before the block starts; stopped after.
    ``env`` adds settings (``SHOAL_*``)."""
    port, metrics_port = free_port(), free_port()
    env = dict(
        os.environ,
        **(env or {}),
        KUBECONFIG=str(kubeconfig),
        SHOAL_RESYNC_SECONDS=f"{resync_seconds:g}",
        SHOAL_LIVENESS_ENDPOINT=f"http://127.0.0.1:{port}/healthz",
        SHOAL_METRICS_PORT=str(metrics_port),
    )
    shoal = Path(sys.executable).parent / "shoal"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(shoal), "run"], env=env, stdout=out, stderr=subprocess.STDOUT)
    health_url = f"http://127.0.0.1:{port}/healthz"
    try:
        wait_http(health_url, "operator", proc, log)
        yield OperatorProcess(log, health_url, f"http://127.0.0.1:{metrics_port}/metrics", proc.pid)
    finally:
        stop(proc, grace=15)


@contextmanager
def paused(process: OperatorProcess) -> Iterator[None]:
    """``process`` stopped (SIGSTOP) for the block, then resumed. In a cluster one
    operator serves an object at a time (leader election sees to it); a test that runs
    an operator of its own with other settings pauses the session's, which would
    otherwise answer each of its status writes with its own. Resumed, the session's
    operator re-opens what timed out and its periodic pass repairs its cache."""
    os.kill(process.pid, signal.SIGSTOP)
    try:
        yield
    finally:
        os.kill(process.pid, signal.SIGCONT)
