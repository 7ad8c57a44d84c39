"""operator/ is a source root, not a package: it must not shadow the stdlib module."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_operator_dir_is_not_a_package() -> None:
    assert not (REPO / "operator" / "__init__.py").exists()


def test_stdlib_operator_module_is_not_shadowed_from_the_repo_root() -> None:
    """With the repo root first on sys.path, ``import operator`` still finds the stdlib."""
    out = subprocess.run(
        [sys.executable, "-c", "import operator; print(operator.__file__)"],
        cwd=REPO,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert out, "no module file printed"
    assert not out.startswith(str(REPO)), out


def test_shoal_is_importable_from_the_source_root() -> None:
    shoal = importlib.import_module("shoal")
    assert shoal.__file__ is not None
    assert Path(shoal.__file__).resolve().parent == REPO / "operator" / "shoal"
