"""Command line: ``python -m benchmarks.autoscaling [--quick]``.

Reads the batching benchmark's calibration and the trace, runs the oracle and every
scaler's knob search in worker processes, prints a table per workload and writes
benchmarks/results/autoscaling.json.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import sys
import time
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path
from typing import Any

from benchmarks.autoscaling import experiment as exp
from benchmarks.autoscaling.calibration import (
    BATCHING_RESULTS,
    CalibrationError,
    load_calibration,
)
from benchmarks.autoscaling.oracle import provision_plan
from benchmarks.autoscaling.report import WorkloadOutcome, outcome_json, table
from benchmarks.autoscaling.search import SearchResult
from benchmarks.autoscaling.signal import pending_curve
from benchmarks.autoscaling.simulate import RunResult
from benchmarks.autoscaling.workload import describe_rates

RESULTS = Path(__file__).resolve().parent.parent / "results" / "autoscaling.json"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.autoscaling", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="20-minute workloads, no P95 variant")
    parser.add_argument("--batching-results", type=Path, default=BATCHING_RESULTS)
    parser.add_argument("--cold-start", type=float, default=60.0, help="seconds to a Ready pod")
    parser.add_argument("--jitter", type=float, default=10.0, help="spread of amplified copies, s")
    parser.add_argument("--peak-replicas", type=int, default=12, help="sizes the amplification")
    parser.add_argument("--keda-cached-metrics", action="store_true", help="KEDA useCachedMetrics")
    parser.add_argument("--seed", type=int, default=exp.SEED, help="workload seed")
    parser.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--output", type=Path, default=RESULTS)
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    began = time.monotonic()
    try:
        calibration = load_calibration(args.batching_results)
    except CalibrationError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    settings = exp.Settings(
        quick=args.quick,
        cold_start_s=args.cold_start,
        pending_s=min(30.0, args.cold_start / 2),
        jitter_s=args.jitter,
        peak_replicas=args.peak_replicas,
        minutes=20 if args.quick else None,
        burst_minutes=20 if args.quick else 45,
        keda_cached_metrics=args.keda_cached_metrics,
        seed=args.seed,
    )
    experiment = exp.build(settings, calibration)
    exp.CURRENT["experiment"] = experiment
    kinds = exp.scaler_kinds(experiment)
    policy = experiment.policy
    print(
        f"calibration: {calibration.base_s * 1000:g} ms + {calibration.per_item_s * 1000:g} "
        f"ms/item ({calibration.source}); maxBatchSize {policy.max_batch_size}, "
        f"maxQueueDelay {policy.max_queue_delay}; cold start {settings.cold_start_s:g} s; "
        f"amplification k={experiment.amplification}, jitter {settings.jitter_s:g} s",
        flush=True,
    )
    for name, workload in experiment.workloads.items():
        print(f"  {name}: {describe_rates(workload)}", flush=True)
    signal = pending_curve(experiment.batcher)
    print("  one replica, Poisson load: Triton's pending count (one sample a second), P95:")
    for row in signal:
        print(
            f"    {100 * row['load']:3.0f}% of full-batch rate: pending {row['mean_pending']:5.1f}"
            f" (sd {row['sd_pending']:4.1f}), P95 {row['p95_ms']:5.0f} ms",
            flush=True,
        )

    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(max_workers=args.workers, mp_context=context) as pool:
        oracles = {name: pool.submit(exp.run_oracle, name) for name in experiment.workloads}
        needs: dict[str, list[int]] = {}
        oracle_runs: dict[str, RunResult] = {}
        initial: dict[str, int] = {}
        for name, future in oracles.items():
            needs[name], oracle_runs[name] = future.result()
            horizon = experiment.workloads[name].horizon_s
            plan = provision_plan(needs[name], settings.cold_start_s, horizon)
            initial[name] = plan[0]
            oracle = oracle_runs[name]
            print(
                f"  {name}: oracle {oracle.replica_seconds:.0f} replica-seconds, "
                f"{100 * oracle.attainment:.1f}% in SLO; every scaler starts with "
                f"{initial[name]} replicas",
                flush=True,
            )
        # Slowest searches first, so the two workers finish together.
        order = sorted(kinds, key=lambda k: (not kinds[k].track_p95, k))
        searches: dict[str, dict[str, Future[SearchResult]]] = {
            name: {} for name in experiment.workloads
        }
        for key in order:
            for name in experiment.workloads:
                searches[name][key] = pool.submit(exp.run_search, name, key, initial[name])
        done: dict[str, dict[str, SearchResult]] = {
            name: {key: searches[name][key].result() for key in kinds}
            for name in experiment.workloads
        }
        extra: dict[str, dict[str, RunResult]] = {name: {} for name in experiment.workloads}
        if not args.quick and not settings.keda_cached_metrics:
            # Sensitivity: KEDA's cached metrics (refreshed every pollingInterval).
            singles: dict[str, Future[RunResult]] = {}
            for name in experiment.workloads:
                keda = done[name]["keda"].best_effort()
                assert keda.knob is not None
                singles[name] = pool.submit(
                    exp.run_single, name, "keda", keda.knob, initial[name], True
                )
            for name, single in singles.items():
                extra[name]["KEDA, useCachedMetrics"] = single.result()

    outcomes = {
        name: WorkloadOutcome(
            workload=experiment.workloads[name],
            oracle_needs=needs[name],
            oracle=oracle_runs[name],
            searches={key: done[name][key] for key in kinds},
            kinds=kinds,
            extra=extra[name],
        )
        for name in experiment.workloads
    }
    elapsed = time.monotonic() - began
    print()
    for outcome in outcomes.values():
        print(table(outcome))
        print()
    document: dict[str, Any] = {
        "benchmark": "autoscaling replay (discrete-event simulation)",
        "command": "python -m benchmarks.autoscaling" + (" --quick" if args.quick else ""),
        "settings": exp.describe(experiment),
        "pending_count_vs_load": signal,
        "workloads": {name: outcome_json(o) for name, o in outcomes.items()},
        "elapsed_s": round(elapsed, 1),
        "workers": args.workers,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(document, indent=2) + "\n")
    try:
        shown = args.output.resolve().relative_to(Path.cwd())
    except ValueError:
        shown = args.output
    print(f"wrote {shown} in {elapsed:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
