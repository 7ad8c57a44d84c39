"""Recording rules and prometheus-adapter rules, as data (pure).

Triton exports per-pod series; scraping adds ``namespace``, ``pod`` and
``inferencemodel`` (from the pod label ``shoal.dev/model``). The rules below turn them
into the figures the HPA and the status use.

P95 across replicas. Triton exports latency as summaries (pre-computed quantiles per
pod), which cannot be merged into a true fleet-wide quantile. Shoal takes the largest
per-pod P95: an upper bound on the model's P95 (the worst replica is at least as slow as
the fleet's 95th percentile of that replica's own traffic), so the autoscaler errs
towards capacity, never towards violating the target. A request-weighted mean of the
per-pod P95s would understate the tail whenever one replica is hot.
"""

from __future__ import annotations

from typing import Any

MODEL = "namespace, inferencemodel"
POD = "namespace, pod, inferencemodel"
RATE_WINDOW = "1m"


def _rule(record: str, expr: str) -> dict[str, str]:
    return {"record": record, "expr": " ".join(expr.split())}


def recording_rules() -> dict[str, Any]:
    """A Prometheus rule file (the ``groups:`` document)."""
    rules = [
        _rule("shoal:queue_depth:pod", f"sum by ({POD}) (nv_inference_pending_request_count)"),
        _rule("shoal:queue_depth:model", f"sum by ({MODEL}) (shoal:queue_depth:pod)"),
        _rule(
            "shoal:request_p95_seconds:pod",
            f'max by ({POD}) (nv_inference_request_summary_us{{quantile="0.95"}}) / 1e6',
        ),
        _rule(
            "shoal:request_p95_seconds:model",
            # The model's Service carries the model's name: the HPA's object metric.
            f"label_replace(max by ({MODEL}) (shoal:request_p95_seconds:pod), "
            f'"service", "$1", "inferencemodel", "(.*)")',
        ),
        _rule(
            "shoal:request_p99_seconds:model",
            f'max by ({MODEL}) (nv_inference_request_summary_us{{quantile="0.99"}}) / 1e6',
        ),
        _rule(
            "shoal:request_rate:model",
            f"sum by ({MODEL}) (rate(nv_inference_request_success[{RATE_WINDOW}]))",
        ),
        _rule(
            "shoal:failure_rate:model",
            f"sum by ({MODEL}) (rate(nv_inference_request_failure[{RATE_WINDOW}]))",
        ),
        _rule(
            "shoal:average_batch_size:model",
            f"sum by ({MODEL}) (rate(nv_inference_count[{RATE_WINDOW}])) / "
            f"sum by ({MODEL}) (rate(nv_inference_exec_count[{RATE_WINDOW}]))",
        ),
        _rule(
            "shoal:queue_to_compute_ratio:model",
            f"sum by ({MODEL}) (rate(nv_inference_queue_duration_us[{RATE_WINDOW}])) / "
            f"sum by ({MODEL}) (rate(nv_inference_compute_infer_duration_us[{RATE_WINDOW}]))",
        ),
    ]
    return {"groups": [{"name": "shoal.rules", "rules": rules}]}


def adapter_rules() -> dict[str, Any]:
    """prometheus-adapter configuration exposing the HPA's two metrics."""
    return {
        "rules": [
            {
                "seriesQuery": 'shoal:queue_depth:pod{namespace!="",pod!=""}',
                "resources": {
                    "overrides": {
                        "namespace": {"resource": "namespace"},
                        "pod": {"resource": "pod"},
                    }
                },
                "name": {"matches": "^shoal:queue_depth:pod$", "as": "shoal_queue_depth"},
                "metricsQuery": "max by (<<.GroupBy>>) (<<.Series>>{<<.LabelMatchers>>})",
            },
            {
                "seriesQuery": 'shoal:request_p95_seconds:model{namespace!="",service!=""}',
                "resources": {
                    "overrides": {
                        "namespace": {"resource": "namespace"},
                        "service": {"resource": "service"},
                    }
                },
                "name": {
                    "matches": "^shoal:request_p95_seconds:model$",
                    "as": "shoal_request_p95_seconds",
                },
                "metricsQuery": "max by (<<.GroupBy>>) (<<.Series>>{<<.LabelMatchers>>})",
            },
        ]
    }


def kubernetes_scrape_config(job: str = "shoal-triton") -> dict[str, Any]:
    """A scrape job for Triton pods, for a Prometheus without the Prometheus Operator."""
    return {
        "job_name": job,
        "kubernetes_sd_configs": [{"role": "pod"}],
        "relabel_configs": [
            {
                "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_managed_by"],
                "regex": "shoal",
                "action": "keep",
            },
            {
                "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                "regex": "metrics",
                "action": "keep",
            },
            {"source_labels": ["__meta_kubernetes_namespace"], "target_label": "namespace"},
            {"source_labels": ["__meta_kubernetes_pod_name"], "target_label": "pod"},
            {
                "source_labels": ["__meta_kubernetes_pod_label_shoal_dev_model"],
                "target_label": "inferencemodel",
            },
        ],
    }
