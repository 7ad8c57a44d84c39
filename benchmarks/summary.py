"""The measured figures the docs quote, generated from benchmarks/results/*.json.

docs/benchmarks.md quotes them between markers such as ``<!-- bench:begin -->`` and
``<!-- bench:end -->`` (docs/gateway.md the gateway's); ``python -m benchmarks.summary
--write`` refreshes every block after ``make bench``, ``make chaos`` or ``make
elastic-figures``, and a unit test fails when a block and the results files disagree, so
no figure in the docs is typed by hand.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from benchmarks.autoscaling.experiment import PREDICTIVE, PREDICTIVE_SHORT_COOL_DOWN
from benchmarks.ramp import ramp_lines
from shoal.api.inferencemodel import Scaling
from shoal.render.autoscaler import PREDICTIVE_COOL_DOWN

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
BENCHMARKS_DOC = ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
# docs/gateway.md quotes the gateway's figures the same way.
GATEWAY_DOC = ROOT / "docs" / "gateway.md"
GATEWAY_BEGIN, GATEWAY_END = "<!-- gateway:begin -->", "<!-- gateway:end -->"
# docs/benchmarks.md quotes the chaos suite's figures (``make chaos``).
RELIABILITY_BEGIN, RELIABILITY_END = "<!-- reliability:begin -->", "<!-- reliability:end -->"
# docs/benchmarks.md quotes the elastic-capacity tests' figures on real Kueue
# (``make elastic-figures``).
ELASTIC_BEGIN, ELASTIC_END = "<!-- elastic:begin -->", "<!-- elastic:end -->"
# A capacity window's quota change within one pass: the operator wakes a second after
# the boundary, and a pass takes a few more (the window test's own bound).
WINDOW_PASS_SECONDS = 10.0
# How the docs name the replay's two predictive rows ({q}: the error quantile).
PREDICTIVE_ROWS = {
    PREDICTIVE: "at its default setting (`predictive: {{enabled: true}}`: error quantile "
    "{q:g} and the model's default cool-down, "
    f"{Scaling().scale_down.stabilization_window}; not tuned per trace)",
    PREDICTIVE_SHORT_COOL_DOWN: "at the default quantile ({q:g}) with "
    f"`scaleDown.stabilizationWindow: {PREDICTIVE_COOL_DOWN}`, the pairing "
    "docs/autoscaling.md recommends (not a default)",
}


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((RESULTS / name).read_text())
    return data


def _verdict(met: bool) -> str:
    return "met" if met else "**missed**"


def batching(data: dict[str, Any]) -> list[str]:
    base = data["results"][0]["throughput_at_target"] or 1.0
    best = next(r for r in data["sweep"] if r["name"] == data["sweep_best"])
    fit = data["latency_curve"]["fit"]
    confirm = data["confirmation"]
    policy = data["default_policy"]
    lines = [
        f"**Batching on the real Triton server** (`python -m benchmarks.batching`): a "
        f"Python-backend model costing {fit['base_ms']:.1f} ms + {fit['per_item_ms']:.2f} "
        f"ms per item as measured; throughput at P95 ≤ {data['p95_target_ms']:g} ms, "
        f"closed-loop clients at {data['concurrency_levels'][0]} to "
        f"{data['concurrency_levels'][-1]} concurrent.",
        "",
        "| config | req/s at target | P95 there (ms) | vs no batching |",
        "|---|---|---|---|",
    ]
    for r in [*data["results"], best]:
        lines.append(
            f"| {r['name']} | {r['throughput_at_target']:.0f} | {r['p95_at_best_ms']} | "
            f"{r['throughput_at_target'] / base:.2f}x |"
        )
    ratio = confirm["default_vs_sweep_best"]
    default_ratio = data["results"][1]["throughput_at_target"] / base
    lines += [
        "",
        f"Default BatchPolicy (maxBatchSize {policy['maxBatchSize']}, "
        f"{policy['maxQueueDelay']}): {default_ratio:.1f}x no batching (target 3x: "
        f"{_verdict(default_ratio >= 3)}); {ratio:.2f} of the sweep's best when both are "
        f"measured again side by side, {confirm['rounds']} rounds "
        f"({confirm['default_throughput']:.0f} vs {confirm['sweep_best_throughput']:.0f} "
        f"req/s; target 0.95: {_verdict(ratio >= 0.95)}).",
    ]
    return lines


def control_plane(data: dict[str, Any]) -> list[str]:
    lines = [
        f"**Control plane** (`python -m benchmarks.control_plane`): N InferenceModels over "
        f"{data['namespaces']} namespaces and {data['pools']} pools on a fresh local cluster "
        "each, the operator as its ServiceAccount; writes counted by the API server's audit "
        "log; the plain client applies the same rendered objects with no operator.",
        "",
        "| models | applied (s) | Ready (s) | plain client Ready (s) | writes/model | "
        "operator writes/s | ConfigMap creates/s (fraction) | plain-client applies/s "
        "(fraction) | writes in no-op resync | peak RSS (MB) |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in data["results"]:
        lines.append(
            f"| {r['models']} | {r['applied_s']} | {r['ready_s']} | "
            f"{r['plain_client_ready_s']} | {r['writes_per_model']} | "
            f"{r['write_rate_per_s']} | {r['ceiling_writes_per_s']:.0f} "
            f"({r['fraction_of_ceiling']}) | {r['plain_client_applies_per_s']:.0f} "
            f"({r['fraction_of_plain_client_rate']}) | {r['noop_writes']} "
            f"({r['noop_reconciles']} passes) | {r['peak_rss_mb']:.0f} |"
        )
    top = max(data["results"], key=lambda r: r["models"])
    lines += [
        "",
        f"At {top['models']} models: Ready in {top['ready_s']} s (target 60 s: "
        f"{_verdict(top['ready_s'] <= 60)}; the plain client needs {top['plain_client_ready_s']}"
        f" s on the same machine), {top['fraction_of_ceiling']} of the ConfigMap-create "
        f"ceiling (target 0.5: {_verdict(top['fraction_of_ceiling'] >= 0.5)}) and "
        f"{top['fraction_of_plain_client_rate']} of the rate a plain client sustains for the "
        f"same server-side applies, {top['noop_writes']} writes "
        f"in a no-op resync (target 0: {_verdict(top['noop_writes'] == 0)}), peak "
        f"{top['peak_rss_mb']:.0f} MB (target 150: {_verdict(top['peak_rss_mb'] < 150)}).",
    ]
    ratios = [r["ready_s"] / r["plain_client_ready_s"] for r in data["results"]]
    lines.append(
        "Ready against the plain client, side by side in one run: "
        + " / ".join(f"{x:.2f}x" for x in ratios)
        + f" at {' / '.join(str(r['models']) for r in data['results'])} models (target "
        f"1.15x at every size: {_verdict(max(ratios) <= 1.15)})."
    )
    lines.append(_cpu_until_ready(data["results"]))
    return lines


def _cpu_until_ready(results: list[dict[str, Any]]) -> str:
    """Where the time goes: both runs are bound by the machine's CPU."""
    parts = []
    for r in results:
        ours, plain = r["cpu_seconds_until_ready"], r["plain_client_cpu_seconds_until_ready"]
        parts.append(
            f"{r['models']} models: {sum(ours.values()):.0f} against "
            f"{sum(plain.values()):.0f} (the operator process {ours['shoal-operator']:.0f}; "
            f"kube-apiserver {ours['kube-apiserver']:.0f} against "
            f"{plain['kube-apiserver']:.0f})"
        )
    cores = results[0]["cores"]
    return (
        f"CPU seconds used until Ready by the operator's run and by the plain client's, "
        f"every process on the same {cores} cores: " + "; ".join(parts) + "."
    )


