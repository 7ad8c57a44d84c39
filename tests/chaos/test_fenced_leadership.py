"""A leader deposed while it could not see it (paused past its Lease, cut off from the
API server, its Lease handed to another by hand) writes nothing once the follower has
taken over, steps down, and the fleet converges exactly (benchmarks.chaos.fencing)."""

from __future__ import annotations

import pytest
from benchmarks.chaos.fencing import FAULTS, fenced
from benchmarks.chaos.rig import Rig

from tests.chaos.conftest import CI_SIZE


@pytest.mark.parametrize("fault", FAULTS)
def test_a_deposed_leader_never_writes_after_the_takeover(chaos: Rig, fault: str) -> None:
    figures = fenced(chaos, CI_SIZE, fault, seed=1)
    print(figures)
    assert figures["old_leader_writes_after_takeover"] == 0
    assert figures["noop_writes"] == 0
