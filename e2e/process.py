"""Helper processes the tests and benchmarks start (Prometheus, the metrics adapter,
the operator): waiting for one to answer, and stopping it."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx


def wait_http(
    url: str,
    what: str,
    proc: subprocess.Popen[bytes],
    log: Path,
    timeout: float = 60,
    verify: bool = True,
) -> None:
    """Until ``url`` answers 200; fails with the log's tail if the process exits first."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(url, timeout=2, verify=verify).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    raise RuntimeError(f"{what} not ready in {timeout:.0f}s:\n{log.read_text()[-3000:]}")


def stop(proc: subprocess.Popen[bytes], grace: float = 10) -> None:
    """SIGTERM, then SIGKILL after ``grace`` seconds."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(grace)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
