"""Runaway requests on the real engine: a model that hangs answers 504 at its route's
timeout, its slots are freed, and another model's requests are unaffected."""

from __future__ import annotations

import json
from pathlib import Path

from e2e import gateway_scenarios as scenarios


def test_a_hanging_model_gets_504_at_its_timeout(tmp_path: Path) -> None:
    f = scenarios.runaway(tmp_path, timeout_ms=1000, hung_requests=4, rate=40.0, phase_s=3.0)
    print(json.dumps(f, indent=1))
    assert f["hung_statuses"] == {"504": 4}
    assert f["worst_deviation"] <= 0.1  # 504 at the timeout +-10%
    assert f["in_flight_after"] == 0  # their slots are free again
    assert f["exporter_response_errors"] == 4.0
    before, during = f["others_before"], f["others_during"]
    assert before["statuses"] == {"200": before["requests"]}
    assert during["statuses"] == {"200": during["requests"]}
    assert during["p50_ms"] <= 1.5 * before["p50_ms"] + 5
