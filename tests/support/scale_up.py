"""Waiting for an HPA to scale a model up, and what it scaled on (e2e tests)."""

from __future__ import annotations

from e2e.hpa import desired_replicas, readings
from kubernetes import client

from tests.support.wait import wait_for


def readings_at_scale_up(
    api: client.ApiClient, name: str, namespace: str, *, timeout: float, interval: float
) -> dict[str, float]:
    """The readings the HPA scaled ``name`` up on, from the status update that recorded
    the decision (e2e.hpa.desired_replicas), once the Deployment has followed it."""
    scaling, apps = client.AutoscalingV2Api(api), client.AppsV1Api(api)
    decided = wait_for(
        "the HPA to scale up",
        lambda: scaling.read_namespaced_horizontal_pod_autoscaler(name, namespace),
        lambda hpa: desired_replicas(hpa) > 1,
        timeout=timeout,
        interval=interval,
    )
    wait_for(
        "the Deployment to follow the HPA",
        lambda: apps.read_namespaced_deployment(name, namespace).spec.replicas,
        lambda count: (count or 0) > 1,
        timeout=30,
    )
    return readings(decided)
