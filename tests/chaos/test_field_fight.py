"""A second field manager forces its values onto a Deployment's image and a quota's GPU
limit: Shoal repairs each change exactly once (no write loop) and then writes
nothing."""

from __future__ import annotations

from benchmarks.chaos.rig import Rig
from benchmarks.chaos.scenarios import field_fight

from tests.chaos.conftest import CI_SIZE


def test_shoal_repairs_each_forced_change_once(chaos: Rig) -> None:
    figures = field_fight(chaos, CI_SIZE, seconds=15, interval=5)
    print(figures)
    assert figures["operator_repairs_per_min"] == figures["admin_writes_per_min"]
