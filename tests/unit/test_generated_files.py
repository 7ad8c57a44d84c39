"""crds/ and docs/api-reference.md are generated from the models and must not drift."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shoal.api.crd import KINDS, crd
from shoal.generate import rendered_files

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("rel", sorted(rendered_files()))
def test_generated_file_matches_the_models(rel: str) -> None:
    committed = (REPO / rel).read_text() if (REPO / rel).exists() else ""
    assert committed == rendered_files()[rel], f"{rel} is stale: run `make generate`"


def _walk(node: Any, path: str) -> list[tuple[str, dict[str, Any]]]:
    out = [(path, node)]
    for name, sub in node.get("properties", {}).items():
        out += _walk(sub, f"{path}.{name}")
    if isinstance(node.get("items"), dict):
        out += _walk(node["items"], f"{path}[]")
    if isinstance(node.get("additionalProperties"), dict):
        out += _walk(node["additionalProperties"], f"{path}{{}}")
    return out


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_schemas_are_structural_and_described(kind: Any) -> None:
    root = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for part in ("spec", "status"):
        for path, node in _walk(root["properties"][part], part):
            assert "$ref" not in node, path
            assert not any(k.startswith("x-shoal") for k in node), path
            if node.get("x-kubernetes-int-or-string"):
                continue
            if node.get("x-kubernetes-preserve-unknown-fields") and "pattern" in node:
                continue  # a quantity: a string or a number
            assert node.get("type"), f"{kind.name}.{path} has no type"
            assert "anyOf" not in node, path
            is_item = path.endswith("[]") or path.endswith("{}")
            if not is_item and path != part:
                assert node.get("description"), f"{kind.name}.{path} has no description"


def test_every_kind_has_status_subresource_columns_and_category() -> None:
    for kind in KINDS:
        version = crd(kind)["spec"]["versions"][0]
        assert version["subresources"] == {"status": {}}
        assert version["additionalPrinterColumns"]
        names = crd(kind)["spec"]["names"]
        assert names["categories"] == ["shoal"]
        assert names["shortNames"]
        status = version["schema"]["openAPIV3Schema"]["properties"]["status"]["properties"]
        assert {"conditions", "observedGeneration"} <= set(status)
        conditions = status["conditions"]
        assert conditions["x-kubernetes-list-map-keys"] == ["type"]
        assert set(conditions["items"]["required"]) == {
            "type",
            "status",
            "reason",
            "lastTransitionTime",
        }


def _spec_nodes(kind: Any) -> list[tuple[str, dict[str, Any]]]:
    root = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return _walk(root["properties"]["spec"], "spec")


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_spec_value_is_bounded(kind: Any) -> None:
    """What reaches a rendered object, and the CEL cost of checking it, has a limit."""
    for path, node in _spec_nodes(kind):
        if node.get("type") == "string" or "pattern" in node:
            assert "maxLength" in node or "enum" in node, f"{path} has no maxLength"
        if node.get("type") == "array":
            assert "maxItems" in node, f"{path} has no maxItems"
        if node.get("type") == "object" and "additionalProperties" in node:
            assert "maxProperties" in node, f"{path} has no maxProperties"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_every_pattern_is_explained_in_words(kind: Any) -> None:
    """The API server prints a bare regular expression when a pattern fails; a rule beside
    it says what is expected. (A quantity, which may be a number, cannot have a rule: the
    name of its pattern's group says it.)"""
    for path, node in _spec_nodes(kind):
        if "pattern" not in node:
            continue
        if node.get("x-kubernetes-preserve-unknown-fields"):
            assert "(?P<a_positive_quantity" in node["pattern"], path
            continue
        messages = [r["message"] for r in node.get("x-kubernetes-validations", [])]
        assert any(m.startswith("must be") for m in messages), f"{path}: {messages}"


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_an_explicit_null_on_a_defaulted_field_is_refused(kind: Any) -> None:
    """The API server would drop the null and apply the default, silently."""
    for path, node in _spec_nodes(kind):
        rules = {r.get("fieldPath"): r for r in node.get("x-kubernetes-validations", [])}
        for name, sub in node.get("properties", {}).items():
            if "default" in sub and not isinstance(sub["default"], dict | list):
                assert sub.get("nullable") is True, f"{path}.{name}"
                assert "must not be null" in rules[f".{name}"]["message"], f"{path}.{name}"
            elif "default" in sub:  # an object or list: null means its defaults
                assert not sub.get("nullable"), f"{path}.{name}"
