"""The gateway's cost on the real engine: throughput at a P95 target and median latency,
straight to Triton and through the gateway (token verified, two hops), side by side."""

from __future__ import annotations

import json
from pathlib import Path

from e2e import gateway_scenarios as scenarios


def test_the_gateway_costs_under_5_percent_throughput_and_1_ms(tmp_path: Path) -> None:
    figures = scenarios.overhead(tmp_path, levels=(4, 8, 16, 24), seconds=2.0, latency_requests=150)
    print(json.dumps({k: v for k, v in figures.items() if k != "ladders"}, indent=1))
    assert figures["throughput_at_target"]["direct"], "Triton alone never met the P95 target"
    assert figures["throughput_ratio"] >= 0.95
    assert figures["added_median_ms"] <= 1.0