def autoscaling(data: dict[str, Any]) -> list[str]:
    lines = [
        "**Autoscaling replay** (`python -m benchmarks.autoscaling`): each scaler at its "
        "cheapest setting keeping ≥ 99% of 1-minute windows under the P95 target; "
        "replica-seconds as a ratio to the clairvoyant oracle. Trace: Azure LLM inference "
        "2023 (conversation), Microsoft Azure, CC BY 4.0; Patel et al., Splitwise, ISCA 2024.",
        "",
        "| scaler | Azure trace: setting | vs oracle | Shoal ÷ it | bursts: setting | "
        "vs oracle | Shoal ÷ it |",
        "|---|---|---|---|---|---|---|",
    ]
    workloads = data["workloads"]
    names = list(next(iter(workloads.values()))["scalers"])
    for key in names:
        row = [next(iter(workloads.values()))["scalers"][key]["label"]]
        for workload in workloads.values():
            scaler = workload["scalers"][key]
            shoal = workload["scalers"]["shoal"]["cheapest_at_goal"]
            best = scaler["cheapest_at_goal"] if scaler["reached_goal"] else None
            if best is None:
                row += ["none reaches 99%", "-", "-"]
                continue
            row += [
                f"{best['knob']:g}",
                f"{best['vs_oracle']:.2f}x",
                f"{shoal['replica_seconds'] / best['replica_seconds']:.2f}",
            ]
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    for name, workload in workloads.items():
        c = workload["comparison"]
        shoal = c["shoal"]
        lines.append(
            f"- {name}: Shoal {shoal['vs_oracle']:.2f}x the oracle (target 1.15: "
            f"{_verdict(shoal['target_vs_oracle_met'])}), {shoal['vs_best_baseline']:.2f}x "
            f"the best baseline, {c['best_baseline']} (target 0.75: "
            f"{_verdict(shoal['target_vs_best_baseline_met'])}), at "
            f"{shoal['attainment_pct']:g}% of windows in SLO."
        )
        for key, what in PREDICTIVE_ROWS.items():
            predictive = c.get(key)
            if predictive is None:
                continue
            oracle_target = predictive["target_vs_oracle"]
            against_oracle = (
                f" (target {oracle_target:g}: {_verdict(predictive['target_vs_oracle_met'])})"
                if oracle_target is not None
                else ""
            )
            lines.append(
                f"- {name}: Shoal predictive {what.format(q=predictive['knob'])}: "
                f"{predictive['vs_oracle']:.2f}x the oracle{against_oracle}, "
                f"{predictive['vs_best_baseline']:.2f}x the best baseline (target "
                f"{predictive['target_vs_best_baseline']:g}: "
                f"{_verdict(predictive['target_vs_best_baseline_met'])}), at "
                f"{predictive['attainment_pct']:g}% of windows in SLO (target 99: "
                f"{_verdict(predictive['at_goal'])})."
            )
    return lines


