"""The operator process itself: liveness that proves watch freshness, and its metrics."""

from __future__ import annotations

import httpx
from kubernetes import client

from tests.support.operator import OperatorProcess
from tests.support.shoal_objects import Shoal, inference_model, wait_ready


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
