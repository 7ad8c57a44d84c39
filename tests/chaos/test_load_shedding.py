"""The API server sheds load (tiny in-flight limits, 429s) during a reconcile wave: the
operator's failed passes are retried with backoff and counted, nothing is lost, and it
converges once the pressure ends."""

from __future__ import annotations

from benchmarks.chaos.rig import Rig
from benchmarks.chaos.scenarios import api_sheds_load

from tests.chaos.conftest import CI_SIZE


def test_the_operator_backs_off_and_loses_nothing(chaos: Rig) -> None:
    figures = api_sheds_load(chaos, CI_SIZE, pressure_s=5)
    print(figures)
    assert figures["operator_retries"] > 0
