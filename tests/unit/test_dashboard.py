"""The Grafana dashboard queries only series the shipped rules or exporters produce."""

from __future__ import annotations

import json
import re
from pathlib import Path

from prometheus_client import REGISTRY, generate_latest

import shoal.telemetry  # noqa: F401  (registers the operator's gauges)
from shoal.metrics.pipeline import recording_rules

DASHBOARD = Path(__file__).resolve().parents[2] / "charts/shoal/files/grafana-dashboard.json"


def test_every_shoal_series_in_the_dashboard_is_recorded() -> None:
    records = {r["record"] for g in recording_rules()["groups"] for r in g["rules"]}
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    used = {name for e in exprs for name in re.findall(r"shoal:[a-z0-9_]+:[a-z]+", e)}
    assert used, exprs
    assert used <= records, used - records
    titles = " ".join(p["title"] for p in dashboard["panels"])
    for topic in (
        "Queue depth",
        "P95 / P99",
        "batch size",
        "warm pool",
        "GPU quota",
        "429s",
        "Gateway",
        "Predictive",
        "GPU utilisation",
        "GPU-seconds per 1,000 requests",
        "Mean queue time",
        "Elastic capacity: GPUs",
        "waiting for quota",
        "spilled to overflow replicas",
    ):
        assert topic in titles
    # The predictive panels read the operator's own gauges, which it exports by name.
    exported = {
        "shoal_model_required_replicas",
        "shoal_model_forecast_requests_per_second",
        "shoal_model_capacity_per_replica",
        "shoal_model_cold_start_seconds",
    }
    gauges = {name for e in exprs for name in re.findall(r"shoal_model_[a-z_]+", e)}
    assert gauges == exported, gauges
    metrics = generate_latest(REGISTRY).decode()
    for name in exported:
        assert f"# TYPE {name} gauge" in metrics, name


def test_the_elastic_capacity_panels_read_the_pool_gauges_the_operator_exports() -> None:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p["targets"]]
    gauges = {name for e in exprs for name in re.findall(r"shoal_pool_[a-z_]+", e)}
    assert gauges == {"shoal_pool_gpus", "shoal_pool_waiting_replicas"}, gauges
    metrics = generate_latest(REGISTRY).decode()
    for name in gauges:
        assert f"# TYPE {name} gauge" in metrics, name
