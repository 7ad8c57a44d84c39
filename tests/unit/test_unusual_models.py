"""The unusual-but-valid corpus (tests/support/unusual.py) is accepted by the models,
holding each value in the form the case expects; the API server's side is
tests/cluster/test_unusual_resources.py."""

from __future__ import annotations

from typing import Any

import pytest

from shoal.api.crd import KINDS
from tests.support.unusual import CASES, Case, built

# Each kind's pydantic model, from the table the CRDs are generated from.
MODELS: dict[str, Any] = {kind.name: kind.model for kind in KINDS}


def test_the_corpus_covers_every_kind() -> None:
    assert len(CASES) >= 40
    assert {c.kind for c in CASES} == set(MODELS)
    assert len({c.id for c in CASES}) == len(CASES)


def _attribute(model: Any, path: str) -> Any:
    for part in path.split("."):
        model = getattr(model, part)
    return model


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_models_accept(case: Case) -> None:
    parsed = MODELS[case.kind].model_validate(built(case))
    for path, value in case.expect:
        assert _attribute(parsed, path) == value, path
