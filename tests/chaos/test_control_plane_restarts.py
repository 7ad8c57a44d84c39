"""kube-apiserver and etcd killed (-9) in the middle of a reconcile wave and started
again: the operator reconnects on its own (same process), converges within 30 s of the
component being back, and its liveness probe fails while it cannot watch."""

from __future__ import annotations

import pytest
from benchmarks.chaos.rig import Rig
from benchmarks.chaos.scenarios import TAKEN_BACK_WITHIN_SECONDS, component_restarted

from tests.chaos.conftest import CI_SIZE


@pytest.mark.parametrize("component", ["kube-apiserver", "etcd"])
def test_the_operator_rides_out_a_restart_of(chaos: Rig, component: str) -> None:
    figures = component_restarted(chaos, CI_SIZE, component, seed=1)
    print(figures)
    assert figures["converged_after_back_s"] <= TAKEN_BACK_WITHIN_SECONDS
