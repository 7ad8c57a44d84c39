"""`up` starts every component, a second `up` reuses them, `down` leaves nothing behind."""

from __future__ import annotations

import os
import time
from pathlib import Path

from e2e.cluster import local


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_up_reuse_down_leaves_no_process(tmp_path: Path) -> None:
    cluster = local.LocalCluster(tmp_path / "cluster")
    started = time.monotonic()
    local.up(cluster)
    cold = time.monotonic() - started
    try:
        state = cluster.read_state()
        assert state is not None
        assert set(state.pids) == {
            "etcd",
            "kube-apiserver",
            "kube-controller-manager",
            "kube-scheduler",
            "kwok",
        }
        assert all(_alive(pid) for pid in state.pids.values())
        assert cluster.kubeconfig.exists()

        local.up(cluster)  # reuse: same processes, nothing restarted
        again = cluster.read_state()
        assert again is not None
        assert again.pids == state.pids
    finally:
        local.down(cluster)
    deadline = time.monotonic() + 5
    while any(_alive(pid) for pid in state.pids.values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = {name: pid for name, pid in state.pids.items() if _alive(pid)}
    assert left == {}, f"processes left behind: {left}"
    assert not cluster.kubeconfig.exists()
    print(f"local cluster cold start (binaries cached): {cold:.1f}s")
