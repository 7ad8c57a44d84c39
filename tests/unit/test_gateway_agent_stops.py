"""The gateway agent is its container's PID 1, and the kernel drops a signal sent to a
PID namespace's init unless init handles it: an agent without a SIGTERM handler made
every gateway pod wait out its 30 s grace period before the kubelet's SIGKILL (found on
the real node, where a pool's deletion took 40 s to clear its gateway). Each process
here runs as PID 1 of a PID namespace of its own, as in a container, and is sent SIGTERM
from outside it, as the container runtime does."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.support.wait import wait_for

pytestmark = pytest.mark.unit

AS_INIT = ["unshare", "--user", "--map-root-user", "--pid", "--fork", "--kill-child"]
WITH_HANDLER = (
    "from shoal.gateway.agent import stop_on_sigterm; stop_on_sigterm(); "
    "print('up', flush=True); import time; time.sleep(30)"
)
# It answers SIGWINCH, sent after SIGTERM: the answer proves SIGTERM came and went.
WITHOUT_HANDLER = (
    "import signal, time; "
    "signal.signal(signal.SIGWINCH, lambda *_: print('still here', flush=True)); "
    "print('up', flush=True); time.sleep(30)"
)


def _init_of(script: str) -> tuple[subprocess.Popen[str], int]:
    """``script`` running as PID 1 of a new PID namespace; the process and its PID here."""
    if shutil.which("unshare") is None:
        pytest.fail("unshare (util-linux) is needed to run a process as a namespace's init")
    runner = subprocess.Popen(
        [*AS_INIT, sys.executable, "-c", script], stdout=subprocess.PIPE, text=True
    )
    assert runner.stdout is not None
    assert runner.stdout.readline().strip() == "up"
    children = Path(f"/proc/{runner.pid}/task/{runner.pid}/children").read_text().split()
    return runner, int(children[0])


def _alive(pid: int) -> bool:
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "\nState:\tZ" not in status.read_text()


def test_the_agent_leaves_at_once_on_sigterm_as_pid_1() -> None:
    runner, init = _init_of(WITH_HANDLER)
    try:
        sent = time.monotonic()
        os.kill(init, signal.SIGTERM)
        wait_for("the agent to exit", lambda: _alive(init), lambda alive: not alive, timeout=5)
        assert time.monotonic() - sent < 5
    finally:
        runner.kill()
        runner.wait()


def test_a_process_without_the_handler_ignores_sigterm_as_pid_1() -> None:
    """The control: what the agent did before, so the test above can fail."""
    runner, init = _init_of(WITHOUT_HANDLER)
    try:
        os.kill(init, signal.SIGTERM)
        os.kill(init, signal.SIGWINCH)
        assert runner.stdout is not None
        assert runner.stdout.readline().strip() == "still here"
        assert _alive(init), "SIGTERM reached an init without a handler: the premise is gone"
    finally:
        runner.kill()
        runner.wait()