def gateway(data: dict[str, Any]) -> list[str]:
    lines = [
        "**Pool gateway on the real engine** (`python -m benchmarks.gateway`): "
        f"{data['machine']['haproxy'].split(' - ')[0]}, its configuration rendered and "
        "reloaded by Shoal, in front of real tritonservers of the linear-cost model; tokens "
        "shaped like service-account tokens; each comparison measured side by side in one "
        "run, latencies as the gateway logs them (request in to response out) and as the "
        f"clients see them, on {data['machine']['cpus']} shared cores. How it works and "
        "what each figure means: [gateway.md](gateway.md).",
        "",
        "| behaviour | measured | target | |",
        "|---|---|---|---|",
    ]
    for t in data["targets"]:
        lines.append(
            f"| {t['behaviour']} | {t['measured']} | {t['target']} | {_verdict(t['met'])} |"
        )
    if data.get("measured_again"):
        lines += [
            "",
            f"Measured again on their own, after the rest: {', '.join(data['measured_again'])}.",
        ]
    return lines


def render() -> str:
    parts = [
        batching(_load("batching.json")),
        control_plane(_load("control_plane.json")),
        autoscaling(_load("autoscaling.json")),
        gateway(_load("gateway.json")),
        ramp_lines(_load("ramp.json")),
    ]
    body = "\n\n".join("\n".join(p) for p in parts)
    return f"{BEGIN}\n{body}\n{END}"


def doc_block(text: str, begin: str = BEGIN, end: str = END) -> str:
    start, stop = text.index(begin), text.index(end) + len(end)
    return text[start:stop]


