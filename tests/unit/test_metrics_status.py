"""How figures from Prometheus become a model's status (pure)."""

from __future__ import annotations

from shoal.metrics.reader import Figures
from shoal.metrics.status import format_seconds, metrics_status


def test_figures_become_status_fields() -> None:
    fields, cond = metrics_status(
        Figures(
            {
                "queueDepth": 12.0,
                "p95Seconds": 0.0423,
                "averageBatchSize": 6.5,
                "requestRate": 210.0,
            }
        )
    )
    assert fields == {
        "queueDepth": 12.0,
        "p95Latency": "42ms",
        "averageBatchSize": 6.5,
        "requestRate": 210.0,
    }
    assert (cond.type, cond.status, cond.reason) == ("MetricsAvailable", "True", "Scraped")


def test_unreachable_and_unconfigured_say_so() -> None:
    fields, cond = metrics_status(Figures({}, "ConnectionError: refused"))
    assert fields == {}
    assert (cond.status, cond.reason) == ("False", "PrometheusUnreachable")
    assert metrics_status(None)[1].reason == "PrometheusNotConfigured"
    assert metrics_status(Figures({}))[1].reason == "NoSamples"


def test_format_seconds() -> None:
    assert format_seconds(0.0123) == "12ms"
    assert format_seconds(1.5) == "1.50s"
