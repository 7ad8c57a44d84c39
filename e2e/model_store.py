"""A model repository on this machine, offered to the real node's pods as a hostPath
PersistentVolume that one claim binds: the source of model files for ``make demo`` and
the real-node tests (the fetch container links them from ``pvc://``, read-only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

MODEL_FILE = Path(__file__).resolve().parent / "models" / "linear_cost.py"


def write_repository(
    source: Path, model: str = "linear", extra: dict[str, str] | None = None
) -> None:
    """``<source>/<model>/1/model.py`` (the linear-cost model) and any ``extra`` files
    (paths relative to the model's directory), readable by the pods' non-root users."""
    version = source / model / "1"
    version.mkdir(parents=True, exist_ok=True)
    (version / "model.py").write_bytes(MODEL_FILE.read_bytes())
    for relative, text in (extra or {}).items():
        (source / model / relative).write_text(text)
    for path in (source, *source.rglob("*")):
        path.chmod(0o755 if path.is_dir() else 0o644)


def host_volume(name: str, source: Path, namespace: str, claim: str) -> dict[str, Any]:
    """A read-only PersistentVolume of ``source``, reserved for ``namespace/claim``."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadOnlyMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "hostPath": {"path": str(source), "type": "Directory"},
            "claimRef": {"namespace": namespace, "name": claim},
        },
    }
