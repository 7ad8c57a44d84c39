"""Building blocks shared by the custom resources' models.

The pydantic models in this package are the single source of truth for the CRDs
(see ``crd.py``): descriptions become ``kubectl explain`` text, constraints become
OpenAPI bounds and patterns, and :class:`Rule` objects become CEL
``x-kubernetes-validations`` while the same rules run in Python when a spec is parsed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    PlainSerializer,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel

# ----------------------------------------------------------------------------- rules


@dataclass(frozen=True)
class Rule:
    """A cross-field rule, stated once for both the API server (CEL) and Python.

    ``cel`` runs on the object the rule is attached to (``self``); ``check`` is the same
    rule over the parsed model. ``field`` is the path, relative to that object, the API
    server names in its error (``fieldPath``). A test checks that the two agree.
    """

    cel: str
    check: Callable[[Any], bool]
    message: str
    field: str | None = None

    def as_validation(self) -> dict[str, str]:
        out = {"rule": self.cel, "message": self.message}
        if self.field:
            out["fieldPath"] = self.field
        return out


def _emit_rules(schema: dict[str, Any], cls: type[BaseModel]) -> None:
    rules: tuple[Rule, ...] = getattr(cls, "rules", ())
    if rules:
        schema["x-kubernetes-validations"] = [rule.as_validation() for rule in rules]


def name_rule(pattern: str, max_length: int, message: str) -> Rule:
    """A root-level rule on ``metadata.name``: the names of derived objects constrain it
    more than Kubernetes does."""
    return Rule(
        cel=f"self.metadata.name.matches('{pattern}') && size(self.metadata.name) <= {max_length}",
        check=lambda obj: (
            re.fullmatch(pattern, obj.metadata.name) is not None
            and len(obj.metadata.name) <= max_length
        ),
        message=message,
    )


class SpecModel(BaseModel):
    """Base of every spec/status model: camelCase on the wire, unknown fields refused."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="forbid",
        frozen=True,
        # No coercion ("8" is not 8, "yes" is not true): the models accept exactly what
        # the API server's schema accepts.
        strict=True,
        json_schema_extra=_emit_rules,
    )

    #: Cross-field rules; emitted as x-kubernetes-validations on this object's schema.
    rules: ClassVar[tuple[Rule, ...]] = ()

    @model_validator(mode="after")
    def _check_rules(self) -> SpecModel:
        for rule in type(self).rules:
            if not rule.check(self):
                where = f"{rule.field.lstrip('.')}: " if rule.field else ""
                raise ValueError(f"{where}{rule.message}")
        return self

    def to_wire(self) -> dict[str, Any]:
        """The object as the API server stores it: camelCase, unset optionals omitted."""
        return self.model_dump(by_alias=True, exclude_none=True, mode="json")


# ----------------------------------------------------------------------------- lists


def _unique(items: list[Any]) -> list[Any]:
    seen = [repr(i) for i in items]
    dupes = sorted({s for s in seen if seen.count(s) > 1})
    if dupes:
        raise ValueError(f"duplicate entries: {', '.join(dupes)}")
    return items


def _unique_by(key: str) -> Callable[[list[Any]], list[Any]]:
    def check(items: list[Any]) -> list[Any]:
        keys = [getattr(i, key) for i in items]
        dupes = sorted({repr(k) for k in keys if keys.count(k) > 1})
        if dupes:
            raise ValueError(f"duplicate {key}: {', '.join(dupes)}")
        return items

    return check


#: Validator of a list of unique items (the server's x-kubernetes-list-type: set).
UniqueList = AfterValidator(_unique)


def unique_by(key: str) -> AfterValidator:
    """Validator of a list keyed by ``key`` (the server's x-kubernetes-list-type: map)."""
    return AfterValidator(_unique_by(key))


# ----------------------------------------------------------------------------- strings

