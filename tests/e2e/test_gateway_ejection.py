"""Ejection on the real engine: a replica that stops answering (SIGSTOP) is taken out by
the gateway's checks within seconds and brought back after SIGCONT. The share of
requests lost meanwhile is a figure of ``python -m benchmarks.gateway`` (target
<= 0.5%)."""

from __future__ import annotations

import json
from pathlib import Path

from e2e import gateway_scenarios as scenarios


def test_a_frozen_replica_is_out_within_5_s_and_back_within_10_s(tmp_path: Path) -> None:
    # Frozen for 6 s: past the 5 s it may take to be taken out.
    f = scenarios.ejection(tmp_path, rate=150.0, stop_after_s=1.5, stopped_s=6.0, after_s=1.0)
    print(json.dumps(f, indent=1))
    assert f["out_after_s"] <= 5.0
    assert f["back_after_s"] <= 10.0
