"""The demo's stand-in for Prometheus' Kubernetes discovery keeps the pods the shipped
scrape jobs keep, and labels them as those jobs' relabelling does."""

from __future__ import annotations

import yaml
from e2e.demo import SCRAPE_JOBS, pod_targets
from e2e.monitoring import MONITORING
from kubernetes import client


def _pod(
    name: str, labels: dict[str, str], phase: str = "Running", port: str = "metrics"
) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, namespace="team-a", labels=labels),
        spec=client.V1PodSpec(
            containers=[
                client.V1Container(
                    name="c",
                    ports=[
                        client.V1ContainerPort(name="http", container_port=8000),
                        client.V1ContainerPort(name=port, container_port=8002),
                    ],
                )
            ]
        ),
        status=client.V1PodStatus(phase=phase, pod_ip="10.200.0.7"),
    )


def test_only_shoals_running_pods_with_the_jobs_label_at_their_metrics_port() -> None:
    shoal = {"app.kubernetes.io/managed-by": "shoal"}
    pods = [
        _pod("model", {**shoal, "shoal.dev/model": "linear"}),
        _pod("gateway", {**shoal, "shoal.dev/gateway": "demo"}),
        _pod("foreign", {"shoal.dev/model": "linear"}),
        _pod("starting", {**shoal, "shoal.dev/model": "linear"}, phase="Pending"),
        _pod("unnamed-port", {**shoal, "shoal.dev/model": "linear"}, port="prom"),
    ]
    selector, label = SCRAPE_JOBS["shoal-triton"]
    assert pod_targets(pods, selector, label) == [
        {
            "targets": ["10.200.0.7:8002"],
            "labels": {"namespace": "team-a", "pod": "model", "inferencemodel": "linear"},
        }
    ]
    selector, label = SCRAPE_JOBS["shoal-gateway"]
    [gateway] = pod_targets(pods, selector, label)
    assert gateway["labels"] == {"namespace": "team-a", "pod": "gateway", "pool": "demo"}


def test_the_jobs_are_the_shipped_ones() -> None:
    """Each job the demo writes targets for keeps, in the shipped configuration, the
    pods with its label and names the series after it the same way."""
    shipped = yaml.safe_load((MONITORING / "prometheus-scrape-config.yaml").read_text())
    jobs = {job["job_name"]: job["relabel_configs"] for job in shipped["scrape_configs"]}
    for name, (selector, label) in SCRAPE_JOBS.items():
        meta = "__meta_kubernetes_pod_label_" + selector.replace(".", "_").replace("/", "_")
        keep = {"source_labels": [meta], "regex": ".+", "action": "keep"}
        assert keep in jobs[name]
        assert {"source_labels": [meta], "target_label": label} in jobs[name]
