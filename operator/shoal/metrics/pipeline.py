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

The pools' gateways (HAProxy's exporter) name what a series is about in its ``proxy``
label: ``gate_<tenant namespace>`` for a tenant's gate, ``m_<namespace>_<model>`` (and
``..._grpc``) for the route to an InferenceModel; scraping adds ``pool``. The gateway
rules turn those names back into ``namespace`` and ``inferencemodel`` labels, so a
gateway figure lines up with the model's own.
"""

from __future__ import annotations

from typing import Any

from shoal.render.autoscaler import (
    GATEWAY_QUEUE_METRIC,
    P95_METRIC,
    QUEUE_METRIC,
    REQUIRED_REPLICAS_METRIC,
)

MODEL = "namespace, inferencemodel"
POD = "namespace, pod, inferencemodel"
RATE_WINDOW = "1m"
# The operator's own gauge of the replicas a model's forecast needs (shoal.telemetry).
REQUIRED_REPLICAS_SERIES = "shoal_model_required_replicas"
GATEWAY_MODEL = "pool, namespace, inferencemodel"
GATEWAY_TENANT = "pool, namespace"
# Namespaces and InferenceModel names hold no "_": the backend names split cleanly. A
# model's overflow replicas (``..._overflow``, ``..._overflow_grpc``) count as the model.
ROUTE_PROXY = "m_.+"
ROUTE_NAMES = ("m_([^_]+)_.+", "m_[^_]+_([^_]+)(?:_overflow)?(?:_grpc)?")
OVERFLOW_PROXY = ',proxy=~"m_[^_]+_[^_]+_overflow(?:_grpc)?"'
OWN_PROXY = ',proxy!~"m_[^_]+_[^_]+_overflow(?:_grpc)?"'
GATE_PROXY = "gate_.+"
FIVE_XX = ',code="5xx"'


def _rule(record: str, expr: str) -> dict[str, str]:
    return {"record": record, "expr": " ".join(expr.split())}


def _selected(series: str, matchers: str, rate: bool) -> str:
    selected = f"{series}{{{matchers}}}"
    return f"rate({selected}[{RATE_WINDOW}])" if rate else selected


def _by_route(series: str, matchers: str = "", *, rate: bool = False) -> str:
    """``series`` (or its rate) of the gateways' route backends, labelled with the
    model's namespace and name instead of the gateway's namespace."""
    selected = _selected(series, f'proxy=~"{ROUTE_PROXY}"{matchers}', rate)
    namespace, model = ROUTE_NAMES
    return (
        f'label_replace(label_replace({selected}, "namespace", "$1", "proxy", "{namespace}"), '
        f'"inferencemodel", "$1", "proxy", "{model}")'
    )


def _by_gate(series: str, *, rate: bool = False) -> str:
    """``series`` (or its rate) of the gateways' tenant gates, labelled with the
    tenant's namespace."""
    selected = _selected(series, f'proxy=~"{GATE_PROXY}"', rate)
    return f'label_replace({selected}, "namespace", "$1", "proxy", "gate_(.+)")'


