"""charts/shoal/README.md, generated from the chart's values.yaml and values.schema.json.

The README lists every value: its dotted key, its type (from the schema), its default
(from values.yaml) and its description (the schema's ``description``). Objects the
schema declares ``properties`` for are walked into, one row per leaf; free-form objects
(``resources``, ``nodeSelector``, maps of labels), lists and scalars are leaves, their
default shown as JSON. A key only values.yaml has, or only the schema has, is listed
too; an object whose schema has a ``description`` of its own gets a row of its own.

Descriptions come from the schema only: comments in values.yaml are for its readers,
and no YAML library that keeps comments is a dependency of the project.
``missing_descriptions()`` names the values nothing describes
(tests/unit/test_chart_readme.py fails on them).

``python -m e2e.chart_readme`` prints the README, ``--write`` writes it (``make
generate`` does), ``--check`` exits 1 when the committed one is stale.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from e2e import generated_file

REPO = Path(__file__).resolve().parent.parent
CHART = REPO / "charts" / "shoal"
README = CHART / "README.md"
COMMAND = "python -m e2e.chart_readme --write"


class _Unset:
    """The default of a key values.yaml does not set (the schema alone knows it)."""

    def __repr__(self) -> str:
        return "UNSET"


UNSET: Any = _Unset()


@dataclass(frozen=True)
class Value:
    """One row of the table."""

    key: str  # dotted, as `--set` takes it: monitoring.podMonitor.enabled
    type: str
    default: Any  # UNSET where values.yaml does not set it
    description: str  # "" where the schema has none
    leaf: bool = True  # False: an object's own row (its description), its leaves follow


def load(chart: Path = CHART) -> tuple[dict[str, Any], dict[str, Any]]:
    """The chart's values.yaml and values.schema.json."""
    defaults = yaml.safe_load((chart / "values.yaml").read_text()) or {}
    schema = json.loads((chart / "values.schema.json").read_text())
    return defaults, schema


def _inline(node: Any, root: Mapping[str, Any]) -> Any:
    """``node`` with each local ``$ref`` (``#/definitions/port``) replaced by what it
    names, so a value's type reads through the schema's shared definitions."""
    if isinstance(node, Mapping):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = root
            for part in ref[2:].split("/"):
                target = target[part]
            return _inline(target, root)
        return {k: _inline(v, root) for k, v in node.items()}
    if isinstance(node, list):
        return [_inline(v, root) for v in node]
    return node


def _type(schema: Mapping[str, Any] | None, default: Any) -> str:
    """A node's type as a reader wants it: ``list of string``, ``map of string``, with
    an enum's choices or an integer's range."""
    if schema is None:
        return _python_type(default)
    kind = schema.get("type")
    if isinstance(kind, list):
        text = " or ".join(str(k) for k in kind)
    elif kind == "array":
        items = schema.get("items")
        inner = items.get("type") if isinstance(items, Mapping) else None
        text = f"list of {inner}" if isinstance(inner, str) else "list"
    elif kind == "object":
        extra = schema.get("additionalProperties")
        inner = extra.get("type") if isinstance(extra, Mapping) else None
        text = f"map of {inner}" if isinstance(inner, str) else "object"
    elif isinstance(kind, str):
        text = kind
    else:
        text = _python_type(default) if default is not UNSET else "any"
    if "enum" in schema:
        text += ": " + ", ".join(f"`{json.dumps(choice)}`" for choice in schema["enum"])
    low, high = schema.get("minimum"), schema.get("maximum")
    if low is not None or high is not None:
        text += f" ({'' if low is None else low}..{'' if high is None else high})"
    return text


def _python_type(value: Any) -> str:
    if value is UNSET or value is None:
        return "any"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "list"
    return "object"


def _walk(key: str, schema: Mapping[str, Any] | None, default: Any) -> Iterator[Value]:
    """Rows for one key: its leaves, in values.yaml's order, then keys only the schema
    declares."""
    properties = schema.get("properties") if schema is not None else None
    described = (schema or {}).get("description", "")
    if isinstance(properties, Mapping):
        if described:
            yield Value(key, _type(schema, default), UNSET, described, leaf=False)
        present = default if isinstance(default, Mapping) else {}
        for child in [*present, *(k for k in properties if k not in present)]:
            yield from _walk(f"{key}.{child}", properties.get(child), present.get(child, UNSET))
        return
    if schema is None and isinstance(default, Mapping) and default:
        # A key the schema does not declare: walk into what values.yaml gives it.
        for child, value in default.items():
            yield from _walk(f"{key}.{child}", None, value)
        return
    yield Value(key, _type(schema, default), default, described)