def gateway_doc_block() -> str:
    """The gateway's figures as docs/gateway.md quotes them, with the details behind
    each target."""
    data = _load("gateway.json")
    o, p, rep = data["overhead"], data["priority"], data["replicas"]
    oi, spill = data["overhead_instances"], data["overflow"]
    spill_levels = [point["concurrency"] for point in spill["ladders"]["with"]]
    lines = [
        *gateway(data)[2:],
        "",
        f"- Overhead: P95 target {o['p95_target_ms']:g} ms on a model of {o['model']}; "
        f"median latency {o['median_ms']['direct']} ms straight to Triton, "
        f"{o['median_ms']['gateway']} ms through the gateway ({o['latency_requests']} "
        "requests each, alternated).",
        f"- Overhead with instances: P95 target {oi['p95_target_ms']:g} ms on a model of "
        f"{oi['model']}; the gateway lets each replica hold {oi['server_maxconn']} "
        "requests, two batches for each instance, as the operator renders it.",
        f"- Priority: {p['model']}, {p['capacity_rps']:g} req/s capacity; the top lane at "
        f"{p['high_rps']:g} req/s, the low lane at {p['low_rps']:g}; the top lane's time "
        f"in the gateway's queue at P95: {p['high_loaded_queue_p95_ms']} ms. The same load "
        "without lanes: top-lane P95 "
        f"{data['priority_without_lanes']['high_gateway_p95_ratio']}x unloaded.",
        f"- Overflow: {spill['model']}, at most {spill['server_maxconn']} requests in "
        f"flight on each replica, P95 target {spill['p95_target_ms']:g} ms, "
        f"{spill_levels[0]} to {spill_levels[-1]} clients; "
        f"{spill['throughput_at_target']['without']:g} req/s at the target on the model's "
        f"one replica, {spill['throughput_at_target']['with']:g} with one overflow replica "
        "beside it, which served "
        f"{spill['with_backend_requests']['overflow']} of the "
        f"{spill['with_backend_requests']['own'] + spill['with_backend_requests']['overflow']}"
        " requests; spilled while the clients fit one replica's slots: "
        + ", ".join(
            f"{point['overflow_share']:.0%} at {point['concurrency']}"
            for point in spill["ladders"]["with"]
            if point["concurrency"] <= spill["server_maxconn"]
        )
        + ".",
        f"- Replication delay between two replicas: {rep['replication_delay_ms']['p50']} ms "
        f"median, {rep['replication_delay_ms']['max']} ms max over "
        f"{rep['replication_delay_ms']['samples']} requests (from the request sent to its "
        "count read at the other replica, polled every fraction of a millisecond).",
    ]
    body = "\n".join(lines)
    return f"{GATEWAY_BEGIN}\n{body}\n{GATEWAY_END}"


def _before(restart: dict[str, Any]) -> str:
    """How the probe answered just before the kill (under the wave's load it may be
    too slow for a 2 s probe timeout); older results did not record it."""
    before = restart.get("liveness_healthy_before_kill")
    if before is None:
        return ""
    return "healthy before the kill, " if before else "already slow before the kill, "


def _back(restart: dict[str, Any]) -> str:
    """When the convergence clock started: the component back, and (recorded since)
    the admin's wave taken by the API server."""
    landed = restart.get("wave_landed_after_back_s")
    if landed is None:
        return "after it was back"
    return f"after it was back and the wave had landed ({landed:g} s after it was back)"


def _fenced_rows(sc: dict[str, Any]) -> list[str]:
    """The fenced-leadership scenarios (benchmarks.chaos.fencing): who stepped down
    when, and the old leader's writes after the takeover, from the audit log."""
    pause, cut, hand = sc["leader_pause"], sc["leader_partition"], sc["leader_handover"]

    def end(f: dict[str, Any]) -> str:
        return (
            f"old leader's writes after the takeover: {f['old_leader_writes_after_takeover']} "
            f"(audit log) | exact, {f['noop_writes']} no-op writes |"
        )

    return [
        f"| the leader paused (SIGSTOP) past its Lease mid-wave, resumed after the follower "
        f"had applied a further change | follower leading {pause['takeover_s']:g} s after "
        f"the pause; old leader out {pause['old_leader_out_s']:g} s, stepped down "
        f"{pause['step_down_s']:g} s after its resume; {end(pause)}",
        f"| the leader cut off from the API server mid-wave (a silent partition: nftables "
        f"drops its packets) | follower leading {cut['takeover_s']:g} s after the cut; old "
        f"leader stepped down {cut['step_down_s']:g} s after the cut, "
        f"{'while still cut off' if cut['stepped_down_while_cut_off'] else 'after the heal'}; "
        f"{end(cut)}",
        f"| the leader's Lease handed to the follower by hand mid-wave | old leader stepped "
        f"down {hand['step_down_s']:g} s after the edit; the follower, named but not "
        f"renewing, waited out the Lease and led {hand['takeover_s']:g} s after the edit; "
        f"{end(hand)}",
    ]


