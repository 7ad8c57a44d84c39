"""The pool gateway on the real engine: its nine behaviours, measured side by side.

Every figure comes from real processes on this machine: haproxy 2.6 (Debian's) rendered
and reloaded by Shoal's own code, tritonserver serving the linear-cost Python model, and
tokens shaped like Kubernetes service-account tokens (e2e/gateway.py). Each behaviour is
one function of e2e/gateway_scenarios.py, the same the e2e tests run briefly; here they
run longer, and where a behaviour needs a control it is measured in the same run:

1. overhead: throughput at a P95 target and median latency, straight to Triton and
   through the gateway, level by level in alternating halves; again for a model of
   four instances, each replica holding the requests the operator renders for it;
2. fairness: tenant A floods at 5x its rate while B sends at its rate, against B alone;
3. priority: two lanes at 2x a route's capacity, against the top lane alone, and the
   same load without lanes (the control);
4. ejection: one of three replicas frozen (SIGSTOP) under load, then thawed;
5. runaway: a model that hangs, beside one that does not;
6. limits changed (new configurations, reloaded) under load;
7. identity: bad tokens, another tenant's model, another tenant's limit;
8. scaling: servers added and removed (reloaded) under load;
9. overflow: a saturated model's throughput at a P95 target with an overflow replica
   in another pool, against the same route without one;
and two gateway replicas, peered, enforcing one tenant's rate and concurrency together,
with the replication delay.

    python -m benchmarks.gateway [--quick]

Writes benchmarks/results/gateway.json; ``python -m benchmarks.summary --write`` puts
the figures in docs/benchmarks.md and docs/gateway.md.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e.gateway import HAPROXY

from e2e import gateway_scenarios as scenarios

RESULTS = Path(__file__).resolve().parent / "results"


def _haproxy_version() -> str:
    out = subprocess.run([HAPROXY, "-v"], capture_output=True, text=True, check=False)
    return out.stdout.splitlines()[0] if out.stdout else "unknown"


def targets(r: dict[str, Any]) -> list[dict[str, Any]]:
    """Every target, the figure measured for it, and whether it was met."""
    o, oi, f, p = r["overhead"], r["overhead_instances"], r["fairness"], r["priority"]
    e, w, lc = r["ejection"], r["runaway"], r["limits_change"]
    i, s, rep = r["identity"], r["scaling"], r["replicas"]
    spill = r["overflow"]
    spill_best = spill["throughput_at_target"]

    def row(name: str, measured: str, target: str, met: bool) -> dict[str, Any]:
        return {"behaviour": name, "measured": measured, "target": target, "met": met}

    allowed = rep["allowed_rps"]
    return [
        row(
            "overhead: throughput at P95 target",
            f"{o['throughput_ratio']:.2f}x direct "
            f"({o['throughput_at_target']['gateway']:.0f} vs "
            f"{o['throughput_at_target']['direct']:.0f} req/s)",
            ">= 0.95x",
            o["throughput_ratio"] >= 0.95,
        ),
        row(
            "overhead, 4 instances: throughput at P95 target",
            f"{oi['throughput_ratio']:.2f}x direct "
            f"({oi['throughput_at_target']['gateway']:.0f} vs "
            f"{oi['throughput_at_target']['direct']:.0f} req/s)",
            ">= 0.95x",
            oi["throughput_ratio"] >= 0.95,
        ),
        row(
            "overhead: added median latency",
            f"{o['added_median_ms']:.2f} ms",
            "<= 1 ms",
            o["added_median_ms"] <= 1.0,
        ),
        row(
            "fairness: B's P95 with A flooding",
            f"{f['b_gateway_p95_ratio']:.2f}x alone at the gateway "
            f"({f['b_p95_ratio']:.2f}x at B's clients), {f['b_errors']} errors",
            "<= 1.1x, 0 errors",
            f["b_gateway_p95_ratio"] <= 1.1 and f["b_errors"] == 0,
        ),
        row(
            "fairness: A held to its rate",
            f"{f['a_admitted_vs_limit']:.3f}x its limit, {f['a_429']} x 429",
            "1 +- 0.05, 429 for the rest",
            abs(f["a_admitted_vs_limit"] - 1) <= 0.05 and f["a_other"] == 0,
        ),
        row(
            "priority: top lane P95 at 2x overload",
            f"{p['high_gateway_p95_ratio']:.2f}x unloaded "
            f"({p['high_p95_ratio']:.2f}x at its clients; without lanes "
            f"{r['priority_without_lanes']['high_gateway_p95_ratio']:.2f}x)",
            "<= 1.5x",
            p["high_gateway_p95_ratio"] <= 1.5,
        ),
        row(
            "priority: low lane shed",
            f"{p['low_shed']} x 503 in {p['low_shed_gateway_p95_ms']:.0f} ms at P95 "
            f"(clients {p['low_shed_p50_ms']:.1f} ms median), "
            f"{p['low_timeouts_or_errors']} timeouts",
            "503 in <= 5 ms, no timeouts",
            p["low_shed_gateway_p95_ms"] <= 5 and p["low_timeouts_or_errors"] == 0,
        ),
        row(
            "ejection: frozen replica out / back",
            f"out in {e['out_after_s']:.1f} s, back in {e['back_after_s']:.1f} s, "
            f"{e['failed']} of {e['requests']} failed ({100 * e['failed_fraction']:.2f}%)",
            "<= 5 s, <= 10 s, <= 0.5%",
            e["out_after_s"] <= 5 and e["back_after_s"] <= 10 and e["failed_fraction"] <= 0.005,
        ),
        row(
            "runaway: hung model",
            f"504 at {min(w['hung_latency_ms']):.0f}-{max(w['hung_latency_ms']):.0f} ms "
            f"(timeout {w['timeout_ms']} ms), others "
            f"{w['others_during']['statuses'].get('200', 0)}/"
            f"{w['others_during']['requests']} OK",
            "504 at timeout +-10%, others unaffected",
            w["worst_deviation"] <= 0.1
            and w["others_during"]["statuses"] == {"200": w["others_during"]["requests"]},
        ),
        row(
            "limits changed under load",
            f"{lc['a_failed']} failed of {lc['a_requests']}, "
            f"{len(lc['reloads'])} reloads, counts kept: "
            f"{all(x['tables_handed_over'] for x in lc['reloads'])}",
            "0 failed of >= 10,000",
            lc["a_failed"] == 0 and lc["a_requests"] >= 10_000,
        ),
        row(
            "identity",
            f"{i['bad_tokens_refused_401']}/{i['bad_tokens_total']} bad tokens 401; another "
            f"tenant's model {i['b_to_a_model']}; B's limit intact: {i['b_limit_intact']}",
            "all 401; 404; intact",
            i["bad_tokens_refused_401"] == i["bad_tokens_total"]
            and i["b_to_a_model"] == 404
            and i["b_limit_intact"],
        ),
        row(
            "scaling under load",
            f"{s['failed']} failed of {s['requests']}, {len(s['steps'])} changes",
            "0 failed",
            s["failed"] == 0,
        ),
        row(
            "overflow: throughput at P95 target",
            f"{spill['throughput_ratio']:.2f}x without ({spill_best['with']:.0f} vs "
            f"{spill_best['without']:.0f} req/s), {spill['with_overflow_share']:.0%} sent "
            f"to the overflow replica, errors {spill['errors']['with']} and "
            f"{spill['errors']['without']}",
            ">= 1.8x, 0 errors",
            spill["throughput_ratio"] >= 1.8 and not any(spill["errors"].values()),
        ),
        row(
            "two replicas: one rate limit",
            f"{rep['admitted_rps_total']:.1f} req/s together "
            f"({rep['admitted_rps_per_replica'][0]:.1f} + "
            f"{rep['admitted_rps_per_replica'][1]:.1f}) for {allowed:g} allowed",
            "+-10%",
            abs(rep["admitted_rps_total"] / allowed - 1) <= 0.1,
        ),
        row(
            "two replicas: one concurrency cap",
            f"peak {rep['peak_in_flight_both_replicas']} in flight for a cap of "
            f"{rep['concurrency_cap']}; replication delay "
            f"{rep['replication_delay_ms']['p50']:.1f} ms median, "
            f"{rep['replication_delay_ms']['max']:.1f} ms max",
            "<= cap",
            rep["peak_in_flight_both_replicas"] <= rep["concurrency_cap"],
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="the tests' durations")
    parser.add_argument(
        "--only",
        default="",
        help="comma-separated behaviours to measure again, kept with the others' "
        "figures from the results file",
    )
    args = parser.parse_args()
    quick = args.quick
    runs: dict[str, Callable[[Path], dict[str, Any]]] = {
        "overhead": lambda w: scenarios.overhead(
            w,
            levels=(8, 16, 24) if quick else (1, 4, 8, 16, 24, 32),
            seconds=6.0 if quick else 8.0,
            latency_requests=150 if quick else 500,
        ),
        "overhead_instances": lambda w: scenarios.overhead(
            w,
            model=scenarios.INSTANCES_MODEL,
            levels=(8, 16, 24, 32) if quick else (4, 8, 16, 24, 32, 40),
            seconds=6.0 if quick else 8.0,
            p95_target_ms=250.0,
            latency_requests=40 if quick else 60,
        ),
        "fairness": lambda w: scenarios.fairness(
            w, rounds=1 if quick else 3, alone_seconds=5.0 if quick else 6.0, seconds=10.0
        ),
        "priority": lambda w: scenarios.priority(
            w, seconds=7.0 if quick else 10.0, rounds=1 if quick else 2
        ),
        "priority_without_lanes": lambda w: scenarios.priority(
            w, seconds=7.0 if quick else 10.0, rounds=1, lanes=False
        ),
        "ejection": lambda w: scenarios.ejection(w, stopped_s=7.0 if quick else 10.0),
        "runaway": lambda w: scenarios.runaway(w, hung_requests=4 if quick else 8),
        "limits_change": lambda w: scenarios.limits_change(w, requests=10_000 if quick else 30_000),
        "identity": scenarios.identity,
        "scaling": lambda w: scenarios.scaling(w, hold_s=3.0 if quick else 6.0),
        "replicas": lambda w: scenarios.replicas(
            w, seconds=10.0 if quick else 20.0, delay_samples=20 if quick else 100
        ),
        "overflow": lambda w: scenarios.overflow(
            w,
            levels=(8, 16, 24, 32, 40) if quick else (8, 16, 24, 32, 40, 48),
            seconds=2.0 if quick else 4.0,
        ),
    }
    only = [name for name in args.only.split(",") if name]
    unknown = set(only) - set(runs)
    if unknown:
        parser.error(f"unknown behaviours {sorted(unknown)}; known: {sorted(runs)}")
    results: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "haproxy": _haproxy_version(),
        },
        "quick": quick,
    }
    if only:
        results = {**json.loads((RESULTS / "gateway.json").read_text()), **results}
        results["measured_again"] = sorted({*results.get("measured_again", []), *only})
        runs = {name: run for name, run in runs.items() if name in only}
    for name, run in runs.items():
        started = time.monotonic()
        with tempfile.TemporaryDirectory() as work:
            results[name] = run(Path(work))
        results[name]["took_s"] = round(time.monotonic() - started, 1)
        print(f"{name}: done in {results[name]['took_s']} s", flush=True)
    results["targets"] = targets(results)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "gateway.json").write_text(json.dumps(results, indent=2) + "\n")
    for t in results["targets"]:
        verdict = "met" if t["met"] else "MISSED"
        print(f"{t['behaviour']:40s} {t['measured']}  (target {t['target']}: {verdict})")


if __name__ == "__main__":
    main()
