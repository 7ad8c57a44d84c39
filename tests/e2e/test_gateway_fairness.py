"""Per-tenant rate limits at the edge, on the real engine: a flooding tenant is held to
its rate and gets 429 for the rest; another tenant at its own rate is never refused.

How much the flood moves the other tenant's latency (its P95 against its P95 alone) is
a figure of ``python -m benchmarks.gateway`` (target <= 1.1x), not a pass/fail here:
on two shared cores one short run cannot tell a regression from a neighbour."""

from __future__ import annotations

import json
from pathlib import Path

from e2e import gateway_scenarios as scenarios


def test_a_flood_is_held_to_its_rate_and_does_not_touch_another_tenant(
    tmp_path: Path,
) -> None:
    # B sends at three quarters of its rate: a tenant inside its limit. At exactly its
    # rate, a client that the flood's threads stall on two shared cores catches up in a
    # burst and may meet its own limit (2 of 286 refused by B's own gate in one CI run);
    # that case is the benchmark's, which runs B at its full rate.
    f = scenarios.fairness(tmp_path, rounds=1, alone_seconds=5.0, seconds=9.0, b_share=0.75)
    print(json.dumps(f, indent=1))
    # B, inside its rate while A floods: every request served. (Its phase alone is
    # kept: without it B's first flooded seconds drew 26-40 x 429 in two runs.)
    assert f["b_errors"] == 0
    assert f["b_with_flood"]["requests"] > 0
    # A: held to its limit (unlimited, it would be served at 5x), 429 (with
    # Retry-After) for everything else. How close to 1x is the benchmark's figure.
    assert 0.9 <= f["a_admitted_vs_limit"] <= 1.1
    assert f["a_other"] == 0
    assert f["a_429"] > 0
    # The rejections are counted per tenant where the exporter shows them.
    assert f["exporter_denied"] == {"team-a": float(f["a_429"]), "team-b": 0.0}
