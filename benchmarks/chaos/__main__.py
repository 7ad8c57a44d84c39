"""``make chaos``: every chaos scenario at full size, with more rounds than CI runs;
prints each scenario's figures and writes benchmarks/results/chaos.json, which the
chaos figures in docs/benchmarks.md are generated from (``python -m benchmarks.summary
--write``).

    python -m benchmarks.chaos [--models 200] [--namespaces 20] [--rounds 10]
                               [--only leader_pause leader_partition ...]

``--only`` runs the named scenarios and replaces just their figures in the results
file, which keeps the others (and the full run's duration).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from e2e.cluster import local

from benchmarks.chaos import fencing, scenarios
from benchmarks.chaos.rig import Rig, rig

RESULTS = Path(__file__).resolve().parent.parent / "results" / "chaos.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--namespaces", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10, help="kill -9 rounds (seeds)")
    parser.add_argument("--fight-seconds", type=float, default=60.0)
    parser.add_argument("--only", nargs="+", metavar="SCENARIO", help="run only these")
    args = parser.parse_args()
    size = scenarios.Size(args.models, args.namespaces)
    local.ensure_binaries()
    began = time.monotonic()
    results: dict[str, Any] = {}

    def run(the_rig: Rig) -> dict[str, Callable[[], dict[str, Any]]]:
        """Every scenario by name, in the order the full run takes them."""
        plan: dict[str, Callable[[], dict[str, Any]]] = {
            "leader_killed": lambda: scenarios.leader_killed(the_rig, size, seed=0),
        }
        for fault in fencing.FAULTS:
            plan[f"leader_{fault}"] = partial(fencing.fenced, the_rig, size, fault, seed=0)
        plan["operator_killed"] = lambda: scenarios.operator_killed(
            the_rig, size, rounds=args.rounds, seed=0
        )
        for component in ("kube-apiserver", "etcd"):
            plan[f"{component}_restarted"] = partial(
                scenarios.component_restarted, the_rig, size, component, seed=0
            )
        plan["field_fight"] = lambda: scenarios.field_fight(
            the_rig, size, seconds=args.fight_seconds, interval=6.0
        )
        plan["api_sheds_load"] = lambda: scenarios.api_sheds_load(the_rig, size, pressure_s=30.0)
        plan["namespace_deleted"] = lambda: scenarios.namespace_deleted(the_rig, size)
        plan["upgraded_in_place"] = lambda: scenarios.upgraded_in_place(the_rig, size)
        return plan

    with tempfile.TemporaryDirectory(prefix="shoal-chaos-") as tmp, rig(Path(tmp)) as the_rig:
        plan = run(the_rig)
        unknown = set(args.only or ()) - set(plan)
        if unknown:
            parser.error(f"no scenario {sorted(unknown)}; there are {sorted(plan)}")
        for name, scenario in plan.items():
            if args.only and name not in args.only:
                continue
            results[name] = scenario()
            print(name, json.dumps(results[name]), flush=True)
    report = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "models": size.models,
        "namespaces": size.namespaces,
        "minutes": round((time.monotonic() - began) / 60, 1),
        "scenarios": results,
    }
    if args.only:
        report = json.loads(RESULTS.read_text())
        report["scenarios"].update(results)
    RESULTS.write_text(json.dumps(report, indent=2) + "\n")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
