"""Writing the generated files: crds/*.yaml and docs/api-reference.md."""

from __future__ import annotations

from pathlib import Path

import yaml

from shoal.api.admission_policy import admission_policy
from shoal.api.crd import KINDS, crd
from shoal.api.reference import render_reference

HEADER = "# Generated from operator/shoal/api by `make generate`. Do not edit.\n"


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
