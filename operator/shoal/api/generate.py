"""Writing the generated files: CRDs and admission policy, the API reference, and the
monitoring pipeline's rule files."""

from __future__ import annotations

from pathlib import Path

import yaml

from shoal.api.admission_policy import admission_policy
from shoal.api.crd import KINDS, crd
from shoal.api.reference import render_reference
from shoal.metrics.pipeline import adapter_rules, kubernetes_scrape_config, recording_rules

HEADER = "# Generated from operator/shoal by `make generate`. Do not edit.\n"


def rendered_files() -> dict[str, str]:
    """Relative path -> content of every generated file (pure)."""
    files = {
        f"crds/{kind.crd_name}.yaml": HEADER + yaml.safe_dump(crd(kind), sort_keys=False, width=100)
        for kind in KINDS
    }
    files["crds/admission-policy.yaml"] = HEADER + yaml.safe_dump_all(
        admission_policy(), sort_keys=False, width=100
    )
    files["docs/api-reference.md"] = render_reference()
    monitoring = "manifests/monitoring"
    files[f"{monitoring}/prometheus-rules.yaml"] = HEADER + yaml.safe_dump(
        recording_rules(), sort_keys=False, width=100
    )
    files[f"{monitoring}/prometheus-adapter-config.yaml"] = HEADER + yaml.safe_dump(
        adapter_rules(), sort_keys=False, width=100
    )
    files[f"{monitoring}/prometheus-scrape-config.yaml"] = HEADER + yaml.safe_dump(
        {"scrape_configs": [kubernetes_scrape_config()]}, sort_keys=False, width=100
    )
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
