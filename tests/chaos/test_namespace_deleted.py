"""A tenant namespace holding models is deleted while the operator runs: nothing blocks
its deletion and its pool's status stops counting it."""

from __future__ import annotations

from benchmarks.chaos.rig import Rig
from benchmarks.chaos.scenarios import namespace_deleted

from tests.chaos.conftest import CI_SIZE


def test_a_deleted_tenant_namespace_goes_and_its_pool_forgets_it(chaos: Rig) -> None:
    figures = namespace_deleted(chaos, CI_SIZE)
    print(figures)
    assert figures["models_in_namespace"] > 0
    assert figures["namespace_gone_s"] < 60