def reliability_block() -> str:
    """The chaos suite's figures (benchmarks/results/chaos.json) as docs/benchmarks.md
    quotes them: one row per scenario, the end state each reached."""
    data = _load("chaos.json")
    sc = data["scenarios"]
    leader, killed = sc["leader_killed"], sc["operator_killed"]
    api, etcd = sc["kube-apiserver_restarted"], sc["etcd_restarted"]
    fight, shed, gone = sc["field_fight"], sc["api_sheds_load"], sc["namespace_deleted"]
    upgrade = sc["upgraded_in_place"]
    rounds = killed["rounds"]
    converged = [r["converged_s"] for r in rounds]
    lines = [
        f"**Chaos suite** (`make chaos`: {data['models']} models over {data['namespaces']} "
        f"namespaces and {killed['pools']} pools on a local cluster of its own, "
        f"{data['minutes']:g} minutes). Every scenario ends with every model Ready at its "
        "generation, the objects Shoal manages equal to a fresh render (no child missing, "
        "no duplicate, no orphan) and a no-op resync that writes nothing.",
        "",
        "| fault | figure | end state |",
        "|---|---|---|",
        f"| kill -9 of the leader (2 replicas) mid-wave | takeover {leader['takeover_s']:g} s "
        f"(the Lease's {leader['lease_duration_s']} s to expire, then the follower's next "
        f"try); converged {leader['converged_s']:g} s after the kill | exact, "
        f"{leader['noop_writes']} no-op writes |",
        *_fenced_rows(sc),
        f"| kill -9 of the operator mid-wave, restart ({len(rounds)} rounds, seed "
        f"{killed['seed']}) | converged {min(converged):g} to {max(converged):g} s after the "
        f"restart | exact in {len(rounds)}/{len(rounds)}, "
        f"{sum(r['noop_writes'] for r in rounds)} no-op writes |",
        f"| kill -9 of kube-apiserver mid-wave, down {api['down_s']:g} s | converged "
        f"{api['converged_after_back_s']:g} s {_back(api)} (target ≤ 30 s: "
        f"{_verdict(api['converged_after_back_s'] <= 30)}); liveness {_before(api)}failed "
        f"{api['liveness_failed_after_s']:g} s after the kill, healthy answers beyond the "
        f"probe's cache: {api['liveness_healthy_answers_beyond_cache']} | exact, same "
        "process |",
        f"| kill -9 of etcd mid-wave, down {etcd['down_s']:g} s | converged "
        f"{etcd['converged_after_back_s']:g} s {_back(etcd)} (target ≤ 30 s: "
        f"{_verdict(etcd['converged_after_back_s'] <= 30)}) | exact, same process |",
        f"| a second manager forcing a Deployment's image and a quota every 6 s | "
        f"{fight['operator_repairs_per_min']:g} repairs/min for "
        f"{fight['admin_writes_per_min']:g} forced changes/min, worst repair "
        f"{fight['worst_repair_s']:g} s | no write loop, {fight['noop_writes_after']} "
        "no-op writes after |",
        f"| API server shedding load (in-flight limits 3/1) for {shed['pressure_s']:g} s "
        f"| {shed['operator_writes_refused_429']} writes refused with 429, "
        f"{shed['operator_retries']} passes retried with backoff; converged "
        f"{shed['converged_after_lifted_s']:g} s after the limits were lifted | exact |",
        f"| a tenant namespace with {gone['models_in_namespace']} models deleted | "
        f"namespace gone in {gone['namespace_gone_s']:g} s, pool status corrected in "
        f"{gone['pool_status_corrected_s']:g} s | exact |",
        f"| upgrade in place from the revision before the one tested "
        f"({upgrade['from_commit']}): its CRDs and operator, then the tested ones | "
        f"{upgrade['rollouts']} Deployments rolled; the two versions render "
        f"{upgrade['templates_changed']} pod templates differently "
        f"| exact, {upgrade['noop_writes']} no-op writes |",
    ]
    body = "\n".join(lines)
    return f"{RELIABILITY_BEGIN}\n{body}\n{RELIABILITY_END}"


