"""shoal's imports are layered: a module imports from its own layer or a lower one, and no
two of its packages import each other. So the pure layers (the API, the renderers) stay
testable alone, and nothing low drags the operator's state or its loops in with it.

Read from the source with ``ast`` (every import, at the top or inside a function), not
by importing anything."""

from __future__ import annotations

import ast
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

SHOAL = Path(__file__).resolve().parents[2] / "operator" / "shoal"

# Each package (a subpackage of shoal, or a module directly in it) and its layer, lowest
# first. A new package goes into this table before it can pass.
LAYERS = {
    # The custom resources and their conditions, the operator's own metrics, the queue;
    # "shoal" is shoal/__init__.py (the version).
    "shoal": 0,
    "api": 0,
    "telemetry": 0,
    "workqueue": 0,
    # Pure builders: desired objects, HAProxy's configuration, the gateway's files.
    "render": 1,
    # The edges: the API server, Prometheus, the Lease.
    "kube": 2,
    "metrics": 2,
    "leader": 2,
    # The forecast (pure), and the operator's settings.
    "autoscale": 3,
    "settings": 3,
    # What the operator holds while it runs.
    "cache": 4,
    "verified": 4,
    "state": 4,
    "watched": 4,
    # Passes over that state: reconcilers, the predictive loop, the periodic resync.
    "reconcile": 5,
    "resync": 5,
    # The processes and commands. runtime's function-level import of handlers is within
    # this layer, so it needs no exception.
    "controller": 6,
    "handlers": 6,
    "runtime": 6,
    "doctor": 6,
    "gateway": 6,
    "generate": 6,
    "cli": 7,
}

# Imports of a higher layer's module that are allowed anyway, as
# (importing module, imported module): why. At most two.
ALLOWED: dict[tuple[str, str], str] = {}


@dataclass(frozen=True)
class Import:
    path: Path
    line: int
    importer: str  # the importing module, e.g. shoal.metrics.status
    imported: str  # the module it imports, e.g. shoal.api.conditions

    def __str__(self) -> str:
        where = self.path.relative_to(SHOAL.parent)
        return f"{where}:{self.line}: {self.importer} imports {self.imported}"


def module_name(path: Path) -> str:
    parts = path.relative_to(SHOAL.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def package(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(SHOAL.rglob("*.py"))}


def imports() -> Iterator[Import]:
    known = modules()
    for importer, path in known.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the importer's own package up
                    anchor = importer.split(".")
                    if path.name != "__init__.py":
                        anchor = anchor[:-1]
                    anchor = anchor[: len(anchor) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                # ``from shoal.doctor import checks`` imports the module shoal.doctor.checks.
                names = [
                    f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base
                    for alias in node.names
                ]
            else:
                continue
            for name in names:
                if name == "shoal" or name.startswith("shoal."):
                    yield Import(path, node.lineno, importer, name)


def layer(module: str) -> int:
    assert package(module) in LAYERS, f"{module}: its package has no layer in LAYERS"
    return LAYERS[package(module)]


def test_every_package_has_a_layer() -> None:
    named = {package(m) for m in modules()} | {package(i.imported) for i in imports()}
    missing = sorted(named - set(LAYERS))
    assert not missing, f"add these to LAYERS in {Path(__file__).name}: {missing}"


def test_no_module_imports_from_a_higher_layer() -> None:
    upward = [
        f"{found}  (layer {layer(found.importer)} imports layer {layer(found.imported)})"
        for found in imports()
        if layer(found.imported) > layer(found.importer)
        and (found.importer, found.imported) not in ALLOWED
    ]
    assert not upward, "imports of a higher layer:\n" + "\n".join(upward)


def test_the_allowed_exceptions_are_few_and_still_needed() -> None:
    assert len(ALLOWED) <= 2, "a layer that needs more exceptions is in the wrong place"
    used = {(found.importer, found.imported) for found in imports()}
    stale = sorted(set(ALLOWED) - used)
    assert not stale, f"exceptions no import needs any more: {stale}"


def test_no_two_packages_import_each_other() -> None:
    between: dict[tuple[str, str], list[Import]] = defaultdict(list)
    for found in imports():
        pair = (package(found.importer), package(found.imported))
        if pair[0] != pair[1]:
            between[pair].append(found)
    mutual = [
        f"{one} <-> {other}:\n"
        + "\n".join(f"  {found}" for found in between[one, other] + between[other, one])
        for one, other in sorted(between)
        if one < other and (other, one) in between
    ]
    assert not mutual, "packages that import each other:\n" + "\n".join(mutual)
