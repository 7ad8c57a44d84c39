"""The results: a table per workload on stdout, everything in a JSON document.

Replica-seconds are compared at equal SLO attainment: each scaler at its cheapest
setting that keeps the goal share of windows in SLO. A scaler that cannot reach the
goal at any setting tried is reported at its best attainment, and is not counted as
"the best baseline".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.autoscaling.experiment import (
    GOAL,
    PREDICTIVE,
    PREDICTIVE_SHORT_COOL_DOWN,
    ScalerKind,
)
from benchmarks.autoscaling.search import SearchResult
from benchmarks.autoscaling.simulate import RunResult
from benchmarks.autoscaling.workload import Workload, describe_rates

# The targets for Shoal at equal attainment.
TARGET_VS_ORACLE = 1.15
TARGET_VS_BEST_BASELINE = 0.75
# Targets for the predictive rows, at the default quantile, per workload: (vs oracle,
# vs the best baseline); None where the workload sets none.
PREDICTIVE_TARGETS: dict[str, tuple[float | None, float]] = {
    "azure-conv": (1.15, 0.85),
    "synthetic-bursts": (None, 0.8),
}


@dataclass(frozen=True)
class WorkloadOutcome:
    workload: Workload
    oracle_needs: list[int]
    oracle: RunResult
    searches: dict[str, SearchResult]
    kinds: dict[str, ScalerKind]
    extra: dict[str, RunResult]


def _ratio(a: float, b: float) -> float:
    return round(a / b, 3) if b else float("inf")


def comparison(outcome: WorkloadOutcome) -> dict[str, Any]:
    """Shoal's replica-seconds against the oracle and the best baseline, and the targets."""
    oracle_rs = outcome.oracle.replica_seconds
    baselines = {
        key: s.chosen
        for key, s in outcome.searches.items()
        if outcome.kinds[key].is_baseline and s.chosen is not None
    }
    best_key = min(baselines, key=lambda k: baselines[k].replica_seconds) if baselines else None
    out: dict[str, Any] = {
        "oracle_replica_seconds": round(oracle_rs),
        "best_baseline": best_key,
        "best_baseline_replica_seconds": round(baselines[best_key].replica_seconds)
        if best_key
        else None,
    }
    for key in ("shoal", "shoal-p95"):
        search = outcome.searches.get(key)
        if search is None:
            continue
        run = search.best_effort()
        vs_oracle = _ratio(run.replica_seconds, oracle_rs)
        vs_best = (
            _ratio(run.replica_seconds, baselines[best_key].replica_seconds) if best_key else None
        )
        out[key] = {
            "at_goal": search.reached,
            "knob": run.knob,
            "attainment_pct": round(100 * run.attainment, 2),
            "replica_seconds": round(run.replica_seconds),
            "vs_oracle": vs_oracle,
            "vs_best_baseline": vs_best,
            "target_vs_oracle_met": search.reached and vs_oracle <= TARGET_VS_ORACLE,
            "target_vs_best_baseline_met": bool(
                search.reached and vs_best is not None and vs_best <= TARGET_VS_BEST_BASELINE
            ),
        }
    for key in (PREDICTIVE, PREDICTIVE_SHORT_COOL_DOWN):
        search = outcome.searches.get(key)
        if search is None or search.default is None:
            continue
        run = search.default
        reached = run.attainment >= GOAL
        vs_oracle = _ratio(run.replica_seconds, oracle_rs)
        vs_best = (
            _ratio(run.replica_seconds, baselines[best_key].replica_seconds) if best_key else None
        )
        oracle_target, best_target = PREDICTIVE_TARGETS.get(outcome.workload.name, (None, 0.8))
        out[key] = {
            "setting": "default" if key == PREDICTIVE else "default quantile",
            "at_goal": reached,
            "knob": run.knob,
            "attainment_pct": round(100 * run.attainment, 2),
            "replica_seconds": round(run.replica_seconds),
            "vs_oracle": vs_oracle,
            "vs_best_baseline": vs_best,
            "target_vs_oracle": oracle_target,
            "target_vs_best_baseline": best_target,
            "target_vs_oracle_met": None
            if oracle_target is None
            else reached and vs_oracle <= oracle_target,
            "target_vs_best_baseline_met": bool(
                reached and vs_best is not None and vs_best <= best_target
            ),
        }
    return out


def _run_json(run: RunResult, oracle_rs: float, per_window: bool) -> dict[str, Any]:
    out = run.summary()
    out["vs_oracle"] = _ratio(run.replica_seconds, oracle_rs)
    if per_window:
        out["window_p95_ms"] = [round(p * 1000, 1) for p in run.score.p95_s]
    return out