def elastic_block() -> str:
    """The elastic-capacity figures (benchmarks/results/elastic_capacity.json, written by
    tests/cluster/test_elastic_capacity.py) as docs/benchmarks.md quotes them."""
    data = _load("elastic_capacity.json")
    borrow, reclaim, weights = data["borrow"], data["reclaim"], data["weights"]
    shares, expected = weights["shares"], weights["expected"]
    within = all(abs(s - e) <= 1 for s, e in zip(shares, expected, strict=True))
    lines = [
        f"**Elastic capacity on real Kueue** ({data['kueue_version']}, its controller and "
        "webhooks; local cluster, KWOK GPU nodes, `make elastic-figures`).",
        "",
        "| scenario | figure | target |",
        "|---|---|---|",
        f"| borrow: a 2-GPU pool's model scales to 5 beside a 4-GPU lender using 1 | "
        f"{borrow['replicas_gained']} replicas gained on the lender's nodes, running "
        f"{borrow['seconds_to_borrowed_replicas_running']:g} s after the scale-up | — |",
        f"| reclaim: the lender scales to its 4 | nominal capacity back in "
        f"{reclaim['seconds']:g} s; lender replicas preempted: "
        f"{'yes' if reclaim['lender_replica_preempted'] else 'none'}, borrower's own: "
        f"{reclaim['borrower_own_replicas_preempted']}; borrowed replicas back to waiting: "
        f"{reclaim['borrowed_replicas_waiting']} | ≤ {reclaim['target_seconds']:g} s: "
        f"{_verdict(reclaim['met'])} |",
        f"| weights {weights['weights'][0]} and {weights['weights'][1]} competing for "
        f"{weights['idle_gpus']} idle GPUs | settled at {shares[0]} and {shares[1]} GPUs "
        f"(first seen {weights['first_shares_seen'][0]} and "
        f"{weights['first_shares_seen'][1]}; settled {weights['seconds_to_settle']:g} s "
        f"after the models were created) | {expected[0]} and {expected[1]} within one "
        f"GPU: {_verdict(within)} |",
    ]
    window = data.get("window")
    if window is not None:
        high, low = window["nominal_gpus"]
        on_time = window["seconds_from_start_to_quota"] <= WINDOW_PASS_SECONDS
        drained = window["replicas_preempted_or_evicted"] == 0
        models = window.get("models", 1)
        running = f"{models} models with {high} replicas" if models > 1 else f"{high} replicas"
        lines.append(
            f"| window: a {high}-GPU pool running {running} opens a one-minute window "
            f"of {low} GPUs | quota {low} {window['seconds_from_start_to_quota']:g} s after "
            f"the start; {window['replicas_scaled_down']} replicas scaled down by the HPA "
            f"{window['seconds_from_start_to_drained']:g} s after it (preempted or evicted: "
            f"{window['replicas_preempted_or_evicted']}; {window['replicas_kept_untouched']} "
            f"untouched); quota and replicas back {window['seconds_from_close_to_quota']:g} s "
            f"and {window['seconds_from_close_to_replicas_back']:g} s after it closes | "
            f"within one pass (≤ {WINDOW_PASS_SECONDS:g} s): {_verdict(on_time)}; drained, "
            f"not killed: {_verdict(drained)} |"
        )
    parked = data.get("window_of_no_gpus")
    if parked is not None:
        drained = parked["replicas_preempted_or_evicted"] == 0
        lines.append(
            "| a window of 0 GPUs over a 2-GPU pool running 2 replicas | no replica "
            f"{parked['seconds_from_start_to_no_replicas']:g} s after the start (preempted "
            f"or evicted: {parked['replicas_preempted_or_evicted']}); both running again "
            f"{parked['seconds_from_close_to_replicas_back']:g} s after it closes | drained, "
            f"not killed: {_verdict(drained)} |"
        )
    cohort = data.get("window_in_cohort")
    if cohort is not None:
        drained = cohort["replicas_preempted"] == 0 and cohort["fewest_ready_replicas"] >= 3
        lines.append(
            f"| the same window in a cohort, beside an idle 4-GPU lender | "
            f"{cohort['replicas_moved']} replicas evicted (their disruption budget lets one "
            f"go at a time), their replacements running on the lender's GPUs "
            f"{cohort['seconds_from_start_to_drained_onto_lender']:g} s after the start; "
            f"fewest ready seen while polling: {cohort['fewest_ready_replicas']} of 4; "
            f"preempted: {cohort['replicas_preempted']} | drained, not killed: "
            f"{_verdict(drained)} |"
        )
    body = "\n".join(lines)
    return f"{ELASTIC_BEGIN}\n{body}\n{ELASTIC_END}"


def blocks() -> list[tuple[Path, str, str, str]]:
    """Each generated block: the file quoting it, its markers, its text."""
    return [
        (BENCHMARKS_DOC, BEGIN, END, render()),
        (BENCHMARKS_DOC, RELIABILITY_BEGIN, RELIABILITY_END, reliability_block()),
        (BENCHMARKS_DOC, ELASTIC_BEGIN, ELASTIC_END, elastic_block()),
        (GATEWAY_DOC, GATEWAY_BEGIN, GATEWAY_END, gateway_doc_block()),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write",
        action="store_true",
        help="refresh the blocks in docs/benchmarks.md and docs/gateway.md",
    )
    args = parser.parse_args()
    if args.write:
        for path, begin, end, block in blocks():
            text = path.read_text()
            path.write_text(text.replace(doc_block(text, begin, end), block))
    print(render())


if __name__ == "__main__":
    main()
