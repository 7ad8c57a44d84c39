"""Running the real operator process (``shoal run``) against a cluster: for the tests
and the control-plane benchmark."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from e2e.cluster.local import free_port

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
    kubeconfig: Path, log: Path, *, resync_seconds: float = RESYNC_SECONDS
) -> Iterator[OperatorProcess]:
    """``shoal run`` as a subprocess, healthy before the block starts; stopped after."""
    port, metrics_port = free_port(), free_port()
    env = dict(
        os.environ,
        KUBECONFIG=str(kubeconfig),
        SHOAL_RESYNC_SECONDS=f"{resync_seconds:g}",
        SHOAL_LIVENESS_ENDPOINT=f"http://127.0.0.1:{port}/healthz",
        SHOAL_METRICS_PORT=str(metrics_port),
    )
    shoal = Path(sys.executable).parent / "shoal"
    with log.open("wb") as out:
        proc = subprocess.Popen([str(shoal), "run"], env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"operator exited {proc.returncode}:\n{log.read_text()[-3000:]}")
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"operator not healthy in 60s:\n{log.read_text()[-3000:]}")
            time.sleep(0.3)
        yield OperatorProcess(
            log,
            f"http://127.0.0.1:{port}/healthz",
            f"http://127.0.0.1:{metrics_port}/metrics",
            proc.pid,
        )
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
