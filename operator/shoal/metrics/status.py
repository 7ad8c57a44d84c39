"""A model's status fields and MetricsAvailable condition from its figures (pure)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from shoal.api.conditions import Cond
from shoal.metrics.reader import Figures


def format_seconds(seconds: float) -> str:
    if seconds < 0.001:
        return f"{seconds * 1e6:.0f}us"
    if seconds < 1:
        return f"{seconds * 1000:.0f}ms"
    return f"{seconds:.2f}s"


def format_bytes(count: float) -> str:
    """Bytes as a Kubernetes quantity, in the largest binary unit that keeps a whole
    number of tenths: 22000000000 -> 20.5Gi."""
    for unit, size in (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if count >= size:
            return f"{count / size:.1f}".removesuffix(".0") + unit
    return f"{count:.0f}"


def _rounded(value: float) -> float:
    return round(value, 2)


# Each figure the reader asks Prometheus for, the status field it becomes, and how.
STATUS_FIELDS: tuple[tuple[str, str, Callable[[float], Any]], ...] = (
    ("queueDepth", "queueDepth", _rounded),
    ("p95Seconds", "p95Latency", format_seconds),
    ("averageBatchSize", "averageBatchSize", _rounded),
    ("requestRate", "requestRate", _rounded),
    ("p99Seconds", "p99Latency", format_seconds),
    ("meanQueueSeconds", "meanQueueTime", format_seconds),
    ("gpuUtilization", "gpuUtilization", _rounded),
    ("gpuMemoryBytes", "gpuMemory", format_bytes),
    ("gpuSecondsPer1kRequests", "gpuSecondsPer1kRequests", _rounded),
)


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
    fields = {field: show(values[key]) for key, field, show in STATUS_FIELDS if key in values}
    return fields, Cond("MetricsAvailable", "True", "Scraped", "Figures from Prometheus.")