# At most six digits before each unit: with the 32-character limit, any duration fits
# Triton's microsecond fields (a 400000000000m queue delay overflowed them).
DURATION_PATTERN = r"^([0-9]{1,6}(\.[0-9]+)?(ns|us|ms|s|m|h))+$"
_DURATION_PART = re.compile(r"([0-9]+(?:\.[0-9]+)?)(ns|us|ms|s|m|h)")
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration string such as ``"1m30s"`` or ``"500us"``."""
    if not re.fullmatch(DURATION_PATTERN, text):
        raise ValueError(f"{text!r} is not a duration such as 5ms, 1.5s or 1m30s")
    return sum(float(n) * _UNIT_SECONDS[unit] for n, unit in _DURATION_PART.findall(text))


Duration = Annotated[
    str,
    Field(
        pattern=DURATION_PATTERN,
        max_length=32,
        json_schema_extra={"example": "5ms"},
    ),
]

DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
DnsLabel = Annotated[str, Field(pattern=DNS_LABEL_PATTERN, min_length=1, max_length=63)]
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
DnsSubdomain = Annotated[str, Field(pattern=DNS_SUBDOMAIN_PATTERN, min_length=1, max_length=253)]

_NUMBER = r"(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))"
# The Kubernetes quantity grammar: a signed number, then a binary or decimal suffix or
# an exponent.
QUANTITY_PATTERN = rf"^(\+|-)?{_NUMBER}(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?{_NUMBER}))?$"


def _quantity_to_str(value: object) -> object:
    return str(value) if isinstance(value, int | float) and not isinstance(value, bool) else value


Quantity = Annotated[
    str,
    BeforeValidator(_quantity_to_str),
    Field(pattern=QUANTITY_PATTERN, max_length=64),
    WithJsonSchema(
        {
            "x-kubernetes-int-or-string": True,
            "anyOf": [{"type": "integer"}, {"type": "string"}],
            "pattern": QUANTITY_PATTERN,
            "description": "A Kubernetes quantity such as 500m, 2, 8Gi.",
        }
    ),
    PlainSerializer(lambda v: v, return_type=str),
]

# ----------------------------------------------------------------------------- shared types


class LabelSelectorRequirement(SpecModel):
    """One requirement of a label selector."""

    key: str = Field(min_length=1, max_length=317, description="The label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="How the key relates to the values."
    )
    values: list[Annotated[str, Field(max_length=63)]] = Field(
        default_factory=list,
        max_length=64,
        description="Values for In and NotIn; must be empty for Exists and DoesNotExist.",
    )

    rules = (
        Rule(
            cel="(self.operator in ['In', 'NotIn']) == (has(self.values) && size(self.values) > 0)",
            check=lambda r: (len(r.values) > 0) == (r.operator in ("In", "NotIn")),
            message="values must be non-empty for In and NotIn, and empty otherwise",
            field=".values",
        ),
    )


class LabelSelector(SpecModel):
    """A standard Kubernetes label selector; the conditions are ANDed."""

    match_labels: dict[str, Annotated[str, Field(max_length=63)]] = Field(
        default_factory=dict, description="Labels that must match exactly."
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, max_length=32, description="Set-based requirements."
    )


class Toleration(SpecModel):
    """A toleration added to the pods, as in a Pod's spec.tolerations."""

    key: str | None = Field(default=None, max_length=317, description="The taint key.")
    operator: Literal["Exists", "Equal"] = Field(
        default="Equal", description="Exists matches any value; Equal needs value."
    )
    value: str | None = Field(default=None, max_length=63, description="The taint value.")
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="The taint effect to match; empty matches all."
    )
    toleration_seconds: int | None = Field(
        default=None, ge=0, le=2**31 - 1, description="For NoExecute: how long the pod stays bound."
    )


ConditionStatus = Literal["True", "False", "Unknown"]


class Condition(SpecModel):
    """The state of one aspect of the object, in the Kubernetes API conventions shape."""

    type: str = Field(
        pattern=r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
        r"(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$",
        max_length=316,
        description="The aspect, in CamelCase: Ready, Progressing, Degraded, ...",
    )
    status: ConditionStatus = Field(description="True, False or Unknown.")
    reason: str = Field(
        pattern=r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        min_length=1,
        max_length=1024,
        description="A CamelCase word that says why the status is what it is.",
    )
    message: str = Field(default="", max_length=32768, description="Details for humans.")
    observed_generation: int | None = Field(
        default=None, ge=0, description="The .metadata.generation the condition was set for."
    )
    last_transition_time: str = Field(
        description="When the status last changed (RFC 3339).",
        json_schema_extra={"format": "date-time"},
    )


Conditions = Annotated[list[Condition], unique_by("type")]


def conditions_field() -> Any:
    return Field(
        default_factory=list,
        description="The latest observations of the object's state.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["type"],
        },
    )


class KopfState(BaseModel):
    """Internal bookkeeping of the operator framework (kept here, not in annotations)."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={"x-kubernetes-preserve-unknown-fields": True},
    )


class ObjectMeta(BaseModel):
    """The parts of metadata the operator reads; the rest is ignored, never rejected."""

    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="ignore", frozen=True
    )

    name: str = ""
    namespace: str | None = None
    uid: str | None = None
    generation: int | None = None
    resource_version: str | None = None
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


M = TypeVar("M", bound=BaseModel)


def parse_object(model: type[M], body: Mapping[str, Any]) -> M:
    """Parse a stored object's metadata and spec; its status is the operator's own
    bookkeeping and is never a reason to refuse the object."""
    return model.model_validate({k: v for k, v in body.items() if k != "status"})