def gateway_rules() -> list[dict[str, str]]:
    """Per tenant, per model and per pool: what the gateways let through, refused and
    queued, summed over every gateway replica."""
    return [
        _rule(
            "shoal:gateway_request_rate:model",
            f"sum by ({GATEWAY_MODEL}) "
            f"({_by_route('haproxy_backend_http_requests_total', rate=True)})",
        ),
        # Low priority lanes shed with 503 (the route's "http-request deny").
        _rule(
            "shoal:gateway_shed_rate:model",
            f"sum by ({GATEWAY_MODEL}) "
            f"({_by_route('haproxy_backend_requests_denied_total', rate=True)})",
        ),
        # 504s (the model's routing timeout) and replicas' resets.
        _rule(
            "shoal:gateway_response_error_rate:model",
            f"sum by ({GATEWAY_MODEL}) "
            f"({_by_route('haproxy_backend_response_errors_total', rate=True)})",
        ),
        _rule(
            "shoal:gateway_5xx_rate:model",
            f"sum by ({GATEWAY_MODEL}) "
            f"({_by_route('haproxy_backend_http_responses_total', FIVE_XX, rate=True)})",
        ),
        # HAProxy's averages are over each replica's last 1024 requests: the slowest
        # gateway replica's, like the P95 across Triton replicas.
        _rule(
            "shoal:gateway_queue_seconds:model",
            f"max by ({GATEWAY_MODEL}) ({_by_route('haproxy_backend_queue_time_average_seconds')})",
        ),
        _rule(
            "shoal:gateway_response_seconds:model",
            f"max by ({GATEWAY_MODEL}) ({_by_route('haproxy_backend_total_time_average_seconds')})",
        ),
        # Requests the model's replicas had no slot for, sent to its overflow replicas
        # in another pool (spec.overflow).
        _rule(
            "shoal:gateway_spill_rate:model",
            f"sum by ({GATEWAY_MODEL}) "
            f"({_by_route('haproxy_backend_http_requests_total', OVERFLOW_PROXY, rate=True)})",
        ),
        # Requests waiting at the gateways for a free replica slot, and those its
        # overflow replicas serve now because it had none: demand Triton's own queue
        # cannot see (it holds at most what the gateway lets through to it), and what
        # the model's own HPA scales up to take back. A model without gateway series
        # gets 0, so that the HPA's metric always exists (an HPA missing one of its
        # metrics does not scale down).
        _rule(
            "shoal:gateway_queue_depth:model",
            "label_replace(sum by (namespace, inferencemodel) "
            f"({_by_route('haproxy_backend_current_queue', OWN_PROXY)} "
            f"or {_by_route('haproxy_backend_current_sessions', OVERFLOW_PROXY)}) "
            "or 0 * sum by (namespace, inferencemodel) (nv_inference_pending_request_count), "
            '"service", "$1", "inferencemodel", "(.*)")',
        ),
        # The tenant's 429s: over its rate (denied at its gate), and over its
        # concurrency past its queue timeout (the gate's connection errors).
        _rule(
            "shoal:gateway_rate_limited_rate:tenant",
            f"sum by ({GATEWAY_TENANT}) "
            f"({_by_gate('haproxy_backend_requests_denied_total', rate=True)})",
        ),
        _rule(
            "shoal:gateway_concurrency_limited_rate:tenant",
            f"sum by ({GATEWAY_TENANT}) "
            f"({_by_gate('haproxy_backend_connection_errors_total', rate=True)})",
        ),
        _rule(
            "shoal:gateway_request_rate:tenant",
            f"sum by ({GATEWAY_TENANT}) "
            f"({_by_gate('haproxy_backend_http_requests_total', rate=True)})",
        ),
        # Requests waiting for one of the tenant's concurrency slots.
        _rule(
            "shoal:gateway_queue_depth:tenant",
            f"sum by ({GATEWAY_TENANT}) ({_by_gate('haproxy_backend_current_queue')})",
        ),
        # Everything that reached a pool's gateway, and what its door answered itself
        # (401 unproven, 403 not admitted, 404 unrouted) by class.
        _rule(
            "shoal:gateway_request_rate:pool",
            'sum by (pool) (rate(haproxy_frontend_http_requests_total{proxy="edge"}'
            f"[{RATE_WINDOW}]))",
        ),
        _rule(
            "shoal:gateway_response_rate:pool",
            'sum by (pool, code) (rate(haproxy_frontend_http_responses_total{proxy="edge"}'
            f"[{RATE_WINDOW}]))",
        ),
    ]


def recording_rules() -> dict[str, Any]:
    """A Prometheus rule file (the ``groups:`` document)."""
    served = f"sum by ({MODEL}) (rate(nv_inference_request_success[{RATE_WINDOW}]))"
    # Absent until a request fails: "+" alone would then drop the model.
    failed = f"sum by ({MODEL}) (rate(nv_inference_request_failure[{RATE_WINDOW}]))"
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
        # Demand, not backlog: every request that arrived, served or refused, as Triton
        # counts them and as the pool's gateway does (it sees requests Triton never
        # queues: those waiting at the gateway, those it refused); the larger of the two.
        _rule(
            "shoal:arrival_rate:model",
            f"max by ({MODEL}) (label_replace(({served} + {failed}) or {served}, "
            '"source", "triton", "", "") or label_replace(sum by (namespace, inferencemodel) '
            '(shoal:gateway_request_rate:model), "source", "gateway", "", ""))',
        ),
        # Mean time a request waited in Triton's queue (scheduler wait, not compute).
        _rule(
            "shoal:queue_seconds_mean:model",
            f"sum by ({MODEL}) (rate(nv_inference_queue_duration_us[{RATE_WINDOW}])) / "
            f"sum by ({MODEL}) (rate(nv_inference_request_success[{RATE_WINDOW}])) / 1e6",
        ),
        # Triton reports each GPU it sees (gpu_uuid) from each replica: the model's mean
        # utilisation (0 to 1), the memory its replicas hold, and how many GPUs it holds.
        _rule("shoal:gpu_utilization:model", f"avg by ({MODEL}) (nv_gpu_utilization)"),
        _rule("shoal:gpu_memory_used_bytes:model", f"sum by ({MODEL}) (nv_gpu_memory_used_bytes)"),
        _rule("shoal:gpus:model", f"count by ({MODEL}) (nv_gpu_utilization)"),
        # Cost per request: GPU-seconds spent per 1,000 requests served (GPUs held each
        # second over requests served each second), per model and per tenant namespace.
        _rule(
            "shoal:gpu_seconds_per_1k_requests:model",
            f"1000 * shoal:gpus:model / ({served} > 0)",
        ),
        _rule(
            "shoal:gpu_seconds_per_1k_requests:tenant",
            "1000 * sum by (namespace) (shoal:gpus:model) / "
            f"(sum by (namespace) (rate(nv_inference_request_success[{RATE_WINDOW}])) > 0)",
        ),
        # What one replica does, for the capacity the operator measures: batches run,
        # requests in them, and the time the model computed (per second).
        _rule(
            "shoal:execution_rate:pod",
            f"sum by ({POD}) (rate(nv_inference_exec_count[{RATE_WINDOW}]))",
        ),
        _rule(
            "shoal:inference_rate:pod",
            f"sum by ({POD}) (rate(nv_inference_count[{RATE_WINDOW}]))",
        ),
        _rule(
            "shoal:compute_seconds_rate:pod",
            f"sum by ({POD}) (rate(nv_inference_compute_infer_duration_us[{RATE_WINDOW}])) / 1e6",
        ),
    ]
    return {
        "groups": [
            {"name": "shoal.rules", "rules": rules},
            {"name": "shoal.gateway.rules", "rules": gateway_rules()},
        ]
    }