def outcome_json(outcome: WorkloadOutcome) -> dict[str, Any]:
    oracle_rs = outcome.oracle.replica_seconds
    scalers: dict[str, Any] = {}
    for key, search in outcome.searches.items():
        kind = outcome.kinds[key]
        best = search.best_effort()
        scalers[key] = {
            "label": kind.label,
            "knob": kind.knob.name,
            "hpa_spec_at_cheapest": kind.spec(best.knob) if best.knob is not None else None,
            "reached_goal": search.reached,
            "cheapest_at_goal": _run_json(best, oracle_rs, True),
            "default": _run_json(search.default, oracle_rs, False) if search.default else None,
            "evaluated": [
                _run_json(r, oracle_rs, False) for _, r in sorted(search.evaluated.items())
            ],
        }
    return {
        "workload": {**outcome.workload.description, **describe_rates(outcome.workload)},
        "oracle": {
            **_run_json(outcome.oracle, oracle_rs, True),
            "replicas_per_window": outcome.oracle_needs,
        },
        "scalers": scalers,
        "extra": {k: _run_json(r, oracle_rs, False) for k, r in outcome.extra.items()},
        "comparison": comparison(outcome),
    }


def _fmt_knob(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value:g}"


def _row(label: str, setting: str, role: str, run: RunResult, oracle_rs: float) -> str:
    return (
        f"{label:36s} {setting:17s} {role:16s} {run.replica_seconds:8.0f} "
        f"{run.replica_seconds / oracle_rs:6.2f}x {100 * run.attainment:6.1f}% "
        f"{run.score.violation_minutes:5d} {run.reversals:5d} {run.peak_replicas:5d}"
    )


def table(outcome: WorkloadOutcome) -> str:
    w = outcome.workload
    rates = describe_rates(w)
    oracle_rs = outcome.oracle.replica_seconds
    lines = [
        f"{w.name}: {w.windows} one-minute windows, {rates['requests']:,} requests, "
        f"mean {rates['mean_rate_per_s']:.0f} req/s, "
        f"busiest minute {rates['peak_minute_rate_per_s']:.0f} req/s",
        f"{'scaler':36s} {'setting':17s} {'':16s} {'repl-s':>8s} {'oracle':>7s} "
        f"{'in SLO':>7s} {'viol':>5s} {'rev':>5s} {'peak':>5s}",
        _row("oracle (clairvoyant)", "per-minute plan", "", outcome.oracle, oracle_rs),
    ]
    for key, search in outcome.searches.items():
        kind = outcome.kinds[key]
        best = search.best_effort()
        role = "cheapest >=99%" if search.reached else "best; goal unmet"
        setting = f"{kind.knob.label}={_fmt_knob(best.knob)}"
        lines.append(_row(kind.label, setting, role, best, oracle_rs))
        if search.default is not None and search.default is not best:
            setting = f"{kind.knob.label}={_fmt_knob(search.default.knob)}"
            lines.append(_row("", setting, "default", search.default, oracle_rs))
    for name, run in outcome.extra.items():
        lines.append(_row(name, f"{_fmt_knob(run.knob)}", "same setting", run, oracle_rs))
    cmp = comparison(outcome)
    if cmp.get("best_baseline"):
        lines.append(
            f"best baseline at goal: {outcome.kinds[cmp['best_baseline']].label} "
            f"({cmp['best_baseline_replica_seconds']} replica-seconds)"
        )
    for key in ("shoal", "shoal-p95"):
        if key in cmp:
            c = cmp[key]
            at = "at goal" if c["at_goal"] else f"goal NOT reached ({c['attainment_pct']}%)"
            oracle_ok = "met" if c["target_vs_oracle_met"] else "missed"
            best_ok = "met" if c["target_vs_best_baseline_met"] else "missed"
            lines.append(
                f"{outcome.kinds[key].label}: {at}; {c['vs_oracle']}x oracle "
                f"(target <= {TARGET_VS_ORACLE}: {oracle_ok}), "
                f"{c['vs_best_baseline']}x best baseline "
                f"(target <= {TARGET_VS_BEST_BASELINE}: {best_ok})"
            )
    for key in (PREDICTIVE, PREDICTIVE_SHORT_COOL_DOWN):
        if key not in cmp:
            continue
        c = cmp[key]
        at = "at goal" if c["at_goal"] else f"goal NOT reached ({c['attainment_pct']}%)"
        parts = [f"{outcome.kinds[key].label}, {c['setting']}: {at}; {c['vs_oracle']}x oracle"]
        if c["target_vs_oracle"] is not None:
            ok = "met" if c["target_vs_oracle_met"] else "missed"
            parts[0] += f" (target <= {c['target_vs_oracle']}: {ok})"
        ok = "met" if c["target_vs_best_baseline_met"] else "missed"
        parts.append(
            f"{c['vs_best_baseline']}x best baseline "
            f"(target <= {c['target_vs_best_baseline']}: {ok})"
        )
        lines.append(", ".join(parts))
    lines.append(f"(goal: {100 * GOAL:g}% of windows with P95 <= target; repl-s: pod-seconds)")
    return "\n".join(lines)
