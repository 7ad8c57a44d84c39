"""The shipped alerts, checked and unit-tested by Prometheus' own promtool: each seen
firing on the series that should fire it and silent on their near misses."""

from __future__ import annotations

import subprocess
from pathlib import Path

from shoal.metrics.alerts import alerting_rules

REPO = Path(__file__).resolve().parents[2]
ALERTS = REPO / "manifests" / "monitoring" / "prometheus-alerts.yaml"
TESTS = Path(__file__).parent / "promtool" / "alerts_test.yaml"


def _test(promtool: str, alerts: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    tests = tmp_path / "alerts_test.yaml"
    tests.write_text(TESTS.read_text().replace("ALERTS", str(alerts)))
    return subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True)


def test_alerts_are_valid(promtool: str) -> None:
    result = subprocess.run(
        [promtool, "check", "rules", str(ALERTS)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 11 rules found" in result.stdout


def test_every_alert_fires_and_stays_silent_as_promised(promtool: str, tmp_path: Path) -> None:
    result = _test(promtool, ALERTS, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    tested = {
        line.split("alertname: ")[1]
        for line in TESTS.read_text().splitlines()
        if "alertname: " in line
    }
    shipped = {rule["alert"] for rule in alerting_rules()["groups"][0]["rules"]}
    assert tested == shipped, f"alerts without a promtool test: {shipped - tested}"


def test_a_wrong_threshold_is_caught(promtool: str, tmp_path: Path) -> None:
    """Control: a quota alert at 99% instead of 90% no longer fires at 95%."""
    broken = tmp_path / "alerts.yaml"
    broken.write_text(ALERTS.read_text().replace("> 0.9", "> 0.99"))
    assert broken.read_text() != ALERTS.read_text()
    result = _test(promtool, broken, tmp_path)
    assert result.returncode != 0
    assert "ShoalPoolQuotaNearlyFull" in result.stdout + result.stderr
