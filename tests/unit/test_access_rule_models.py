"""The models refuse the objects of tests/support/access_rules.py that the API server
refuses (tests/cluster/test_isolation_and_cache_rules.py)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tests.support.access_rules import MODELS, REFUSED
from tests.support.malformed import Case


@pytest.mark.parametrize("case", REFUSED, ids=lambda c: c.id)
def test_models_refuse_the_same_objects(case: Case) -> None:
    with pytest.raises(ValidationError):
        MODELS[case.kind].model_validate(case.build())
