"""charts/shoal/README.md is generated from the chart's values.yaml and
values.schema.json (e2e/chart_readme.py) and must not drift from them; every value must
be described. That the values work against a real API server is
tests/cluster/test_helm_chart.py's business."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import yaml
from e2e.chart_readme import UNSET

from e2e import chart_readme

REGENERATE = "run `python -m e2e.chart_readme --write` (or `make generate`)"


def test_the_committed_readme_is_generated_from_the_values() -> None:
    assert chart_readme.README.exists(), f"{chart_readme.README} is missing: {REGENERATE}"
    assert chart_readme.README.read_text() == chart_readme.render(), (
        f"{chart_readme.README} is stale: {REGENERATE}"
    )
    assert chart_readme.main(["--check"]) == 0


def test_every_value_has_a_description() -> None:
    missing = chart_readme.missing_descriptions()
    assert not missing, (
        "give these values a `description` in charts/shoal/values.schema.json (the chart's "
        f"README shows it), then {REGENERATE}: {', '.join(missing)}"
    )


def test_every_value_of_the_chart_is_a_row() -> None:
    """Every key values.yaml sets and every key the schema declares, at the depth the
    schema describes it (free-form objects are one row, their default whole)."""
    defaults, schema = chart_readme.load()
    rows = {v.key: v for v in chart_readme.values() if v.leaf}
    readme = chart_readme.README.read_text()
    for key in [*defaults, *schema["properties"]]:
        assert any(k == key or k.startswith(f"{key}.") for k in rows), key
    for key, row in rows.items():
        assert f"| `{key}` |" in readme, key
        node: Any = defaults
        for part in key.split("."):
            node = node.get(part, UNSET) if isinstance(node, dict) else UNSET
        assert row.default == node, key


def _chart(tmp_path: Path, values: str, schema: dict[str, Any]) -> Path:
    chart = tmp_path / "chart"
    (chart / "crds").mkdir(parents=True)
    shutil.copy(chart_readme.CHART / "Chart.yaml", chart / "Chart.yaml")
    (chart / "values.yaml").write_text(values)
    (chart / "values.schema.json").write_text(json.dumps(schema))
    return chart


def test_nested_objects_lists_maps_and_empty_defaults(tmp_path: Path) -> None:
    """Values the chart does not have yet: the generator walks the schema's objects,
    keeps lists and maps whole, and shows empty and unset defaults as such."""
    values = """
outer:
  inner:
    deep: 3
  list: []
  map: {}
plain: ""
nothing: null
undeclared:
  child: x
"""
    schema = {
        "type": "object",
        "properties": {
            "outer": {
                "type": "object",
                "description": "A group.",
                "properties": {
                    "inner": {
                        "type": "object",
                        "properties": {
                            "deep": {"type": "integer", "minimum": 1, "description": "Deep."},
                            "later": {"type": ["string", "null"], "description": "Schema only."},
                        },
                    },
                    "list": {"type": "array", "items": {"type": "string"}, "description": "L."},
                    "map": {
                        "type": "object",
                        "additionalProperties": {"type": "string"},
                        "description": "Labels | annotations.",
                    },
                },
            },
            "plain": {"type": "string", "enum": ["", "a"], "description": "P."},
            "nothing": {"description": "N."},
        },
    }
    chart = _chart(tmp_path, values, schema)
    rows = {(v.key, v.leaf): v for v in chart_readme.values(chart)}
    assert list(rows) == [
        ("outer", False),
        ("outer.inner.deep", True),
        ("outer.inner.later", True),
        ("outer.list", True),
        ("outer.map", True),
        ("plain", True),
        ("nothing", True),
        ("undeclared.child", True),
    ]
    assert rows["outer.inner.deep", True].type == "integer (1..)"
    assert rows["outer.inner.later", True].default is UNSET
    assert rows["outer.inner.later", True].type == "string or null"
    assert rows["outer.list", True].type == "list of string"
    assert rows["outer.map", True].type == "map of string"
    assert rows["plain", True].type == 'string: `""`, `"a"`'
    assert rows["undeclared.child", True].type == "string"
    assert chart_readme.missing_descriptions(chart) == ["undeclared.child"]

    table = chart_readme.render(chart).split("| --- | --- | --- | --- |\n")[1].splitlines()
    assert table == [
        "| `outer` | object |  | A group. |",
        "| `outer.inner.deep` | integer (1..) | `3` | Deep. |",
        "| `outer.inner.later` | string or null | (not set) | Schema only. |",
        "| `outer.list` | list of string | `[]` | L. |",
        "| `outer.map` | map of string | `{}` | Labels \\| annotations. |",
        '| `plain` | string: `""`, `"a"` | `""` | P. |',
        "| `nothing` | any | `null` | N. |",
        '| `undeclared.child` | string | `"x"` |  |',
    ]


def test_an_edited_value_makes_the_readme_stale(tmp_path: Path) -> None:
    """The drift check can fail: a new default changes the README."""
    chart = tmp_path / "chart"
    shutil.copytree(chart_readme.CHART, chart)
    values = yaml.safe_load((chart / "values.yaml").read_text())
    values["resyncSeconds"] += 1
    (chart / "values.yaml").write_text(yaml.safe_dump(values))
    rendered = chart_readme.render(chart)
    assert rendered != chart_readme.README.read_text()
    assert f"| `resyncSeconds` | integer (1..86400) | `{values['resyncSeconds']}` |" in rendered
