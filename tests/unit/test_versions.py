"""One constant for each name and version the project states: the chart, the README,
the models and the local cluster agree with shoal.api.constants."""

from __future__ import annotations

from pathlib import Path

import yaml

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.constants import API_VERSION, MINIMUM_KUBERNETES, TESTED_KUBERNETES
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool

REPO = Path(__file__).resolve().parents[2]


def test_the_charts_kube_version_is_the_minimum_the_operator_needs() -> None:
    chart = yaml.safe_load((REPO / "charts" / "shoal" / "Chart.yaml").read_text())
    assert chart["kubeVersion"] == f">={MINIMUM_KUBERNETES}.0-0"


def test_the_readme_states_the_supported_range() -> None:
    readme = (REPO / "README.md").read_text()
    assert f"Kubernetes {MINIMUM_KUBERNETES} to {TESTED_KUBERNETES}" in readme


def test_the_local_cluster_runs_the_tested_version() -> None:
    gomod = (REPO / "e2e" / "cluster" / "tools" / "kubernetes" / "go.mod").read_text()
    assert f"k8s.io/kubernetes v{TESTED_KUBERNETES}." in gomod


def test_every_kind_speaks_the_one_api_version() -> None:
    for kind in (InferenceModel, TenantPool, BatchPolicy):
        assert kind.model_fields["api_version"].default == API_VERSION
