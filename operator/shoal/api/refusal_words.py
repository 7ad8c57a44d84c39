"""A refusal of a Shoal resource by the pydantic models, in the words of its CRD.

Each format is stated twice on a field: as an OpenAPI pattern or bound, and as a rule
with a message ("must be a duration such as 5ms"). The API server prints both; pydantic
stops at the pattern and prints the regular expression and a link to its own docs.
`shoal render` and the operator's status messages quote this instead: each offending
field as the API server names it (``spec.placement.tolerations[0].key``) and what it
expects, taken from the same schema the CRDs are generated from.
"""

from __future__ import annotations

import functools
import re
import types
from collections.abc import Sequence
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from shoal.api.common import RULE_ERROR, Check
from shoal.api.crd import KINDS, crd

Schema = dict[str, Any]

# pydantic's error types that have a clearer wording than its own, whatever the field.
_PLAIN = {
    "missing": "is required",
    "extra_forbidden": "unknown field",
    "none_required": "must not be set",
    "model_type": "must be an object",
    "model_attributes_type": "must be an object",
    "dict_type": "must be an object",
    "list_type": "must be a list",
}
# pydantic's "Input should be ..." and "List should have ... after validation, not 5",
# in the rules' own form.
_SHOULD = re.compile(
    r"^(?:Input|Value|List|Dictionary|String) should (be|have) (.*?)"
    r"(?: after validation)?(?:, not .*)?$"
)
# Errors whose words are those of the field's own rules (its "must be ..." messages).
_FORMAT = ("string_pattern_mismatch", "string_type", "string_too_long", "string_too_short")
_RAISED = ("value_error", "assertion_error")
# A pattern that states its words in its group's name (common.QUANTITY_PATTERN): the
# only words a schema can carry for a field CEL cannot see.
_PATTERN_WORDS = re.compile(r"^\^\(\?P<([A-Za-z0-9_]+)>")
_TAGS = ("str", "int", "float", "bool", "dict", "list", "none")


def _kind(title: str) -> Any:
    """The CRD table's entry of a pydantic model, by its title (None: not a kind)."""
    return next((entry for entry in KINDS if entry.model.__name__ == title), None)


@functools.cache
def _schema(title: str) -> Schema:
    """The openAPIV3Schema of one kind's CRD ({} for a model that is not a kind)."""
    entry = _kind(title)
    if entry is None:
        return {}
    schema: Schema = crd(entry)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    return schema


def _is_tag(part: int | str) -> bool:
    """Whether a step of pydantic's location is its own (a union member, a validator),
    not a field: ``str``, ``function-after[...]``, ``[key]``."""
    return isinstance(part, str) and ("[" in part or part in _TAGS)


def _walk(schema: Schema, loc: Sequence[int | str]) -> tuple[str, Schema | None]:
    """The API server's path of ``loc`` and the schema there (None where the schema
    does not follow)."""
    path: str = ""
    node: Schema | None = schema
    for part in loc:
        if _is_tag(part):
            continue
        if isinstance(part, int):
            path = f"{path}[{part}]"
            node = node.get("items") if node else None
        elif node and part in (node.get("properties") or {}):
            path = f"{path}.{part}" if path else part
            node = node["properties"][part]
        elif node and isinstance(node.get("additionalProperties"), dict):
            path, node = f"{path}.{part}", node["additionalProperties"]
        else:
            path, node = (f"{path}.{part}" if path else part), None
    return path, node


def _checks(annotation: Any, loc: Sequence[int | str]) -> list[Check]:
    """The :class:`Check` objects on the value at ``loc`` below a type annotation."""
    origin, args = get_origin(annotation), get_args(annotation)
    if origin is Annotated:
        own = [m for m in args[1:] if isinstance(m, Check)]
        return [*own, *_checks(args[0], loc)] if not loc else _checks(args[0], loc)
    if origin in (Union, types.UnionType):
        for member in args:
            found = _checks(member, loc)
            if found:
                return found
        return []
    if not loc:
        return []
    step, rest = loc[0], loc[1:]
    if _is_tag(step):
        return _checks(annotation, rest)
    if origin is list and isinstance(step, int):
        return _checks(args[0], rest)
    if origin is dict:
        return _checks(args[1], rest)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        for name, info in annotation.model_fields.items():
            if step in (name, info.alias):
                if rest:
                    return _checks(info.annotation, rest)
                own = [m for m in info.metadata if isinstance(m, Check)]
                return [*own, *_checks(info.annotation, rest)]
    return []


def _failing(model: type[BaseModel] | None, loc: Sequence[int | str], value: Any) -> list[str]:
    """The messages of the checks on the value at ``loc`` that ``value`` fails: which of
    a format's rules a value that fails its pattern breaks."""
    if model is None:
        return []
    failed = []
    for check in _checks(model, loc):
        try:
            ok = check.check(value)
        except (TypeError, ValueError, AttributeError):
            ok = False
        if not ok:
            failed.append(check.message)
    return failed


def _rule_words(node: Schema | None) -> list[str]:
    """The messages of the rules on one value (a string's formats, a number's range)."""
    if node is None or node.get("type") == "object":
        return []
    return [rule["message"] for rule in node.get("x-kubernetes-validations", [])]


def _message(error: Any, node: Schema | None, failing: list[str]) -> str:
    kind = error["type"]
    if kind == RULE_ERROR:
        return str(error["ctx"]["message"])
    if kind in _RAISED:
        text = str(error["msg"])
        return text.split(", ", 1)[1] if text.startswith(("Value error, ", "Assertion")) else text
    if kind in _PLAIN:
        return _PLAIN[kind]
    if kind in _FORMAT:
        words = failing or _rule_words(node)
        if words:
            return "; ".join(words)
        named = _PATTERN_WORDS.match(str((node or {}).get("pattern", "")))
        if named:
            return "must be " + named.group(1).replace("_", " ")
        if node is not None and node.get("description"):
            return f"is not valid: {node['description']}"
    should = _SHOULD.match(str(error["msg"]))
    if should:
        return f"must {should.group(1)} {should.group(2)}"
    return str(error["msg"])


def in_plain_words(exc: ValidationError) -> list[str]:
    """One line per offending field, ``path: what it must be``, without repeats."""
    entry = _kind(exc.title)
    model = entry.model if entry is not None else None
    schema = _schema(exc.title)
    lines: list[str] = []
    for error in exc.errors(include_url=False):
        loc = list(error["loc"])
        if error["type"] == RULE_ERROR:
            # A cross-field rule names the field at fault below the object it is on.
            loc += [p for p in str(error["ctx"]["field"]).split(".") if p]
        path, node = _walk(schema, loc)
        failing = _failing(model, loc, error.get("input")) if error["type"] in _FORMAT else []
        line = f"{path or '(the object)'}: {_message(error, node, failing)}"
        if line not in lines:
            lines.append(line)
    return lines


def invalid_message(what: str, exc: ValidationError, *, one_line: bool = False) -> str:
    """``what`` is invalid, and why, field by field: a line each for a terminal, or one
    line (a condition's message)."""
    lines = in_plain_words(exc)
    if one_line or len(lines) == 1:
        return f"{what} is invalid: " + "; ".join(lines)
    return f"{what} is invalid:\n" + "\n".join(f"  {line}" for line in lines)
