"""Writing the generated files: CRDs and admission policy, the API reference, the
operator's ClusterRole, and the monitoring pipeline's rule files."""

from __future__ import annotations

from pathlib import Path

import yaml

from shoal.api.admission_policy import admission_policy
from shoal.api.crd import KINDS, crd
from shoal.api.reference import render_reference
from shoal.metrics.alerts import alerting_rules
from shoal.metrics.pipeline import (
    adapter_chart_values,
    adapter_rules,
    kubernetes_scrape_configs,
    recording_rules,
)
from shoal.render import rbac

HEADER = "# Generated from operator/shoal by `make generate`. Do not edit.\n"


RBAC = "manifests/base/rbac.yaml"
ADAPTER_VALUES_HEADER = """\
# Values for the prometheus-community/prometheus-adapter chart (docs/installation.md):
#   helm install prometheus-adapter prometheus-community/prometheus-adapter \\
#     --namespace monitoring --values manifests/monitoring/prometheus-adapter-values.yaml \\
#     --set prometheus.url=http://<your Prometheus Service>.<namespace>.svc
# An adapter that already serves other metrics: add these rules to its rules.custom and
# keep its rules.default as it is.
"""


def rendered_files() -> dict[str, str]:
    """Relative path -> content of every generated file (pure)."""
    files = {
        f"crds/{kind.crd_name}.yaml": HEADER + yaml.safe_dump(crd(kind), sort_keys=False, width=100)
        for kind in KINDS
    }
    files["manifests/admission/admission-policy.yaml"] = HEADER + yaml.safe_dump_all(
        admission_policy(), sort_keys=False, width=100
    )
    files["docs/api-reference.md"] = render_reference()
    # The Helm chart carries copies: Helm cannot read files outside the chart.
    for kind in KINDS:
        files[f"charts/shoal/crds/{kind.crd_name}.yaml"] = files[f"crds/{kind.crd_name}.yaml"]
    files["charts/shoal/files/admission-policy.yaml"] = files[
        "manifests/admission/admission-policy.yaml"
    ]
    files[RBAC] = rbac.manifest(HEADER)
    files["charts/shoal/files/rbac-rules.yaml"] = rbac.chart_rules(HEADER)
    monitoring = "manifests/monitoring"
    files[f"{monitoring}/prometheus-rules.yaml"] = HEADER + yaml.safe_dump(
        recording_rules(), sort_keys=False, width=100
    )
    files[f"{monitoring}/prometheus-adapter-config.yaml"] = HEADER + yaml.safe_dump(
        adapter_rules(), sort_keys=False, width=100
    )
    files[f"{monitoring}/prometheus-adapter-values.yaml"] = (
        HEADER
        + ADAPTER_VALUES_HEADER
        + yaml.safe_dump(adapter_chart_values(), sort_keys=False, width=100)
    )
    files[f"{monitoring}/prometheus-scrape-config.yaml"] = HEADER + yaml.safe_dump(
        {"scrape_configs": kubernetes_scrape_configs()}, sort_keys=False, width=100
    )
    files[f"{monitoring}/prometheus-alerts.yaml"] = HEADER + yaml.safe_dump(
        alerting_rules(), sort_keys=False, width=100
    )
    files["charts/shoal/files/prometheus-rules.yaml"] = files[f"{monitoring}/prometheus-rules.yaml"]
    files["charts/shoal/files/prometheus-alerts.yaml"] = files[
        f"{monitoring}/prometheus-alerts.yaml"
    ]
    return files


def write(root: Path) -> list[Path]:
    written = []
    for rel, content in rendered_files().items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_text() != content:
            path.write_text(content)
            written.append(path)
    return written
