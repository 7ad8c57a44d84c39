"""The set/unset convergence test (tests/cluster/test_field_removal.py) covers every
optional field of the three kinds: a field added to the API without a case fails here."""

from __future__ import annotations

from shoal.api.inferencemodel import ModelSource
from tests.support.optional_fields import CASES, SPECS, optional_paths


def test_every_optional_field_has_a_case() -> None:
    covered = {case.id for case in CASES}
    missing = sorted(
        f"{kind}.{path}"
        for kind, spec in SPECS.items()
        for path in optional_paths(spec)
        if f"{kind}.{path}" not in covered
    )
    assert not missing, f"optional fields without a set/unset case: {missing}"


def test_every_case_names_a_field_that_exists() -> None:
    stale = [c.id for c in CASES if c.path not in optional_paths(SPECS[c.kind])]
    assert not stale, stale
    assert len({c.id for c in CASES}) == len(CASES)


def test_the_walk_finds_nested_and_list_item_fields() -> None:
    paths = optional_paths(SPECS["InferenceModel"])
    assert "scaling.scaleUp.maxReplicasPerStep" in paths
    assert "scaling.schedules[].timeZone" in paths
    assert "pool" not in paths  # required
    assert "storageUri" not in optional_paths(ModelSource)
