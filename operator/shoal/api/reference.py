"""The API field reference (docs/api-reference.md), generated from the CRD schemas."""

from __future__ import annotations

from typing import Any

from shoal.api.crd import KINDS, NULL_RULE, Kind, Schema, crd


def _type_of(node: Schema) -> str:
    if node.get("x-kubernetes-int-or-string"):
        return "int or string"
    if node.get("x-kubernetes-preserve-unknown-fields") and "type" not in node:
        return "quantity (string or number)"
    kind = node.get("type", "")
    if kind == "array":
        return f"[]{_type_of(node.get('items', {}))}"
    if kind == "object" and "additionalProperties" in node:
        return f"map[string]{_type_of(node['additionalProperties'])}"
    return str(kind)


def _constraints(node: Schema) -> str:
    parts: list[str] = []
    if "enum" in node:
        parts.append("one of " + ", ".join(f"`{v}`" for v in node["enum"]))
    quantity = node.get("x-kubernetes-preserve-unknown-fields") and "type" not in node
    if quantity:
        return "positive"
    if "minimum" in node or "maximum" in node:
        parts.append(f"{node.get('minimum', '')}..{node.get('maximum', '')}")
    if "pattern" in node and not node.get("x-kubernetes-int-or-string"):
        parts.append(f"pattern `{node['pattern']}`")
    if "maxItems" in node:
        parts.append(f"at most {node['maxItems']} items")
    for rule in node.get("x-kubernetes-validations", []):
        if not rule["message"].startswith(NULL_RULE):
            parts.append(f"rule: {rule['message']}")
    return "; ".join(parts)


def _rows(node: Schema, path: str, required: set[str], out: list[str]) -> None:
    for name, sub in node.get("properties", {}).items():
        here = f"{path}.{name}"
        default = sub.get("default")
        default_text = "" if default is None else f"`{_compact(default)}`"
        req = "yes" if name in required else ""
        desc = " ".join(str(sub.get("description", "")).split())
        extra = _constraints(sub)
        if extra:
            desc = f"{desc} ({extra})" if desc else extra
        desc = desc.replace("|", "\\|")
        out.append(f"| `{here}` | {_type_of(sub)} | {req} | {default_text} | {desc} |")
        if sub.get("type") == "object" and "properties" in sub:
            _rows(sub, here, set(sub.get("required", [])), out)
        items = sub.get("items", {})
        if sub.get("type") == "array" and "properties" in items:
            _rows(items, f"{here}[]", set(items.get("required", [])), out)


def _compact(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    return str(value)


def kind_section(kind: Kind) -> str:
    version = crd(kind)["spec"]["versions"][0]
    root = version["schema"]["openAPIV3Schema"]
    lines = [
        f"## {kind.name}",
        "",
        root["description"],
        "",
        f"`kubectl get {kind.plural}` (short: {', '.join(kind.short_names)}; "
        f"{'namespaced' if kind.scope == 'Namespaced' else 'cluster-scoped'}).",
        "",
    ]
    for rule in root.get("x-kubernetes-validations", []):
        lines += [f"Rule: {rule['message']}.", ""]
    for part in ("spec", "status"):
        node = root["properties"][part]
        lines += [
            f"### {kind.name}.{part}",
            "",
            "| field | type | required | default | description |",
            "|---|---|---|---|---|",
        ]
        for rule in node.get("x-kubernetes-validations", []):
            if not rule["message"].startswith(NULL_RULE):
                lines.append(f"| `{part}` | object | | | rule: {rule['message']} |")
        _rows(node, part, set(node.get("required", [])), lines)
        lines.append("")
    return "\n".join(lines)


def render_reference() -> str:
    header = [
        "# API reference: shoal.dev/v1alpha1",
        "",
        "Generated from the pydantic models in `operator/shoal/api/` by `make generate`;",
        "do not edit by hand. `kubectl explain <kind>.spec` shows the same descriptions.",
        "",
        "A field with a default may be left out; it may not be set to null (an empty value",
        "in YAML), which the API server would otherwise replace with the default silently.",
        "",
    ]
    return "\n".join(header + [kind_section(k) for k in KINDS]).rstrip() + "\n"
