"""Servers added and removed by new configurations, reloaded under load, on the real
engine: no request fails, and a removed replica is stopped only once no worker sends it
anything (as a terminating pod's pre-stop pause allows). The rate sustained is a
figure of ``python -m benchmarks.gateway``."""

from __future__ import annotations

import json
from pathlib import Path

from e2e import gateway_scenarios as scenarios


def test_servers_come_and_go_without_a_failed_request(tmp_path: Path) -> None:
    f = scenarios.scaling(tmp_path, clients=12, hold_s=2.0)
    print(json.dumps(f, indent=1))
    assert f["failed"] == 0
    assert f["requests"] > 0
    assert [step["servers"] for step in f["steps"]] == [
        ["triton-0", "triton-1", "triton-2"],
        ["triton-1", "triton-2"],
        ["triton-2"],
        ["triton-1", "triton-2"],
    ]
    # The last worker spreads its requests over both servers it has.
    assert all(n > 0 for n in f["last_worker_requests_per_server"].values())
