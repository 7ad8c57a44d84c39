"""A model's status fields and MetricsAvailable condition from its figures (pure)."""

from __future__ import annotations

from typing import Any

from shoal.metrics.reader import Figures
from shoal.reconcile.conditions import Cond


def format_seconds(seconds: float) -> str:
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    return f"{seconds:.2f}s"


def metrics_status(figures: Figures | None) -> tuple[dict[str, Any], Cond]:
    """Status fields to set, and the MetricsAvailable condition.

    ``None`` means Prometheus is not configured. An unreachable Prometheus leaves the
    figures out and says so; the operator keeps reconciling either way.
    """
    if figures is None:
        return {}, Cond(
            "MetricsAvailable",
            "Unknown",
            "PrometheusNotConfigured",
            "Set SHOAL_PROMETHEUS_URL to show queue depth and latency here.",
        )
    if figures.error is not None:
        return {}, Cond("MetricsAvailable", "False", "PrometheusUnreachable", figures.error)
    values = figures.values
    if not values:
        return {}, Cond(
            "MetricsAvailable",
            "False",
            "NoSamples",
            "Prometheus has no samples for this model yet.",
        )
    fields: dict[str, Any] = {}
    if "queueDepth" in values:
        fields["queueDepth"] = round(values["queueDepth"], 2)
    if "p95Seconds" in values:
        fields["p95Latency"] = format_seconds(values["p95Seconds"])
    if "averageBatchSize" in values:
        fields["averageBatchSize"] = round(values["averageBatchSize"], 2)
    if "requestRate" in values:
        fields["requestRate"] = round(values["requestRate"], 2)
    return fields, Cond("MetricsAvailable", "True", "Scraped", "Figures from Prometheus.")
