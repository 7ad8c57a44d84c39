"""``python -m tests.tiers [pytest args]``: every test tier, cheapest first, stopping at the
first tier that fails (``make test`` runs it after lint).

unit, then cluster, e2e and realnode on one local cluster (started here unless
$KUBECONFIG names one or it already runs, and stopped before chaos so its processes do
not share the cores with the chaos tier's own cluster), then chaos. realnode adds the
cluster's real node (real pods) only for its own tests. Each tier is its own pytest
session. Arguments are passed to each; arguments that name tests (paths, node ids) run
one plain pytest session over just those instead. The last line totals every tier.

The e2e tests that never touch the cluster (real Triton, HAProxy and Prometheus
processes of their own; pytest marks them by their fixtures, see ``on_cluster`` in
tests/conftest.py) run beside the cluster tier, in a session of their own whose output
is shown when it ends: the cluster tier spends most of its time waiting on the control
plane with the cores idle. The rest of e2e runs after the cluster tier, as before.
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
ON_CLUSTER_MARK = "on_cluster"  # tests/conftest.py sets it
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
            status = _tier(tier, args, tally)
            if status not in (0, NO_TESTS_COLLECTED):
                print(f"tier {tier} failed (pytest exit status {status}): later tiers not run")
                return status
        return 0
    finally:
        if started:
            local.down(cluster)


def _tier(tier: str, args: list[str], tally: Path) -> int:
    """Run ``tier``; the cluster tier with e2e's off-cluster tests beside it, and e2e
    with only the rest (unless the arguments select by marker themselves)."""
    split = not any(a.startswith("-m") for a in args)
    if tier == "cluster" and split:
        beside = [str(TESTS / "e2e"), "-m", f"not {ON_CLUSTER_MARK}", *args]
        with tempfile.TemporaryFile("w+") as output:
            print("\n=== tier: e2e, off the cluster (beside the cluster tier) ===", flush=True)
            env = dict(os.environ, SHOAL_TALLY=str(tally))
            e2e = subprocess.Popen(
                [sys.executable, "-m", "pytest", *beside],
                env=env,
                stdout=output,
                stderr=subprocess.STDOUT,
            )
            print(f"\n=== tier: {tier} ===", flush=True)
            status = _pytest([str(TESTS / tier), *args], tally)
            e2e_status = e2e.wait()
            output.seek(0)
            print("\n=== tier: e2e, off the cluster (its output) ===", flush=True)
            sys.stdout.write(output.read())
            sys.stdout.flush()
        if status in (0, NO_TESTS_COLLECTED) and e2e_status not in (0, NO_TESTS_COLLECTED):
            print("e2e's off-cluster tests failed")
            return e2e_status
        return status
    if tier == "e2e" and split:
        print(f"\n=== tier: {tier}, on the cluster ===", flush=True)
        return _pytest([str(TESTS / tier), "-m", ON_CLUSTER_MARK, *args], tally)
    print(f"\n=== tier: {tier} ===", flush=True)
    return _pytest([str(TESTS / tier), *args], tally)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