def values(chart: Path = CHART) -> list[Value]:
    """Every value of the chart, a row each, in values.yaml's order (keys only the
    schema declares after their siblings)."""
    defaults, schema = load(chart)
    properties = _inline(schema.get("properties", {}), schema)
    keys = [*defaults, *(k for k in properties if k not in defaults)]
    return [row for k in keys for row in _walk(k, properties.get(k), defaults.get(k, UNSET))]


def missing_descriptions(chart: Path = CHART) -> list[str]:
    """The values nothing describes."""
    return [v.key for v in values(chart) if v.leaf and not v.description]


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _code(text: str) -> str:
    fence = "``" if "`" in text else "`"
    pad = " " if fence == "``" else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _default(value: Any) -> str:
    if value is UNSET:
        return "(not set)"
    return _code(json.dumps(value, ensure_ascii=False, separators=(", ", ": ")))


def _crd_kinds(chart: Path) -> list[str]:
    kinds = []
    for path in sorted((chart / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "CustomResourceDefinition":
                kinds.append(doc["spec"]["names"]["kind"])
    return sorted(kinds)


def render(chart: Path = CHART) -> str:
    """The README's text. Pure but for reading the chart."""
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    kinds = ", ".join(_crd_kinds(chart))
    name = meta["name"]
    lines = [
        f"<!-- Generated by `{COMMAND}` (`make generate`) from values.yaml and",
        "values.schema.json: edit those, not this file. -->",
        "",
        f"# The {name} Helm chart",
        "",
        f"{meta['description']}.",
        f"Chart {meta['version']}, Shoal {meta['appVersion']}, "
        f"Kubernetes `{meta.get('kubeVersion', 'any')}`.",
        "",
        "The chart installs Shoal's CustomResourceDefinitions",
        f"({kinds}) from its `crds/` folder,",
        "once: Helm never upgrades or deletes them. Then the operator: its Deployment",
        "(replicas elect a leader with a Lease), ServiceAccount, least-privilege ClusterRole,",
        "leader-election Role and PodDisruptionBudget, and its metrics Service; the namespace",
        "where the pools' gateways run, with their ServiceAccount and Role; the",
        "ValidatingAdmissionPolicy that refuses models their TenantPool does not admit; and a",
        "Grafana dashboard ConfigMap. With the Prometheus Operator's CRDs it can add a",
        "PrometheusRule (recording rules and alerts), PodMonitors and a ServiceMonitor.",
        "`serviceAccount.create=false` and `rbac.create=false` leave the operator's account",
        "and rights to an admin (the gateways' own identity is rendered either way);",
        "`networkPolicy.enabled` adds a NetworkPolicy for the operator's pods.",
        "",
        "```sh",
        "# from a checkout of the repository",
        f"helm install shoal charts/{name} --namespace shoal-system --create-namespace",
        "# a release, pinned by the chart's digest (the chart runs its image by digest)",
        f"helm install shoal oci://ghcr.io/<owner>/charts/{name}@sha256:<chart digest> \\",
        "  --namespace shoal-system --create-namespace",
        "```",
        "",
        "A released chart's values.yaml names the image it was released with, by digest",
        "(`image.repository`, `image.digest`); the defaults below are the repository's.",
        "",
        "Upgrades, uninstall, monitoring, GitOps and troubleshooting:",
        "[docs/operations.md](../../docs/operations.md).",
        "",
        "## Values",
        "",
        "`values.schema.json` validates them on install, upgrade, lint and template: a key it",
        "does not declare is refused. Set them with `--set key=value` or `--values file.yaml`.",
        "",
        "| Key | Type | Default | Description |",
        "| --- | --- | --- | --- |",
    ]
    for value in values(chart):
        default = _default(value.default) if value.leaf else ""
        lines.append(
            f"| {_cell(_code(value.key))} | {_cell(value.type)} | {_cell(default)} "
            f"| {_cell(value.description)} |"
        )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    code = generated_file.main(
        argv, module="e2e.chart_readme", about=__doc__, target=README, render=render
    )
    missing = missing_descriptions()
    if missing:
        print(
            "values without a description in values.schema.json: " + ", ".join(missing),
            file=sys.stderr,
        )
    return code


if __name__ == "__main__":
    sys.exit(main())
