"""Quantities valued as the API server values them (its CEL quantity() library uses the
same parser), so a rule comparing quantities gives the same verdict in Python.

The expected values were checked against k8s.io/apimachinery v0.36.3's ParseQuantity.
"""

from __future__ import annotations

from decimal import Decimal

import pytest

from shoal.api.inferencemodel import Runtime
from shoal.api.quantity import is_quantity, quantity_value


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", "0"),
        ("-0", "0"),
        ("1", "1"),
        ("+1", "1"),
        ("1Ki", "1024"),
        ("1.5Gi", "1610612736"),
        ("0.5Ki", "512"),
        ("1e3", "1000"),
        ("1E3", "1000"),
        ("1E", "1e18"),
        ("1e-3", "0.001"),
        ("100m", "0.1"),
        ("5.", "5"),
        (".5", "0.5"),
        ("1.Gi", "1073741824"),
        # Finer than a nano: rounded up, away from zero.
        ("0.0000000001", "1e-9"),
        ("-1e-10", "-1e-9"),
        ("1.0000000001", "1.000000001"),
        ("0.1n", "1e-9"),
        # Binary suffixes are capped at the largest int64; decimal ones are not.
        ("16Ei", str(2**63 - 1)),
        ("-16Ei", str(-(2**63 - 1))),
        ("16E", "1.6e19"),
        # Go, unlike its documentation, reads a quantity without digits as zero.
        ("Mi", "0"),
        (".", "0"),
    ],
)
def test_values_match_the_api_server(text: str, value: str) -> None:
    assert quantity_value(text) == Decimal(value)


@pytest.mark.parametrize(
    "text", ["", "1e", "1K", "K", "1.5e1.5", "1e9223372036854775808", "1,5", "x"]
)
def test_what_the_api_server_refuses(text: str) -> None:
    assert not is_quantity(text)
    with pytest.raises(ValueError, match=r"quantity|exponent"):
        quantity_value(text)


def test_a_float_quantity_reads_as_the_server_writes_it_back() -> None:
    """1e16 sent as a JSON number is stored and read back as 10000000000000000 (Go
    writes floats positionally below 1e21): both must parse to the same quantity, or a
    spec and its stored self disagree."""

    def runtime(**fields: object) -> Runtime:
        return Runtime.model_validate(fields)  # numbers, as JSON carries them

    assert runtime(shmSize=1e16).shm_size == runtime(shmSize=10**16).shm_size
    assert runtime(cpu=2.0).cpu == runtime(cpu=2).cpu
    assert runtime(cpu=1.5e-3).cpu == "2m"  # rounded up to milli units, as the server does
