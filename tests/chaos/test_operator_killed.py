"""kill -9 of the operator at random points of reconcile waves, then a restart: the
fleet converges exactly (every model Ready, exactly its children, no orphans or
duplicates) and the next no-op resync writes nothing."""

from __future__ import annotations

from benchmarks.chaos.rig import Rig
from benchmarks.chaos.scenarios import leader_killed, operator_killed

from tests.chaos.conftest import CI_SIZE


def test_a_killed_operator_converges_exactly_after_its_restart(chaos: Rig) -> None:
    figures = operator_killed(chaos, CI_SIZE, rounds=2, seed=1)
    print(figures)
    assert len(figures["rounds"]) == 2
    assert all(r["noop_writes"] == 0 for r in figures["rounds"])


def test_the_follower_takes_over_a_killed_leader_within_the_lease(chaos: Rig) -> None:
    figures = leader_killed(chaos, CI_SIZE, seed=1)
    print(figures)
    # Within the lease duration plus one retry of the follower.
    assert figures["takeover_s"] <= figures["lease_duration_s"] + 3, figures
