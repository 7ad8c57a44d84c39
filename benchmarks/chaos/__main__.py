"""``make chaos``: every chaos scenario at full size, with more rounds than CI runs;
prints each scenario's figures and writes benchmarks/results/chaos.json, which the
README's reliability section is generated from (``python -m benchmarks.summary
--write``).

    python -m benchmarks.chaos [--models 200] [--namespaces 20] [--rounds 10]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any

from e2e.cluster import local

from benchmarks.chaos import scenarios
from benchmarks.chaos.rig import rig

RESULTS = Path(__file__).resolve().parent.parent / "results" / "chaos.json"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--namespaces", type=int, default=20)
    parser.add_argument("--rounds", type=int, default=10, help="kill -9 rounds (seeds)")
    parser.add_argument("--fight-seconds", type=float, default=60.0)
    args = parser.parse_args()
    size = scenarios.Size(args.models, args.namespaces)
    local.ensure_binaries()
    began = time.monotonic()
    results: dict[str, Any] = {}

    def record(name: str, figures: dict[str, Any]) -> None:
        print(name, json.dumps(figures), flush=True)
        results[name] = figures

    with tempfile.TemporaryDirectory(prefix="shoal-chaos-") as tmp, rig(Path(tmp)) as the_rig:
        record("leader_killed", scenarios.leader_killed(the_rig, size, seed=0))
        record(
            "operator_killed",
            scenarios.operator_killed(the_rig, size, rounds=args.rounds, seed=0),
        )
        for component in ("kube-apiserver", "etcd"):
            record(
                f"{component}_restarted",
                scenarios.component_restarted(the_rig, size, component, seed=0),
            )
        record(
            "field_fight",
            scenarios.field_fight(the_rig, size, seconds=args.fight_seconds, interval=6.0),
        )
        record("api_sheds_load", scenarios.api_sheds_load(the_rig, size, pressure_s=30.0))
        record("namespace_deleted", scenarios.namespace_deleted(the_rig, size))
        record("upgraded_in_place", scenarios.upgraded_in_place(the_rig, size))
    RESULTS.write_text(
        json.dumps(
            {
                "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
                "models": size.models,
                "namespaces": size.namespaces,
                "minutes": round((time.monotonic() - began) / 60, 1),
                "scenarios": results,
            },
            indent=2,
        )
        + "\n"
    )
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
