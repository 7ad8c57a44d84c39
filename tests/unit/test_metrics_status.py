"""How figures from Prometheus become a model's status (pure)."""

from __future__ import annotations

from shoal.metrics.reader import Figures
from shoal.metrics.status import format_bytes, format_seconds, metrics_status


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
    assert format_seconds(0.0001) == "100us"


def test_the_cost_and_gpu_figures_become_status_fields() -> None:
    """The values the recording rules give for two replicas on one GPU each (the
    promtool test of tests/e2e/promtool/rules_test.yaml) as the status shows them."""
    fields, _ = metrics_status(
        Figures(
            {
                "p99Seconds": 0.15,
                "meanQueueSeconds": 0.0001,
                "gpuUtilization": 0.7,
                "gpuMemoryBytes": 22e9,
                "gpuSecondsPer1kRequests": 100.0,
            }
        )
    )
    assert fields == {
        "p99Latency": "150ms",
        "meanQueueTime": "100us",
        "gpuUtilization": 0.7,
        "gpuMemory": "20.5Gi",
        "gpuSecondsPer1kRequests": 100.0,
    }
    assert format_bytes(512) == "512"
    assert format_bytes(3 * 2**30) == "3Gi"


def test_batch_fill_is_the_average_batch_over_the_models_max_batch_size() -> None:
    """From Prometheus' average batch size and the model's effective maxBatchSize; kept
    from the last figures while Prometheus is not asked on a pass."""
    from shoal.api.conditions import Cond
    from shoal.api.inferencemodel import InferenceModel
    from shoal.reconcile.model import Outcome, model_status
    from tests.support.resources import example_documents

    doc = next(d for d in example_documents() if d.get("kind") == "InferenceModel")
    model = InferenceModel.model_validate(doc)
    outcome = Outcome(
        ready=Cond("Ready", "True", "Available", "1 of 1 replicas ready to serve."),
        progressing=Cond("Progressing", "False", "RolloutComplete", "1 replicas available."),
        degraded=Cond("Degraded", "False", "AsExpected", "All objects are applied."),
        deployment={"status": {"replicas": 1, "readyReplicas": 1}},
        max_batch_size=8,
    )
    fresh = model_status(model, doc, outcome, metrics_status(Figures({"averageBatchSize": 6.0})))
    assert fresh["batchFill"] == 0.75
    kept = model_status(model, {**doc, "status": fresh}, outcome, None)
    assert kept["batchFill"] == 0.75
    unbatched = model_status(model, doc, outcome, metrics_status(Figures({"queueDepth": 1.0})))
    assert "batchFill" not in unbatched


def test_every_figure_the_reader_asks_for_reaches_status() -> None:
    from shoal.metrics.reader import QUERIES
    from shoal.metrics.status import STATUS_FIELDS

    assert {key for key, _, _ in STATUS_FIELDS} == set(QUERIES)
