"""Reading a model's figures back from Prometheus, for its status and printer columns."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

from prometheus_api_client import PrometheusConnect
from prometheus_api_client.exceptions import PrometheusApiClientException
from requests.exceptions import RequestException

QUERIES = {
    "queueDepth": "shoal:queue_depth:model",
    "p95Seconds": "shoal:request_p95_seconds:model",
    "averageBatchSize": "shoal:average_batch_size:model",
    "requestRate": "shoal:request_rate:model",
    "p99Seconds": "shoal:request_p99_seconds:model",
    "meanQueueSeconds": "shoal:queue_seconds_mean:model",
    "gpuUtilization": "shoal:gpu_utilization:model",
    "gpuMemoryBytes": "shoal:gpu_memory_used_bytes:model",
    "gpuSecondsPer1kRequests": "shoal:gpu_seconds_per_1k_requests:model",
}


@dataclass(frozen=True)
class Figures:
    """What Prometheus knows about one model; ``error`` when it could not be asked."""

    values: dict[str, float]
    error: str | None = None


class MetricsReader:
    def __init__(self, url: str, timeout: float = 5.0) -> None:
        self.url = url
        self._prom = PrometheusConnect(url=url, disable_ssl=True, timeout=timeout)

    def figures(self, namespace: str, model: str) -> Figures:
        values: dict[str, float] = {}
        selector = f'{{namespace="{namespace}",inferencemodel="{model}"}}'
        try:
            for key, series in QUERIES.items():
                result = self._prom.custom_query(query=series + selector)
                if result:
                    value = float(result[0]["value"][1])
                    if value == value:  # NaN (0/0 rates when idle) is no figure
                        values[key] = value
        except (PrometheusApiClientException, RequestException, ValueError, KeyError) as exc:
            return Figures({}, f"{type(exc).__name__}: {exc}"[:300])
        return Figures(values)

    def matrix(self, query: str, start: float, end: float, step: float) -> list[dict[str, Any]]:
        """A range query's series (``metric``, ``values``), from ``start`` to ``end``
        (epoch seconds, whole seconds) every ``step`` seconds. Raises what the client
        raises (PrometheusApiClientException, RequestException)."""
        result = self._prom.custom_query_range(
            query=query,
            start_time=dt.datetime.fromtimestamp(start, dt.UTC),
            end_time=dt.datetime.fromtimestamp(end, dt.UTC),
            step=f"{step:g}",
        )
        return list(result or [])
