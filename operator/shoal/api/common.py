"""Building blocks shared by the custom resources' models.

The pydantic models in this package are the single source of truth for the CRDs
(see ``crd.py``): descriptions become ``kubectl explain`` text, constraints become
OpenAPI bounds and patterns, and :class:`Rule` objects become CEL
``x-kubernetes-validations`` while the same rules run in Python when a spec is parsed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Annotated, Any, ClassVar, Literal, TypeVar

from annotated_types import GroupedMetadata
from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    PlainSerializer,
    StringConstraints,
    WithJsonSchema,
    model_validator,
)
from pydantic.alias_generators import to_camel
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema, PydanticCustomError, core_schema

from shoal.api.quantity import canonical_quantity

# ----------------------------------------------------------------------------- rules

# The type of a pydantic error raised by a broken cross-field :class:`Rule`.
RULE_ERROR = "shoal_rule"


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


def cel_string(text: str) -> str:
    """``text`` as a CEL raw string literal (backslashes kept as they are)."""
    if "'" in text or "\n" in text:
        raise ValueError(f"cannot quote {text!r} as a CEL raw string")
    return f"r'{text}'"


@dataclass(frozen=True)
class Check:
    """A rule on one value (a string, a number), for the API server and for Python.

    Placed in an ``Annotated`` type, it adds a CEL rule to the value's own schema
    (``self`` is the value) and runs ``check`` as a pydantic validator. On the key type
    of a map, the CRD generator applies it to every key of the map. ``message`` says,
    in words, what is expected: "must be a duration such as 5ms".
    """

    cel: str
    check: Callable[[Any], bool]
    message: str
    example: str | None = None

    def __get_pydantic_core_schema__(
        self, source: Any, handler: GetCoreSchemaHandler
    ) -> CoreSchema:
        def validate(value: Any) -> Any:
            if not self.check(value):
                raise ValueError(self.message)
            return value

        return core_schema.no_info_after_validator_function(validate, handler(source))

    def __get_pydantic_json_schema__(
        self, schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        out = dict(handler(schema))
        rule = {"rule": self.cel, "message": self.message}
        out["x-kubernetes-validations"] = [*out.get("x-kubernetes-validations", []), rule]
        if self.example is not None:
            out["example"] = self.example
        return out


def matches(pattern: str, text: str) -> bool:
    """Whether ``text`` matches an anchored ``pattern`` as RE2 (CEL, OpenAPI) matches it."""
    return re.fullmatch(pattern, text) is not None


@dataclass(frozen=True)
class TextFormat(GroupedMetadata):
    """A string format: ``pattern`` (anchored ``^(...)$``) and length bounds in the schema,
    and a rule beside them whose refusal says the string must be ``what``.

    Usage: ``Annotated[str, TextFormat(...)]``.
    """

    pattern: str
    what: str
    max_length: int
    min_length: int = 0
    example: str | None = None

    def __iter__(self) -> Iterator[Any]:
        yield StringConstraints(
            pattern=self.pattern, max_length=self.max_length, min_length=self.min_length or None
        )
        pattern = self.pattern
        yield Check(
            cel=f"self.matches({cel_string(pattern)})",
            check=lambda value: matches(pattern, value),
            message=f"must be {self.what}",
            example=self.example,
        )


def _emit_rules(schema: dict[str, Any], cls: type[BaseModel]) -> None:
    rules: tuple[Rule, ...] = getattr(cls, "rules", ())
    if rules:
        schema["x-kubernetes-validations"] = [rule.as_validation() for rule in rules]


def name_rule(pattern: str, max_length: int, message: str) -> Rule:
    """A root-level rule on ``metadata.name``: the names of derived objects constrain it
    more than Kubernetes does. The API server names ``metadata.name`` in its error."""
    return Rule(
        cel=f"self.metadata.name.matches({cel_string(pattern)}) "
        f"&& size(self.metadata.name) <= {max_length}",
        check=lambda obj: (
            matches(pattern, obj.metadata.name) and len(obj.metadata.name) <= max_length
        ),
        message=message,
        field=".metadata.name",
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

    @model_validator(mode="before")
    @classmethod
    def _null_means_the_defaults(cls, data: Any) -> Any:
        """An object or list field given as null gets its defaults, as the API server
        does: it drops the null and defaults the field (see crd._refuse_null_for_defaults
        for why scalars are refused instead)."""
        if not isinstance(data, dict):
            return data
        nulls = {
            key
            for name, info in cls.model_fields.items()
            if info.default_factory is not None
            for key in (name, info.alias)
            if key in data and data[key] is None
        }
        return {k: v for k, v in data.items() if k not in nulls} if nulls else data

    @model_validator(mode="after")
    def _check_rules(self) -> SpecModel:
        for rule in type(self).rules:
            if not rule.check(self):
                # The field the API server names (fieldPath) travels in the error's
                # context, so a refusal can be quoted at that path (api.refusal_words).
                where = rule.field.lstrip(".") if rule.field else ""
                template = "{field}: {message}" if where else "{message}"
                raise PydanticCustomError(
                    RULE_ERROR, template, {"field": where, "message": rule.message}
                )
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


# ----------------------------------------------------------------------------- durations

# A Go duration (time.ParseDuration, which CEL's duration() runs) without a sign: one to
# eight parts such as 1h, 30m or 1.5s. Each unit allows as many digits as keep every
# duration the pattern admits below Go's limit of about 292 years, so the API server's
# duration() never overflows on one; each field then bounds its duration by value.
_DURATION_DIGITS = {"ns": 18, "us": 15, "ms": 12, "s": 9, "m": 7, "h": 5}
DURATION_PATTERN = (
    "^("
    + "|".join(f"[0-9]{{1,{n}}}(\\.[0-9]+)?{unit}" for unit, n in _DURATION_DIGITS.items())
    + "){1,8}$"
)
_DURATION_PART = re.compile(r"([0-9]+)(?:\.([0-9]+))?(ns|us|ms|s|m|h)")
_UNIT_NANOSECONDS = {
    "ns": 1,
    "us": 10**3,
    "ms": 10**6,
    "s": 10**9,
    "m": 6 * 10**10,
    "h": 36 * 10**11,
}


def duration_nanoseconds(text: str) -> int:
    """Nanoseconds in a duration such as ``"1m30s"``, exactly as Go's
    time.ParseDuration (and so the API server's CEL ``duration()``) computes them."""
    if not matches(DURATION_PATTERN, text):
        raise ValueError(f"{text!r} is not a duration such as 5ms, 1.5s or 1m30s")
    total = 0
    for whole, fraction, unit in _DURATION_PART.findall(text):
        nanos = _UNIT_NANOSECONDS[unit]
        value = int(whole) * nanos
        # Go's leadingFraction: digits past int64 precision are dropped, and the fraction
        # is scaled in float64.
        digits, scale, overflow = 0, 1.0, False
        for char in fraction:
            if overflow:
                continue
            if digits > (2**63 - 1) // 10 or digits * 10 + int(char) > 2**63:
                overflow = True
                continue
            digits, scale = digits * 10 + int(char), scale * 10
        if digits:
            value += int(float(digits) * (float(nanos) / scale))
        total += value
    return total


def parse_duration(text: str) -> float:
    """Seconds in a Go-style duration string such as ``"1m30s"`` or ``"500us"``."""
    return duration_nanoseconds(text) / 1e9


@dataclass(frozen=True)
class DurationFormat(GroupedMetadata):
    """A duration string bounded by value, from ``minimum`` to ``maximum``: what the field
    means and what the object it is rendered into accepts.

    Usage: ``Annotated[str, DurationFormat("0s", "1h", example="5m")]``.
    """

    minimum: str
    maximum: str
    example: str

    def __iter__(self) -> Iterator[Any]:
        low, high = duration_nanoseconds(self.minimum), duration_nanoseconds(self.maximum)
        cel = f"self.matches({cel_string(DURATION_PATTERN)})"
        if low:
            cel += f" && duration(self) >= duration('{self.minimum}')"
        cel += f" && duration(self) <= duration('{self.maximum}')"
        yield StringConstraints(pattern=DURATION_PATTERN, max_length=32)
        yield Check(
            cel=cel,
            check=lambda text: low <= duration_nanoseconds(text) <= high,
            message=f"must be a duration such as {self.example} (numbers with a unit: ns, us, "
            f"ms, s, m or h), from {self.minimum} to {self.maximum}",
            example=self.example,
        )


# ----------------------------------------------------------------------------- names

_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN = rf"{_DNS_LABEL}(\.{_DNS_LABEL})*"
DNS_LABEL_PATTERN = rf"^{_DNS_LABEL}$"
DNS_SUBDOMAIN_PATTERN = rf"^{_DNS_SUBDOMAIN}$"
DNS_LABEL_WORDS = (
    "a DNS label: at most 63 lowercase letters, digits and '-', starting and ending "
    "with a letter or digit"
)
DnsLabel = Annotated[
    str, TextFormat(DNS_LABEL_PATTERN, DNS_LABEL_WORDS, min_length=1, max_length=63)
]
DnsSubdomain = Annotated[
    str,
    TextFormat(
        DNS_SUBDOMAIN_PATTERN,
        "a DNS subdomain: DNS labels joined by '.', at most 253 characters",
        min_length=1,
        max_length=253,
    ),
]

# Label keys and values, as the API server validates them on every object's labels, a
# Pod's nodeSelector and tolerations, and label selectors.
_LABEL_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
LABEL_KEY_PATTERN = rf"^({_DNS_SUBDOMAIN}/)?{_LABEL_NAME}$"
LABEL_VALUE_PATTERN = rf"^({_LABEL_NAME})?$"
_LABEL_KEY_CEL = (
    f"self.matches({cel_string(LABEL_KEY_PATTERN)}) "
    "&& (!self.contains('/') || self.indexOf('/') <= 253)"
)
_LABEL_KEY_WORDS = (
    "a label key such as example.com/node-group: an optional DNS subdomain prefix of at "
    "most 253 characters and '/', then a name of at most 63 letters, digits, '-', '_' and "
    "'.', starting and ending with a letter or digit"
)


def is_label_key(key: str) -> bool:
    return matches(LABEL_KEY_PATTERN, key) and ("/" not in key or key.index("/") <= 253)


LabelKey = Annotated[
    str,
    Field(min_length=1, max_length=317),
    Check(cel=_LABEL_KEY_CEL, check=is_label_key, message=f"must be {_LABEL_KEY_WORDS}"),
]
LabelValue = Annotated[
    str,
    TextFormat(
        LABEL_VALUE_PATTERN,
        "a label value: empty, or at most 63 letters, digits, '-', '_' and '.', starting and "
        "ending with a letter or digit",
        max_length=63,
    ),
]

# ----------------------------------------------------------------------------- quantities

_POSITIVE_NUMBER = r"([0-9]*[1-9][0-9]*(\.[0-9]*)?|[0-9]*\.[0-9]*[1-9][0-9]*)"
# The Kubernetes quantity grammar, positive only: a number with a nonzero digit, then a
# binary or decimal suffix or a (short) exponent. Every string it admits parses as a
# quantity. The group's name is the only place a schema pattern can carry words: the
# API server prints the pattern, and CEL cannot see a field that may hold a number.
QUANTITY_PATTERN = (
    rf"^(?P<a_positive_quantity_such_as_500m_or_8Gi>\+?{_POSITIVE_NUMBER}"
    r"([KMGTPE]i|[numkMGTPE]|[eE][-+]?[0-9]{1,3})?)$"
)
_MAX_INT64 = 2**63 - 1


def quantity_text(value: object) -> object:
    """A number as the API server decodes it (an integer beyond int64 becomes a float),
    written as a string the quantity grammar reads."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, int) and -_MAX_INT64 - 1 <= value <= _MAX_INT64:
        return str(value)
    try:
        number = float(value)
    except OverflowError:
        return "inf"
    # Stored and read back, a float is written as Go's encoder writes it: positional
    # between 1e-6 and 1e21 (1e+16 comes back as 10000000000000000), else exponent.
    if 1e-6 <= abs(number) < 1e21:
        return format(Decimal(repr(number)).normalize(), "f")
    return repr(number)


# The schema of a quantity: a string ("500m", "8Gi") or a number (0.5, 2), as a Pod takes
# them. Since it takes numbers it cannot be typed for CEL: strings are checked by the
# pattern, numbers by the bound, and objects, lists and booleans match nothing.
_QUANTITY_SCHEMA = WithJsonSchema(
    {
        "x-kubernetes-preserve-unknown-fields": True,
        "description": "A positive Kubernetes quantity such as 500m, 0.5, 2 or 8Gi.",
        "pattern": QUANTITY_PATTERN,
        "maxLength": 64,
        "minimum": 0,
        "exclusiveMinimum": True,
        "minProperties": 1,
        "maxProperties": 0,
        "minItems": 1,
        "maxItems": 0,
        "not": {"enum": [True, False]},
    }
)


def _resource_list_quantity(text: str) -> str:
    return canonical_quantity(text, resource_list=True)


# The models hold the canonical string the API server stores for the value ("0.5" and
# 0.5 are both "500m"), so a rendered object reads back as it was applied.
Quantity = Annotated[
    str,
    BeforeValidator(quantity_text),
    Field(pattern=QUANTITY_PATTERN, max_length=64),
    AfterValidator(canonical_quantity),
    _QUANTITY_SCHEMA,
    PlainSerializer(lambda v: v, return_type=str),
]
# A quantity in a container's requests or limits, which the API server rounds up to milli
# units first ("0.0001" is stored as "1m").
ResourceQuantity = Annotated[
    str,
    BeforeValidator(quantity_text),
    Field(pattern=QUANTITY_PATTERN, max_length=64),
    AfterValidator(_resource_list_quantity),
    _QUANTITY_SCHEMA,
    PlainSerializer(lambda v: v, return_type=str),
]

# ----------------------------------------------------------------------------- shared types


class LabelSelectorRequirement(SpecModel):
    """One requirement of a label selector."""

    key: LabelKey = Field(description="The label key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"] = Field(
        description="How the key relates to the values."
    )
    values: list[LabelValue] = Field(
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

    match_labels: dict[LabelKey, LabelValue] = Field(
        default_factory=dict, max_length=64, description="Labels that must match exactly."
    )
    match_expressions: list[LabelSelectorRequirement] = Field(
        default_factory=list, max_length=32, description="Set-based requirements."
    )

    def is_empty(self) -> bool:
        return not self.match_labels and not self.match_expressions


TolerationKey = Annotated[
    str,
    Field(max_length=317),
    Check(
        cel=f"self == '' || ({_LABEL_KEY_CEL})",
        check=lambda key: key == "" or is_label_key(key),
        message=f"must be empty (with operator Exists) or {_LABEL_KEY_WORDS}",
    ),
]


class Toleration(SpecModel):
    """A toleration of the pool's pods, checked by the rules a Pod's tolerations obey."""

    key: TolerationKey | None = Field(
        default=None, description="The taint key; empty, with operator Exists, matches every key."
    )
    operator: Literal["Exists", "Equal"] = Field(
        default="Equal", description="Exists matches any value; Equal needs value."
    )
    value: LabelValue | None = Field(
        default=None, description="The taint value, for operator Equal."
    )
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = Field(
        default=None, description="The taint effect to match; empty matches all."
    )
    toleration_seconds: int | None = Field(
        default=None,
        ge=0,
        le=2**31 - 1,
        description="For effect NoExecute: how long the pod stays bound after the taint appears.",
    )

    rules = (
        Rule(
            cel="(has(self.key) && self.key != '') || self.operator == 'Exists'",
            check=lambda t: bool(t.key) or t.operator == "Exists",
            message="operator must be Exists when key is empty (which tolerates every taint)",
            field=".operator",
        ),
        Rule(
            cel="self.operator != 'Exists' || !has(self.value) || self.value == ''",
            check=lambda t: t.operator != "Exists" or not t.value,
            message="value must be empty when operator is Exists",
            field=".value",
        ),
        Rule(
            cel="!has(self.tolerationSeconds) || (has(self.effect) && self.effect == 'NoExecute')",
            check=lambda t: t.toleration_seconds is None or t.effect == "NoExecute",
            message="tolerationSeconds needs effect NoExecute",
            field=".tolerationSeconds",
        ),
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
