"""``python -m tests.tiers [pytest args]``: every test tier, cheapest first, stopping at the
first tier that fails (``make test`` runs it after lint).

unit, then cluster, e2e and realnode on one local cluster (started here unless
$KUBECONFIG names one or it already runs), then chaos on a cluster of its own. realnode
adds the cluster's real node (real pods) only for its own tests. Each tier is its own
pytest session. Arguments are passed to each; arguments that name tests (paths, node ids) run
one plain pytest session over just those instead. The last line totals every tier.

The e2e tests that never touch the cluster (real Triton, HAProxy and Prometheus
processes of their own; pytest marks the others by their fixtures, see ``on_cluster``
in tests/conftest.py) run beside the cluster tier, and the chaos tier (on a cluster of
its own) beside the real-node tier, each in a session of its own whose output is shown
when it ends (BESIDE). The rest of e2e runs after the cluster tier. Arguments that
select by marker (``-m``) run every tier whole, one after another, as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from e2e.cluster import local

TESTS = Path(__file__).resolve().parent
TIERS = ("unit", "cluster", "e2e", "realnode", "chaos")
# The tiers that share the session's cluster.
ON_THE_CLUSTER = ("cluster", "e2e", "realnode")
ON_CLUSTER_MARK = "on_cluster"  # tests/conftest.py sets it
# What runs beside a tier, in a pytest session of its own, and with what selection. The
# cluster tier leaves the two cores about 75% idle (vmstat, over a run), waiting on the
# control plane; the chaos tier, on a cluster of its own, about 64%. What runs beside
# needs nothing the foreground tier sets up: e2e's off-cluster tests start processes of
# their own, and the chaos tier its own cluster. Measured: the real-node and chaos tiers
# together 438 s (two cores 36% idle) against 436 s and 430 s one after the other.
BESIDE: dict[str, tuple[str, list[str]]] = {
    "cluster": ("e2e", ["-m", f"not {ON_CLUSTER_MARK}"]),
    "realnode": ("chaos", []),
}
# What is left of a tier that ran beside another, run in its own turn (None: nothing).
REST: dict[str, list[str] | None] = {"e2e": ["-m", ON_CLUSTER_MARK], "chaos": None}
NO_TESTS_COLLECTED = 5  # pytest's exit status when a selection leaves a tier empty


def _session(args: list[str], tally: Path, **popen: Any) -> subprocess.Popen[bytes]:
    """A pytest session over ``args`` that adds its counts to ``tally``."""
    env = dict(os.environ, SHOAL_TALLY=str(tally))
    return subprocess.Popen([sys.executable, "-m", "pytest", *args], env=env, **popen)


def _pytest(args: list[str], tally: Path) -> int:
    """Run a session to its end (killed if this process is interrupted meanwhile)."""
    with _session(args, tally) as session:
        try:
            return session.wait()
        except BaseException:
            session.kill()
            raise


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
    # Arguments that select by marker themselves run every tier whole, one at a time.
    beside = {} if any(a.startswith("-m") for a in args) else BESIDE
    ran_beside = {other for other, _ in beside.values()}
    started = False
    try:
        for tier in TIERS:
            if tier in ran_beside and REST[tier] is None:
                continue
            if tier in ON_THE_CLUSTER and ours and not started and not local.healthy(cluster):
                local.up(cluster)
                started = True
            if tier == "chaos" and started:
                local.down(cluster)
                started = False
            if tier in beside:
                status = _with_beside(tier, *beside[tier], args, tally)
            else:
                selection = REST[tier] if tier in ran_beside else None
                status = _tier(tier, selection or [], args, tally)
            if status not in (0, NO_TESTS_COLLECTED):
                print(f"tier {tier} failed (pytest exit status {status}): later tiers not run")
                return status
        return 0
    finally:
        if started:
            local.down(cluster)


def _title(tier: str, selection: list[str]) -> str:
    return f"{tier}, {' '.join(selection)}" if selection else tier


def _tier(tier: str, selection: list[str], args: list[str], tally: Path) -> int:
    print(f"\n=== tier: {_title(tier, selection)} ===", flush=True)
    return _pytest([str(TESTS / tier), *selection, *args], tally)


def _with_beside(tier: str, other: str, selection: list[str], args: list[str], tally: Path) -> int:
    """``tier`` in the foreground and ``other`` (its ``selection``) beside it in a
    pytest session of its own, whose output is shown once both have ended."""
    title = _title(other, selection)
    with tempfile.TemporaryFile("w+") as output:
        print(f"\n=== tier: {title} (beside the {tier} tier) ===", flush=True)
        side = _session(
            [str(TESTS / other), *selection, *args],
            tally,
            stdout=output,
            stderr=subprocess.STDOUT,
        )
        status = _tier(tier, [], args, tally)
        side_status = side.wait()
        output.seek(0)
        print(f"\n=== tier: {title} (its output) ===", flush=True)
        sys.stdout.write(output.read())
        sys.stdout.flush()
    if status in (0, NO_TESTS_COLLECTED) and side_status not in (0, NO_TESTS_COLLECTED):
        print(f"tier {title} failed (pytest exit status {side_status})")
        return side_status
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
