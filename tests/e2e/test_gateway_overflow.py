"""Overflow replicas on the real engine: a model whose only replica is saturated sends
what finds no free slot on it to an overflow replica in an idle pool, and only that;
the same route without one never does (e2e/gateway_scenarios.py, ``overflow``).

The throughput it gains at the P95 target (target 1.8x, 2x at best) is a figure of
``python -m benchmarks.gateway``, not a pass/fail here: on two shared cores one short
run cannot tell a regression from a neighbour. Two levels suffice for the behaviour:
one within the replica's maxconn (16), one twice over it."""

from __future__ import annotations

import json
from pathlib import Path

from e2e import gateway_scenarios as scenarios


def test_only_what_finds_no_free_slot_spills_to_the_overflow_replica(tmp_path: Path) -> None:
    figures = scenarios.overflow(tmp_path, levels=(8, 32), seconds=2.0)
    print(json.dumps(figures, indent=1))
    assert figures["errors"] == {"without": 0, "with": 0}
    # Only the route with overflow replicas has an overflow backend, and only its
    # requests reached the overflow replica.
    assert not figures["without_has_overflow_backend"]
    assert figures["overflow_replica_requests"]["without"] == 0
    # While the clients fit in the replica's maxconn, nothing spills; above it, some
    # does.
    maxconn = figures["server_maxconn"]
    with_ladder = figures["ladders"]["with"]
    fitting = [p for p in with_ladder if p["concurrency"] <= maxconn]
    above = [p for p in with_ladder if p["concurrency"] > maxconn]
    assert fitting
    assert above
    assert [p["overflow_share"] for p in fitting] == [0.0] * len(fitting)
    assert all(p["overflow_share"] > 0 for p in above), above
    # HAProxy and the overflow replica's own statistics agree on what spilled.
    served = figures["with_backend_requests"]["overflow"]
    assert served > 0
    assert served == figures["overflow_replica_requests"]["with"]
