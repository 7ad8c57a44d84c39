"""Fixtures of the e2e tier shared by more than one module."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator

import pytest
from e2e.cluster.local import ensure_binaries
from e2e.cluster.target import Target
from e2e.monitoring import MetricsAdapter, Prometheus
from kubernetes import client

from tests.support.wait import wait_for


@pytest.fixture(scope="session")
def pipeline(
    kube_target: Target, tmp_path_factory: pytest.TempPathFactory, api: client.ApiClient
) -> Iterator[Prometheus]:
    """Prometheus with the shipped rules, and prometheus-adapter with the shipped
    configuration registered as the cluster's custom metrics API."""
    if not kube_target.local:
        if os.environ.get("CI"):
            pytest.fail("the metrics pipeline needs the local cluster")
        pytest.skip("registers a metrics adapter on 127.0.0.1: local cluster only")
    work = tmp_path_factory.mktemp("monitoring")
    prometheus = Prometheus(work / "prometheus").start()
    adapter = MetricsAdapter(
        binary=ensure_binaries() / "prometheus-adapter",
        kubeconfig=kube_target.kubeconfig,
        prometheus_url=prometheus.url,
        workdir=work / "adapter",
    ).start()
    registration = client.ApiregistrationV1Api(api)
    wait_for(
        "the custom metrics APIService Available",
        lambda: registration.read_api_service("v1beta2.custom.metrics.k8s.io").status.conditions,
        lambda conds: any(c.type == "Available" and c.status == "True" for c in conds or []),
        timeout=60,
    )
    yield prometheus
    adapter.stop()
    prometheus.stop()


@pytest.fixture
def promtool() -> str:
    """Prometheus' own rule checker and unit tester."""
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool is missing: `make system-deps` installs Debian's prometheus")
    return path
