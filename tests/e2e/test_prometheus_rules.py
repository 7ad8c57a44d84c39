"""The shipped recording rules, checked and unit-tested by Prometheus' own promtool."""

from __future__ import annotations

import subprocess
from pathlib import Path

from shoal.metrics.pipeline import recording_rules

REPO = Path(__file__).resolve().parents[2]
RULES = REPO / "manifests" / "monitoring" / "prometheus-rules.yaml"
TESTS = Path(__file__).parent / "promtool" / "rules_test.yaml"


def test_rules_are_valid(promtool: str) -> None:
    result = subprocess.run(
        [promtool, "check", "rules", str(RULES)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    generated = sum(len(group["rules"]) for group in recording_rules()["groups"])
    assert f"SUCCESS: {generated} rules found" in result.stdout


def test_rules_compute_what_they_promise(promtool: str, tmp_path: Path) -> None:
    tests = tmp_path / "rules_test.yaml"
    tests.write_text(TESTS.read_text().replace("RULES", str(RULES)))
    result = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS" in result.stdout


def test_a_wrong_expectation_fails(promtool: str, tmp_path: Path) -> None:
    """Control: promtool does compare, so a wrong value is caught."""
    tests = tmp_path / "rules_test.yaml"
    tests.write_text(
        TESTS.read_text().replace("RULES", str(RULES)).replace("value: 0.08", "value: 0.05")
    )
    result = subprocess.run([promtool, "test", "rules", str(tests)], capture_output=True, text=True)
    assert result.returncode != 0
