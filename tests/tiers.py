"""``python -m tests.tiers [pytest args]``: every test tier, cheapest first, stopping at the
first tier that fails (``make test`` runs it after lint).

unit, then cluster, e2e and realnode on one local cluster (started here unless
$KUBECONFIG names one or it already runs, and stopped before chaos so its processes do
not share the cores with the chaos tier's own cluster), then chaos. realnode adds the
cluster's real node (real pods) only for its own tests. Each tier is its own pytest
session. Arguments are passed to each; arguments that name tests (paths, node ids) run
one plain pytest session over just those instead. The last line totals every tier.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from e2e.cluster import local

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "cluster", "e2e", "realnode", "chaos")
# The tiers that share the session's cluster.
ON_THE_CLUSTER = ("cluster", "e2e", "realnode")
NO_TESTS_COLLECTED = 5  # pytest's exit status when a selection leaves a tier empty


def _pytest(args: list[str], tally: Path) -> int:
    env = dict(os.environ, SHOAL_TALLY=str(tally))
    return subprocess.call([sys.executable, "-m", "pytest", *args], env=env)


def _totals(tally: Path) -> dict[str, int]:
    totals: dict[str, int] = {}
    if tally.exists():
        for line in tally.read_text().splitlines():
            for outcome, n in json.loads(line).items():
                totals[outcome] = totals.get(outcome, 0) + n
    return totals


def main(args: list[str]) -> int:
    with tempfile.TemporaryDirectory(prefix="shoal-tiers-") as tmp:
        tally = Path(tmp) / "tally.jsonl"
        if any(Path(a.split("::")[0]).exists() for a in args if not a.startswith("-")):
            status = _pytest(args, tally)
        else:
            status = _tiers(args, tally)
        totals = _totals(tally)
    failed = totals.get("failed", 0) + totals.get("error", 0)
    skipped = f", {totals['skipped']} skipped" if totals.get("skipped") else ""
    print(f"tiers: {totals.get('passed', 0)} passed, {failed} failed{skipped}", flush=True)
    return status


def _tiers(args: list[str], tally: Path) -> int:
    cluster = local.LocalCluster()
    explicit = os.environ.get("KUBECONFIG", "")
    ours = not explicit or Path(explicit).resolve() == cluster.kubeconfig.resolve()
    started = False
    try:
        for tier in TIERS:
            if tier in ON_THE_CLUSTER and ours and not started and not local.healthy(cluster):
                local.up(cluster)
                started = True
            if tier == "chaos" and started:
                local.down(cluster)
                started = False
            print(f"\n=== tier: {tier} ===", flush=True)
            status = _pytest([str(TESTS / tier), *args], tally)
            if status not in (0, NO_TESTS_COLLECTED):
                print(f"tier {tier} failed (pytest exit status {status}): later tiers not run")
                return status
        return 0
    finally:
        if started:
            local.down(cluster)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
