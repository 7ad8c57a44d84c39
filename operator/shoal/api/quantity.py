"""Kubernetes resource quantities in pure Python: parsed and printed as the API server does.

A port of ``ParseQuantity``, ``RoundUp`` and ``CanonicalizeBytes`` from
k8s.io/apimachinery (pkg/api/resource, v0.36): the value a string stands for (rounded up
to nano units as the server rounds it), and the canonical string the server stores
("0.5" becomes "500m", "1024Mi" becomes "1Gi"). In a resource list (a container's
requests and limits, a quota) the server first rounds up to milli units
(``SetDefaults_ResourceList``): "0.0001" becomes "1m". The operator renders the
canonical string, so a live object it reads back equals what it applied. A cluster test
compares both with the real API server.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from decimal import Decimal, localcontext
from fractions import Fraction

_DECIMAL_SUFFIXES = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18
}  # fmt: skip
_BINARY_SUFFIXES = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_SUFFIX_CHARS = set("eEinumkKMGTP")
_MAX_INT64 = 2**63 - 1
_NANO = 10**9

DECIMAL_SI, BINARY_SI, DECIMAL_EXPONENT = "DecimalSI", "BinarySI", "DecimalExponent"


@dataclass(frozen=True)
class ParsedQuantity:
    value: Fraction
    format: str
    # The input itself, when the server keeps it as the printed form (already canonical).
    verbatim: str | None = None
    # The decimal scale of a value the server holds as an int64 (None: as a decimal).
    scale: int | None = None


def _split(text: str) -> tuple[bool, str, str, str, str] | None:
    """parseQuantityString: sign, value (before the suffix), numerator, denominator,
    suffix; None for ErrFormatWrong."""
    positive, pos, end = True, 0, len(text)
    if pos < end and text[0] in "+-":
        positive = text[0] == "+"
        pos += 1
    while True:
        if pos >= end:
            return positive, "0", "0", "", ""
        if text[pos] != "0":
            break
        pos += 1
    start = pos
    while pos < end and text[pos] in "0123456789":
        pos += 1
    if pos >= end:
        return positive, text, text[start:], "", ""
    num = text[start:pos] or "0"
    denom = ""
    if text[pos] == ".":
        pos += 1
        start = pos
        while pos < end and text[pos] in "0123456789":
            pos += 1
        denom = text[start:pos]
        if pos >= end:
            return positive, text, num, denom, ""
    value = text[:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_CHARS:
        pos += 1
    if pos >= end:
        return positive, value, num, denom, text[suffix_start:]
    if text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in "0123456789":
        pos += 1
    if pos < end:
        return None
    return positive, value, num, denom, text[suffix_start:]


def _interpret(suffix: str) -> tuple[int, int, str] | None:
    """suffixHandler.interpret: base, exponent and format of a suffix."""
    if suffix in _DECIMAL_SUFFIXES:
        return 10, _DECIMAL_SUFFIXES[suffix], DECIMAL_SI
    if suffix in _BINARY_SUFFIXES:
        return 2, _BINARY_SUFFIXES[suffix], BINARY_SI
    if len(suffix) > 1 and suffix[0] in "eE":
        digits = suffix[1:]
        body = digits[1:] if digits[0] in "+-" else digits
        if not body or not all(c in "0123456789" for c in body):
            return None
        parsed = int(digits)
        if not -(2**63) <= parsed <= _MAX_INT64:
            return None
        wrapped = (parsed + 2**31) % 2**32 - 2**31  # Go's int32(parsed)
        return 10, wrapped, DECIMAL_EXPONENT
    return None


def _decimal(value: str) -> Fraction:
    sign = -1 if value.startswith("-") else 1
    body = value.lstrip("+-")
    whole, _, frac = body.partition(".")
    amount = Fraction(int(whole or "0")) + Fraction(int(frac or "0"), 10 ** len(frac))
    return sign * amount


def parse_quantity(text: str) -> ParsedQuantity | None:
    """The quantity ``text`` stands for, or None where the API server refuses it."""
    if not text:
        return None
    if text == "0":
        return ParsedQuantity(Fraction(0), DECIMAL_SI, "0")
    split = _split(text)
    if split is None:
        return None
    positive, value, num, denom, suffix = split
    interpreted = _interpret(suffix)
    if interpreted is None:
        return None
    base, exponent, fmt = interpreted

    # The int64 fast path: its values are exact, and some keep the input as printed.
    mantissa, scale = 1, 0
    if fmt in (DECIMAL_SI, DECIMAL_EXPONENT):
        scale, precision = exponent, 18 - (len(num) + len(denom))
    elif exponent >= 0 and not denom:
        mantissa = 1 << exponent
        precision = 15 - len(num) - int(exponent * 3 / 10) - 1
    else:
        precision = -1
    if precision >= 0:
        scale -= len(denom)
        if scale >= -9:
            shifted = num + denom
            amount = int(shifted) * mantissa
            if amount <= _MAX_INT64:
                verbatim = None
                if fmt == BINARY_SI:
                    if exponent % 10 == 0 and int(shifted) & 7:
                        verbatim = text
                elif scale % 3 == 0 and not shifted.endswith("000") and shifted[0] != "0":
                    verbatim = text
                signed = amount if positive else -amount
                exact = Fraction(signed) * Fraction(10) ** scale
                return ParsedQuantity(exact, fmt, verbatim, scale)

    if not any(c in "0123456789" for c in value):
        return None  # inf.Dec refuses a number without digits
    amount_f = _decimal(value)
    amount_f *= Fraction(base) ** exponent
    magnitude = abs(amount_f)
    if magnitude:
        # Rounded up to nano units: whoever asks for a little gets a little.
        magnitude = Fraction(math.ceil(magnitude * _NANO), _NANO)
    if fmt == BINARY_SI and magnitude > _MAX_INT64:
        magnitude = Fraction(_MAX_INT64)
    if fmt == BINARY_SI and 0 < magnitude < 1:
        fmt = DECIMAL_SI
    return ParsedQuantity(magnitude if amount_f >= 0 else -magnitude, fmt)


def round_up_to_milli(parsed: ParsedQuantity) -> ParsedQuantity:
    """Quantity.RoundUp(Milli), away from zero, as the server applies it to resource lists;
    a value it holds as an int64 with at most three decimals keeps its printed form."""
    if parsed.scale is not None and parsed.scale >= -3:
        return parsed
    value = parsed.value
    magnitude = Fraction(math.ceil(abs(value) * 1000), 1000)
    return ParsedQuantity(magnitude if value >= 0 else -magnitude, parsed.format, None, -3)


def _without_factors(value: int, base: int) -> tuple[int, int]:
    times = 0
    sign = -1 if value < 0 else 1
    value = abs(value)
    while value >= base and value % base == 0:
        value //= base
        times += 1
    return sign * value, times


def canonical(parsed: ParsedQuantity) -> str:
    """CanonicalizeBytes: how the API server prints the quantity."""
    if parsed.verbatim is not None:
        return parsed.verbatim
    value, fmt = parsed.value, parsed.format
    if value == 0:
        return "0"
    if fmt == BINARY_SI and (-1024 < value < 1024 or value.denominator != 1):
        fmt = DECIMAL_SI
    if fmt == BINARY_SI:
        number, times = _without_factors(int(value), 1024)
        suffix = {v: k for k, v in _BINARY_SUFFIXES.items()}.get(times * 10, "")
        return f"{number}{suffix}"
    # Every value here is a whole number of nano units.
    number, exponent = _without_factors(int(value * _NANO), 10)
    exponent -= 9
    while exponent % 3:
        number *= 10
        exponent -= 1
    if fmt == DECIMAL_EXPONENT:
        return f"{number}e{exponent}" if exponent else str(number)
    # An exponent without an SI prefix prints without a suffix, as upstream does.
    suffix = {v: k for k, v in _DECIMAL_SUFFIXES.items()}.get(exponent, "")
    return f"{number}{suffix}"


def canonical_quantity(text: str, *, resource_list: bool = False) -> str:
    """The canonical form of a quantity string, as the server stores it on its own or (with
    ``resource_list``) in a container's resources; ValueError where it is not one."""
    parsed = parse_quantity(text)
    if parsed is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    return canonical(round_up_to_milli(parsed) if resource_list else parsed)


def quantity_value(text: str) -> Decimal:
    """The value of ``text`` as the API server parses it (exact: a whole number of nano
    units, or an integer); ValueError where it refuses it. CEL rules compare quantities
    with the server's ``quantity()``, and the same rules run in Python on this."""
    parsed = parse_quantity(text)
    if parsed is None:
        raise ValueError(f"{text!r} is not a Kubernetes quantity")
    value = parsed.value
    with localcontext() as exact:
        exact.prec = max(28, len(str(value.numerator)) + 12)
        return Decimal(value.numerator) / Decimal(value.denominator)


def is_quantity(text: str) -> bool:
    return parse_quantity(text) is not None
