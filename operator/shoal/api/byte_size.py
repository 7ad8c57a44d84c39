"""A number of bytes written as Kubernetes writes one (``64Mi``, ``12Gi``), bounded: a
whole number with an optional binary or decimal suffix, held between a least and a
most value by the API server (a CEL rule on the quantity) and by the models alike.

A field's type is ``Annotated[str, byte_size_format(example), byte_size_bounds(least,
most)]``."""

from __future__ import annotations

from shoal.api.common import Check, TextFormat, cel_string, matches
from shoal.api.quantity import quantity_value

BYTE_SIZE_PATTERN = r"^[1-9][0-9]{0,15}(Ki|Mi|Gi|Ti|Pi|k|M|G|T|P)?$"


def byte_size_format(example: str) -> TextFormat:
    return TextFormat(
        BYTE_SIZE_PATTERN,
        f"a whole number of bytes with an optional suffix, such as {example}",
        max_length=18,
        example=example,
    )


def byte_size_bounds(least: str, most: str) -> Check:
    return Check(
        cel=f"!self.matches({cel_string(BYTE_SIZE_PATTERN)}) || "
        f"(quantity(self).compareTo(quantity('{least}')) >= 0 && "
        f"quantity(self).compareTo(quantity('{most}')) <= 0)",
        check=lambda size: (
            not matches(BYTE_SIZE_PATTERN, size)
            or quantity_value(least) <= quantity_value(size) <= quantity_value(most)
        ),
        message=f"must be from {least} to {most}",
    )


def bytes_of(size: str) -> int:
    """The whole number of bytes a size the type admitted stands for."""
    return int(quantity_value(size))
