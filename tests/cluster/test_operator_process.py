"""The operator process itself: liveness that proves watch freshness, and its metrics."""

from __future__ import annotations

import json
from pathlib import Path

import httpx
from e2e.operator import RESYNC_SECONDS, OperatorProcess, running_operator
from kubernetes import client

from tests.support.passes import wait_for_passes
from tests.support.shoal_objects import Shoal, inference_model, wait_ready
from tests.support.wait import wait_for


def test_liveness_reports_a_fresh_watch(operator: OperatorProcess) -> None:
    reply = httpx.get(operator.health_url, timeout=10)
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert "watch" in body, body  # the freshness probe ran (count of watched models)
    assert "version" in body


def test_metrics_count_reconciles_and_writes(
    operator: OperatorProcess, api: client.ApiClient, namespace: str
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("counted", pool), namespace)
        wait_ready(shoal, namespace, "counted")
    text = httpx.get(operator.metrics_url, timeout=10).text
    for name in (
        "shoal_reconciles_total",
        "shoal_reconcile_duration_seconds_bucket",
        "shoal_api_writes_total",
        "shoal_watch_stale_objects",
    ):
        assert name in text, f"{name} missing"
    writes = [
        line
        for line in text.splitlines()
        if line.startswith('shoal_api_writes_total{kind="Deployment"}')
    ]
    assert writes, "no Deployment writes counted"
    assert float(writes[0].split()[-1]) >= 1, writes


def _writes(metrics_url: str) -> dict[str, float]:
    text = httpx.get(metrics_url, timeout=10).text
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("shoal_api_writes_total{")
    }


def test_a_converged_operator_writes_nothing(
    operator: OperatorProcess, api: client.ApiClient, namespace: str
) -> None:
    """Once a pool and its model are Ready, resync passes send no write at all: every
    object applied already holds what would be written. A desired field the API server
    drops (a false PriorityClass.globalDefault did) would be re-sent on every pass."""
    shoal = Shoal(api)
    with shoal.pool([namespace]) as pool:
        shoal.create(inference_model("quiet", pool), namespace)
        wait_ready(shoal, namespace, "quiet")
        previous: dict[str, dict[str, float]] = {"writes": {}}

        def settled(now: dict[str, float]) -> bool:
            same = now == previous["writes"]
            previous["writes"] = now
            return same

        wait_for(
            "a period without operator writes",
            lambda: _writes(operator.metrics_url),
            settled,
            timeout=120,
            interval=2 * RESYNC_SECONDS,
        )
        before = _writes(operator.metrics_url)
        wait_for_passes(operator.metrics_url, rounds=3)
        after = _writes(operator.metrics_url)
    changed = {k: after[k] - before.get(k, 0.0) for k in after if after[k] != before.get(k)}
    assert not changed, f"writes during resync passes over converged objects: {changed}"


def test_json_logs_are_one_object_per_line(
    operator_kubeconfig: Path, api: client.ApiClient, namespace: str, tmp_path: Path
) -> None:
    """SHOAL_LOG_FORMAT=json: every line the operator writes is a JSON object with a
    message and a level, for log pipelines, including those of its passes."""
    log = tmp_path / "operator.log"
    shoal = Shoal(api)
    settings = {"SHOAL_LOG_FORMAT": "json", "SHOAL_NAMESPACES": namespace}
    with running_operator(operator_kubeconfig, log, env=settings), shoal.pool([namespace]) as pool:
        shoal.create(inference_model("logged", pool), namespace)
        wait_ready(shoal, namespace, "logged")
    lines = [line for line in log.read_text().splitlines() if line.strip()]
    assert len(lines) > 3, lines
    records = [json.loads(line) for line in lines]
    assert all("message" in r and "severity" in r for r in records), records[:3]
    assert any("started" in r["message"] for r in records), records[:5]
