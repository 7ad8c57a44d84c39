"""Ejection on the real engine: a replica that stops answering (SIGSTOP) is taken out by
the gateway's checks within seconds and brought back after SIGCONT."""

from __future__ import annotations

import json
from pathlib import Path

from e2e import gateway_scenarios as scenarios


def test_a_frozen_replica_is_out_within_5_s_and_back_within_10_s(tmp_path: Path) -> None:
    f = scenarios.ejection(tmp_path, rate=150.0, stop_after_s=3.0, stopped_s=7.0, after_s=3.0)
    print(json.dumps(f, indent=1))
    assert f["out_after_s"] <= 5.0
    assert f["back_after_s"] <= 10.0
    assert f["failed_fraction"] <= 0.005
