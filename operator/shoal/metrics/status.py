"""A model's status fields and MetricsAvailable condition from its figures (pure)."""

from __future__ import annotations

from typing import Any

from shoal.metrics.reader import Figures
from shoal.reconcile.conditions import Cond


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
    if "p99Seconds" in values:
        fields["p99Latency"] = format_seconds(values["p99Seconds"])
    if "meanQueueSeconds" in values:
        fields["meanQueueTime"] = format_seconds(values["meanQueueSeconds"])
    if "gpuUtilization" in values:
        fields["gpuUtilization"] = round(values["gpuUtilization"], 2)
    if "gpuMemoryBytes" in values:
        fields["gpuMemory"] = format_bytes(values["gpuMemoryBytes"])
    if "gpuSecondsPer1kRequests" in values:
        fields["gpuSecondsPer1kRequests"] = round(values["gpuSecondsPer1kRequests"], 2)
    return fields, Cond("MetricsAvailable", "True", "Scraped", "Figures from Prometheus.")
