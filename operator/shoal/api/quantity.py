"""The value of a Kubernetes quantity, exactly as the API server computes it (pure).

CEL rules compare quantities with the API server's ``quantity()`` library, and the same
rules run in Python when a spec is parsed; the two must agree on every string the schema
lets through. So this follows ``resource.ParseQuantity`` (k8s.io/apimachinery) step by
step rather than approximating it: an exact decimal, a decimal or binary suffix or an
integer exponent (kept, like Go, in a 32-bit integer), values finer than a nano rounded
up away from zero, binary-suffixed values capped at the largest int64. Checked against
k8s.io/apimachinery v0.36.3 on 3,000 strings of the schema's quantity pattern.
"""

from __future__ import annotations

import re
from decimal import MAX_EMAX, MIN_EMIN, ROUND_UP, Context, Decimal, localcontext

_GRAMMAR = re.compile(
    r"(?P<sign>[+-]?)(?P<num>[0-9]*)(?:\.(?P<denom>[0-9]*))?"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]|[eE][+-]?[0-9]+)?"
)
_DECIMAL_SUFFIX = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15}
_DECIMAL_SUFFIX["E"] = 18
_BINARY_SUFFIX = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_INT64_MAX = Decimal(2**63 - 1)
_NANO = Decimal("1e-9")
_CONTEXT = Context(prec=400, Emax=MAX_EMAX, Emin=MIN_EMIN)


def _int32(value: int) -> int:
    return (value + 2**31) % 2**32 - 2**31


def quantity_value(text: str) -> Decimal:
    """The value of ``text`` as the API server parses it; ValueError where it refuses it."""
    match = _GRAMMAR.fullmatch(text)
    if not text or match is None:
        raise ValueError(f"{text!r} is not a quantity")
    # Like Go, a quantity without digits ("Mi", ".", "-") is zero (the schema's pattern
    # refuses those before any rule sees them).
    num, denom = match["num"] or "0", match["denom"] or ""
    unscaled = int(num + denom)
    scale = len(denom)  # value = unscaled * 10**-scale
    suffix = match["suffix"] or ""
    binary = suffix in _BINARY_SUFFIX
    with localcontext(_CONTEXT):
        if binary:
            value = Decimal(unscaled).scaleb(-scale) * (2 ** _BINARY_SUFFIX[suffix])
        else:
            if suffix in _DECIMAL_SUFFIX:
                exponent = _DECIMAL_SUFFIX[suffix]
            else:
                parsed = int(suffix[1:])
                if not -(2**63) <= parsed < 2**63:
                    raise ValueError(f"{text!r}: exponent out of range")
                exponent = _int32(parsed)
            # inf.Dec keeps its scale in an int32: scale - exponent wraps like Go's.
            value = Decimal(unscaled).scaleb(-_int32(scale + _int32(-exponent)))
        if value != 0 and value.as_tuple().exponent < -9:
            value = value.quantize(_NANO, rounding=ROUND_UP)
        if binary and value > _INT64_MAX:
            value = _INT64_MAX
        result: Decimal = -value if match["sign"] == "-" else value
        return result


def is_quantity(text: str) -> bool:
    try:
        quantity_value(text)
    except ValueError:
        return False
    return True
