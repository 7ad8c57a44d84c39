"""Runaway requests on the real engine: a model that hangs answers 504 at its route's
timeout, its slots are freed, and another model's requests are still all served.

Their latency during the hang against before it is a figure of
``python -m benchmarks.gateway``, not a pass/fail here."""

from __future__ import annotations

import json
from pathlib import Path

from e2e import gateway_scenarios as scenarios


def test_a_hanging_model_gets_504_at_its_timeout(tmp_path: Path) -> None:
    f = scenarios.runaway(
        tmp_path, timeout_ms=1000, hung_requests=4, rate=40.0, phase_s=3.0, baseline=False
    )
    print(json.dumps(f, indent=1))
    assert f["hung_statuses"] == {"504": 4}
    assert f["worst_deviation"] <= 0.1  # 504 at the timeout +-10%
    assert f["in_flight_after"] == 0  # their slots are free again
    assert f["exporter_response_errors"] == 4.0
    during = f["others_during"]
    assert during["requests"] > 0
    assert during["statuses"] == {"200": during["requests"]}
