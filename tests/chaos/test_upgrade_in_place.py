"""An upgrade in place: the fleet converged by the previous commit's operator and CRDs,
then the current ones started in its place. A model's pods roll exactly when the two
versions render its pod template differently (none, when the render did not change),
and the current operator then writes nothing in a no-op resync."""

from __future__ import annotations

from benchmarks.chaos.rig import Rig
from benchmarks.chaos.scenarios import upgraded_in_place

from tests.chaos.conftest import CI_SIZE


def test_an_upgrade_rolls_only_the_pods_whose_template_changed(chaos: Rig) -> None:
    figures = upgraded_in_place(chaos, CI_SIZE)
    print(figures)
    assert figures["rollouts"] == figures["templates_changed"]