def _adapter_rule(series: str, name: str, by: str) -> dict[str, Any]:
    """One recording rule exposed under ``name``, on the ``by`` resource (``pod``, or
    ``service`` for an object metric on the model's Service)."""
    return {
        "seriesQuery": f'{series}{{namespace!="",{by}!=""}}',
        "resources": {"overrides": {"namespace": {"resource": "namespace"}, by: {"resource": by}}},
        "name": {"matches": f"^{series}$", "as": name},
        "metricsQuery": "max by (<<.GroupBy>>) (<<.Series>>{<<.LabelMatchers>>})",
    }


def adapter_rules() -> dict[str, Any]:
    """prometheus-adapter configuration exposing the HPA's metrics."""
    return {
        "rules": [
            _adapter_rule("shoal:queue_depth:pod", QUEUE_METRIC, "pod"),
            _adapter_rule("shoal:request_p95_seconds:model", P95_METRIC, "service"),
            _adapter_rule("shoal:gateway_queue_depth:model", GATEWAY_QUEUE_METRIC, "service"),
            _adapter_rule(REQUIRED_REPLICAS_SERIES, REQUIRED_REPLICAS_METRIC, "service"),
        ]
    }


# Where the community prometheus-adapter chart's values reach Prometheus: a placeholder
# an admin replaces (kube-prometheus-stack's Service is <release>-kube-prometheus-prometheus).
ADAPTER_CHART_PROMETHEUS = "http://prometheus-operated.monitoring.svc"


def adapter_chart_values() -> dict[str, Any]:
    """Values for the prometheus-community/prometheus-adapter chart: its templates write
    ``rules.custom`` under ``rules:`` in the adapter's config.yaml, after its default
    rules when ``rules.default`` is true; so with the defaults off the adapter runs
    exactly :func:`adapter_rules`."""
    return {
        "prometheus": {"url": ADAPTER_CHART_PROMETHEUS, "port": 9090},
        "rules": {"default": False, "custom": adapter_rules()["rules"]},
    }


def _keep_labelled(label: str) -> dict[str, Any]:
    return {
        "source_labels": [f"__meta_kubernetes_pod_label_{label}"],
        "regex": ".+",
        "action": "keep",
    }


def _common_relabelling() -> list[dict[str, Any]]:
    return [
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
    ]


def kubernetes_scrape_configs() -> list[dict[str, Any]]:
    """Scrape jobs for a Prometheus without the Prometheus Operator: Triton's pods
    (labelled with their InferenceModel), the pools' gateways (with their pool), and the
    operator, whose series name their model themselves (``honor_labels``: its
    ``namespace`` label is the model's, not the operator's pod's)."""
    return [
        {
            "job_name": "shoal-triton",
            "kubernetes_sd_configs": [{"role": "pod"}],
            "relabel_configs": [
                _keep_labelled("shoal_dev_model"),
                *_common_relabelling(),
                {
                    "source_labels": ["__meta_kubernetes_pod_label_shoal_dev_model"],
                    "target_label": "inferencemodel",
                },
            ],
        },
        {
            "job_name": "shoal-gateway",
            "kubernetes_sd_configs": [{"role": "pod"}],
            "relabel_configs": [
                _keep_labelled("shoal_dev_gateway"),
                *_common_relabelling(),
                {
                    "source_labels": ["__meta_kubernetes_pod_label_shoal_dev_gateway"],
                    "target_label": "pool",
                },
            ],
        },
        {
            "job_name": "shoal-operator",
            "honor_labels": True,
            "kubernetes_sd_configs": [{"role": "pod"}],
            "relabel_configs": [
                {
                    "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_component"],
                    "regex": "operator",
                    "action": "keep",
                },
                {
                    "source_labels": ["__meta_kubernetes_pod_label_app_kubernetes_io_name"],
                    "regex": "shoal",
                    "action": "keep",
                },
                {
                    "source_labels": ["__meta_kubernetes_pod_container_port_name"],
                    "regex": "metrics",
                    "action": "keep",
                },
            ],
        },
    ]
