"""The gateway's behaviours, measured on real haproxy and tritonserver processes.

Each function starts what it needs under ``workdir``, drives load, and returns its
figures as plain data (JSON-ready). The e2e tests (tests/e2e/test_gateway_*.py) run
them briefly and assert the targets; ``python -m benchmarks.gateway`` runs the same
functions longer and writes the figures to benchmarks/results/gateway.json.

The load generators are Python threads on the same 2 cores as haproxy and Triton: every
comparison is made side by side in one run, and the models cost time (a sleep, as a
GPU kernel costs the GPU's time) rather than CPU, so the machine's CPU is not what is
measured.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import statistics
import threading
import time
from collections.abc import Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx

from e2e import gateway as gw
from e2e.linear_model import BODY
from e2e.triton import TritonServer
from shoal.gateway import haproxy_runner as runner
from shoal.render.gateway_config import Limits
from shoal.render.haproxy_config import overflow_backend

INFER = "/v2/models/{}/infer"


def _ms(seconds: float) -> float:
    return round(seconds * 1000, 2)


def _summary(samples: Sequence[gw.Sample]) -> dict[str, Any]:
    ok = [s.latency for s in samples if s.status == 200]
    return {
        "requests": len(samples),
        "statuses": {str(k): v for k, v in gw.statuses(samples).items()},
        "p50_ms": _ms(statistics.median(ok)) if ok else None,
        "p95_ms": _ms(gw.percentile(ok, 95)) if ok else None,
    }


# --- 1. overhead ------------------------------------------------------------------


def _point(level: int, samples: Sequence[gw.Sample], seconds: float) -> dict[str, Any]:
    ok = [s.latency for s in samples if s.status == 200]
    return {
        "concurrency": level,
        "throughput": round(len(ok) / seconds, 1),
        "p95_ms": _ms(gw.percentile(ok, 95)),
        "errors": len(samples) - len(ok),
    }


def _at_target(points: list[dict[str, Any]], target_ms: float) -> float:
    """Throughput at exactly the P95 target: interpolated between the last ladder point
    under it and the first over it (the best point under it if none is over)."""
    under = [p for p in points if p["p95_ms"] <= target_ms and not p["errors"]]
    if not under:
        return 0.0
    best = max(under, key=lambda p: p["throughput"])
    later = [p for p in points if p["concurrency"] > best["concurrency"]]
    if not later or later[0]["p95_ms"] <= target_ms:
        return float(best["throughput"])
    over = later[0]
    share = (target_ms - best["p95_ms"]) / (over["p95_ms"] - best["p95_ms"])
    return round(best["throughput"] + share * (over["throughput"] - best["throughput"]), 1)


# One instance executing batches of up to 8: the overhead scenario's model.
OVERHEAD_MODEL = gw.Model(
    "linear", base_ms=20, per_item_ms=1, max_batch_size=8, max_queue_delay="2ms"
)
# Four instances of a slower model, each executing a batch at once: a replica holds four
# batches in flight and one more gathered; a gateway that let it hold two batches in
# all left half of them idle.
INSTANCES_MODEL = gw.Model(
    "linear", base_ms=100, per_item_ms=1, max_batch_size=4, max_queue_delay="2ms", instances=4
)


def overhead(
    workdir: Path,
    *,
    levels: Sequence[int] = (1, 4, 8, 16, 24, 32),
    seconds: float = 2.0,
    p95_target_ms: float = 100.0,
    latency_requests: int = 300,
    model: gw.Model = OVERHEAD_MODEL,
    server_maxconn: int | None = None,
) -> dict[str, Any]:
    """Throughput at a P95 target and median latency, straight to Triton and through
    the gateway (token verified, two hops), measured alternately in one run. The
    gateway lets the replica hold what the operator renders for ``model``, or
    ``server_maxconn`` (a control: the slots of an older rendering)."""
    slots = model.slots() if server_maxconn is None else server_maxconn
    with gw.tritons(workdir / "triton", [model]) as servers:
        routes = [gw.route("team-a", model.name, gw.servers_of(servers), server_maxconn=slots)]
        with gw.gateway(workdir / "gw", {"team-a": Limits()}, routes) as gateway:
            path = INFER.format("linear")
            sides = {
                "direct": (servers[0].http_url, {}),
                "gateway": (gateway.replicas[0].url, gw.headers(gateway.token("team-a"))),
            }
            latencies: dict[str, list[float]] = {name: [] for name in sides}
            clients = {name: httpx.Client(base_url=url) for name, (url, _) in sides.items()}
            try:
                for index in range(latency_requests + 20):
                    for name, (_, hdrs) in sides.items():
                        started = time.monotonic()
                        clients[name].post(path, json=BODY, headers=hdrs).raise_for_status()
                        if index >= 20:  # the first ones warm connections and the stub
                            latencies[name].append(time.monotonic() - started)
            finally:
                for client in clients.values():
                    client.close()
            # Each level is measured in alternating halves (direct, gateway, direct,
            # gateway), so a change in the machine's load falls on both sides.
            ladders: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
            for level in levels:
                pooled: dict[str, list[gw.Sample]] = {name: [] for name in sides}
                for _ in range(2):
                    for name, (url, hdrs) in sides.items():
                        pooled[name] += gw.closed_loop(url, path, hdrs, level, seconds / 2)
                for name in sides:
                    ladders[name].append(_point(level, pooled[name], seconds))
    best = {name: _at_target(points, p95_target_ms) for name, points in ladders.items()}
    medians = {name: statistics.median(values) for name, values in latencies.items()}
    ratio = best["gateway"] / best["direct"] if best["direct"] else 0.0
    instances = "one instance" if model.instances == 1 else f"{model.instances} instances"
    return {
        "model": f"{model.base_ms:g} ms + {model.per_item_ms:g} ms/item, max batch "
        f"{model.max_batch_size}, {model.max_queue_delay} delay, {instances}",
        "server_maxconn": slots,
        "p95_target_ms": p95_target_ms,
        "seconds_per_point": seconds,
        "ladders": ladders,
        "throughput_at_target": best,
        "throughput_ratio": round(ratio, 3),
        "median_ms": {name: _ms(value) for name, value in medians.items()},
        "added_median_ms": _ms(medians["gateway"] - medians["direct"]),
        "latency_requests": latency_requests,
    }


# --- 2. fairness ------------------------------------------------------------------


# Latency comparisons leave out each load's first second: when a load step starts, the
# load generator's processes ramp up and Triton's Python-backend instances wake from idle,
# on the same two cores; what is compared is the steady state either side of the step.
RAMP_S = 1.0


def _steady(samples: Sequence[gw.Sample]) -> list[gw.Sample]:
    if not samples:
        return []
    start = min(s.started for s in samples)
    return [s for s in samples if s.started >= start + RAMP_S]


def _p95(values: Sequence[float]) -> float | None:
    return _ms(gw.percentile(values, 95)) if values else None


def _views(samples: Sequence[gw.Sample], edge: dict[str, tuple[int, float]]) -> dict[str, Any]:
    """A load's figures as its clients saw them and as the gateway's edge logged them
    (HAProxy's %Ta: from the request received to the response sent, which leaves out
    the clients' own delays on a busy machine)."""
    ok = [s for s in samples if s.status == 200]
    at_edge = [edge[s.request_id][1] for s in ok if s.request_id in edge]
    return {
        **_summary(samples),
        "gateway_p50_ms": _ms(statistics.median(at_edge)) if at_edge else None,
        "gateway_p95_ms": _p95(at_edge),
        "logged": len(at_edge),
    }


def _ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a is not None and b else None


def fairness(
    workdir: Path,
    *,
    limit: int = 40,
    flood_factor: int = 5,
    alone_seconds: float = 5.0,
    seconds: float = 8.0,
    rounds: int = 2,
    service_ms: float = 50.0,
    instances: int = 4,
    b_share: float = 1.0,
) -> dict[str, Any]:
    """Tenant A floods at ``flood_factor`` times its rate while tenant B sends at
    ``b_share`` of its own rate: B's latency against B alone (measured alternately,
    ``rounds`` times), and A's admitted rate against its limit."""
    # Each tenant's server has room for its rate whether or not requests batch: the
    # latency measured is the model's, not a queue in front of an overloaded model.
    model = gw.Model(
        "linear", base_ms=service_ms, per_item_ms=0.5, max_batch_size=8, instances=instances
    )
    slots = model.slots()
    # A has no burst, so from its first second it is held to its rate exactly.
    a_limits = Limits(requests_per_second=limit, burst=0)
    # B sends at exactly its rate: its burst, a second's worth, absorbs its clients'
    # jitter (a client stalled by A's flooding clients on the same cores catches up by
    # sending several requests at once; half a second's worth was seen to fall short).
    b_limits = Limits(requests_per_second=limit, burst=limit)
    with (
        gw.tritons(workdir / "a", [model]) as a_servers,
        gw.tritons(workdir / "b", [model]) as b_servers,
    ):
        routes = [
            gw.route("team-a", "linear", gw.servers_of(a_servers, "a"), server_maxconn=slots),
            gw.route("team-b", "linear", gw.servers_of(b_servers, "b"), server_maxconn=slots),
        ]
        tenants = {"team-a": a_limits, "team-b": b_limits}
        with gw.gateway(workdir / "gw", tenants, routes) as gateway:
            replica = gateway.replicas[0]
            path = INFER.format("linear")
            a_hdrs = gw.headers(gateway.token("team-a"))
            b_hdrs = gw.headers(gateway.token("team-b"))
            gw.closed_loop(replica.url, path, b_hdrs, 2, 0.3)  # warm-up, within B's burst
            time.sleep(1.5)
            b_rate = limit * b_share
            b_alone: list[gw.Sample] = []
            b_loaded: list[gw.Sample] = []
            flood: list[gw.Sample] = []
            flood_span = 0.0
            b_errors = 0
            late = {"a": 0, "b": 0}
            for _ in range(rounds):
                (quiet,) = gw.run_loads(
                    [gw.Load(replica.url, path, b_hdrs, b_rate, alone_seconds, "b-alone")]
                )
                a_run, b_run = gw.run_loads(
                    [
                        gw.Load(replica.url, path, a_hdrs, limit * flood_factor, seconds, "a", 24),
                        gw.Load(replica.url, path, b_hdrs, b_rate, seconds, "b-with-a"),
                    ]
                )
                b_alone += _steady(quiet.samples)
                b_loaded += _steady(b_run.samples)
                b_errors += sum(1 for s in [*quiet.samples, *b_run.samples] if s.status != 200)
                flood += a_run.samples
                starts = [s.started for s in a_run.samples]
                flood_span += max(starts) - min(starts)
                late["a"] += a_run.late
                late["b"] += quiet.late + b_run.late
            time.sleep(0.5)
            edge = gw.edge_times(replica, "b")
            denied = {
                tenant: replica.metric(
                    "haproxy_backend_requests_denied_total", proxy=f"gate_{tenant}"
                )
                for tenant in tenants
            }
    a_ok = sum(1 for s in flood if s.status == 200)
    alone_view, loaded_view = _views(b_alone, edge), _views(b_loaded, edge)
    return {
        "limit_rps": limit,
        "model": f"{service_ms:g} ms + 0.5 ms/item, max batch 8, {instances} instances; "
        "one tritonserver per tenant",
        "a_burst": a_limits.burst,
        "b_burst": b_limits.burst,
        "b_rps": b_rate,
        "flood_rps": limit * flood_factor,
        "seconds_flooded": seconds * rounds,
        "rounds": rounds,
        "b_alone": alone_view,
        "b_with_flood": loaded_view,
        "b_p95_ratio": _ratio(loaded_view["p95_ms"], alone_view["p95_ms"]),
        "b_gateway_p95_ratio": _ratio(loaded_view["gateway_p95_ms"], alone_view["gateway_p95_ms"]),
        "b_errors": b_errors,
        "ramp_excluded_s": RAMP_S,
        "a": _summary(flood),
        # Over the time A's requests were sent (its clients may fall behind schedule).
        "a_flood_seconds": round(flood_span, 2),
        "a_admitted_rps": round(a_ok / flood_span, 2),
        "a_admitted_vs_limit": round(a_ok / flood_span / limit, 3),
        "a_429": sum(1 for s in flood if s.status == 429),
        "a_other": sum(1 for s in flood if s.status not in (200, 429)),
        "late_sends": late,
        "exporter_denied": denied,
    }


# --- 3. priority ------------------------------------------------------------------


def priority(
    workdir: Path,
    *,
    instances: int = 8,
    service_ms: float = 200.0,
    high_share: float = 0.2,
    overload: float = 2.0,
    seconds: float = 8.0,
    rounds: int = 1,
    lanes: bool = True,
    unloaded: bool = True,
) -> dict[str, Any]:
    """Two lanes on one route under ``overload`` times its capacity: the high lane's
    P95 against its own P95 unloaded (the two measured alternately, ``rounds`` times),
    and the low lane shed (503), how fast, and whether any of it timed out. With
    ``unloaded`` False the high lane alone is not measured (its ratios are then None).

    ``lanes=False`` is the control: the same requests, the "high" ones sent without a
    priority header, so they take the route's default (low) lane like the rest."""
    model = gw.Model(
        "linear",
        base_ms=service_ms,
        per_item_ms=0,
        max_batch_size=1,
        max_queue_delay="100us",
        instances=instances,
    )
    capacity = instances * 1000 / service_ms
    high_rate = capacity * high_share
    low_rate = capacity * overload - high_rate
    with gw.tritons(workdir / "triton", [model]) as servers:
        routes = [
            gw.route(
                "team-a",
                "linear",
                gw.servers_of(servers),
                # As the operator renders it: a request per instance (no batching) and
                # one more; the rest wait in the gateway's queue, in priority order.
                server_maxconn=model.slots(),
                priority_levels=2,
                default_priority=2,
                timeout_ms=5000,
            )
        ]
        with gw.gateway(workdir / "gw", {"team-a": Limits()}, routes) as gateway:
            replica = gateway.replicas[0]
            path = INFER.format("linear")
            token = gateway.token("team-a")
            high = gw.headers(token, priority=1 if lanes else None)
            low = gw.headers(token, priority=2)
            gw.closed_loop(replica.url, path, high, instances, 1.0)  # warm-up
            alone: list[gw.Sample] = []
            loaded: list[gw.Sample] = []
            lows: list[gw.Sample] = []
            high_errors = 0
            late = 0
            for _ in range(rounds):
                quiet = (
                    gw.run_loads(
                        [gw.Load(replica.url, path, high, high_rate, seconds, "unloaded")]
                    )[0]
                    if unloaded
                    else gw.LoadResult(samples=[], late=0)
                )
                busy_high, busy_low = gw.run_loads(
                    [
                        gw.Load(replica.url, path, high, high_rate, seconds, "high"),
                        gw.Load(replica.url, path, low, low_rate, seconds, "low", threads=48),
                    ]
                )
                alone += _steady(quiet.samples)
                loaded += _steady(busy_high.samples)
                high_errors += sum(1 for s in busy_high.samples if s.status != 200)
                lows += busy_low.samples
                late += busy_high.late + busy_low.late
            time.sleep(0.5)
            edge = gw.edge_times(replica, "")
            steady_ids = {s.request_id for s in loaded}
            on_route = gw.route_hops(replica, "")
            hops = {k: on_route[k] for k in steady_ids if k in on_route}
            shed_denied = replica.metric(
                "haproxy_backend_requests_denied_total", proxy="m_team-a_linear"
            )
    shed = [s for s in lows if s.status == 503]
    shed_at_edge = [edge[s.request_id][1] for s in shed if s.request_id in edge]
    shed_hops = [on_route[s.request_id] for s in shed if s.request_id in on_route]
    slowest = sorted(((h.triton_ms, request_id) for request_id, h in hops.items()), reverse=True)
    low_ok = [s for s in lows if s.status == 200]
    slow_low = [s for s in lows if s.status not in (200, 503) or s.latency >= 5.0]
    quiet_view, busy_view = _views(alone, edge), _views(loaded, edge)
    return {
        "capacity_rps": capacity,
        "lanes": lanes,
        "model": f"{service_ms:g} ms a request, {instances} instances, no batching",
        "service_ms": service_ms,
        "high_rps": high_rate,
        "low_rps": low_rate,
        "overload": overload,
        "seconds": seconds,
        "rounds": rounds,
        "high_unloaded": quiet_view,
        "high_loaded": busy_view,
        "high_p95_ratio": _ratio(busy_view["p95_ms"], quiet_view["p95_ms"]),
        "high_gateway_p95_ratio": _ratio(busy_view["gateway_p95_ms"], quiet_view["gateway_p95_ms"]),
        "high_errors": high_errors,
        "ramp_excluded_s": RAMP_S,
        # Where the loaded high lane's time went: the route's queue, then Triton.
        "high_loaded_queue_p95_ms": _p95([max(h.queued_ms, 0) / 1000 for h in hops.values()]),
        "high_loaded_triton_p95_ms": _p95([h.triton_ms / 1000 for h in hops.values()]),
        "high_loaded_slowest": slowest[:8],
        "low": _summary(lows),
        "low_served_rps": round(len(low_ok) / (seconds * rounds), 1),
        "low_shed": len(shed),
        "low_shed_p50_ms": _ms(statistics.median(s.latency for s in shed)) if shed else None,
        "low_shed_p95_ms": _p95([s.latency for s in shed]),
        "low_shed_gateway_p95_ms": _p95(shed_at_edge),
        "low_shed_gateway_max_ms": _ms(max(shed_at_edge)) if shed_at_edge else None,
        # The route's own record of each shed request: refused by the proxy itself
        # (PR--) before it entered the queue (%Tw -1), and how long that took there.
        "low_shed_logged_on_route": len(shed_hops),
        "low_shed_queued_on_route": sum(
            1 for h in shed_hops if h.status != 503 or h.state[:2] != "PR" or h.queued_ms != -1
        ),
        "low_shed_route_p95_ms": _p95([h.total_ms / 1000 for h in shed_hops]),
        "low_timeouts_or_errors": len(slow_low),
        "exporter_denied_on_route": shed_denied,
        "late_sends": late,
    }


# --- 4. ejection ------------------------------------------------------------------


def ejection(
    workdir: Path,
    *,
    rate: float = 150.0,
    stop_after_s: float = 4.0,
    stopped_s: float = 8.0,
    after_s: float = 4.0,
) -> dict[str, Any]:
    """One of three replicas frozen (SIGSTOP) under load, then thawed (SIGCONT): how
    fast the gateway takes it out and back, and the requests that failed."""
    model = gw.Model("linear", base_ms=5, per_item_ms=0.2, max_batch_size=8)
    with gw.tritons(workdir / "triton", [model], replicas=3) as servers:
        routes = [
            gw.route(
                "team-a",
                "linear",
                gw.servers_of(servers),
                server_maxconn=model.slots(),
                timeout_ms=2000,
            )
        ]
        with gw.gateway(workdir / "gw", {"team-a": Limits()}, routes) as gateway:
            replica = gateway.replicas[0]
            victim = servers[1]

            def status() -> str:
                return replica.server_status("m_team-a_linear", "triton-1")

            hdrs = gw.headers(gateway.token("team-a"))
            with gw.OpenLoop(replica.url, INFER.format("linear"), hdrs, rate) as load:
                time.sleep(stop_after_s)
                victim.process.send_signal(signal.SIGSTOP)
                stopped_at = time.monotonic()
                try:
                    out_s = gw.wait_until("frozen replica out", lambda: status() == "DOWN", 30)
                    time.sleep(max(0.0, stopped_s - (time.monotonic() - stopped_at)))
                finally:
                    victim.process.send_signal(signal.SIGCONT)
                back_s = gw.wait_until("thawed replica back", lambda: status() == "UP", 30)
                time.sleep(after_s)
            checks = replica.stat("m_team-a_linear", "triton-1")
    failed = [s for s in load.samples if s.status != 200]
    return {
        "rate_rps": rate,
        "requests": len(load.samples),
        "out_after_s": round(out_s, 2),
        "back_after_s": round(back_s, 2),
        "failed": len(failed),
        "failed_fraction": round(len(failed) / len(load.samples), 5),
        "failed_statuses": {str(k): v for k, v in gw.statuses(failed).items()},
        "check_status": checks.get("check_status"),
        "late_sends": load.late,
    }


# --- 5. runaway -------------------------------------------------------------------


def runaway(
    workdir: Path,
    *,
    timeout_ms: int = 1000,
    hung_requests: int = 4,
    rate: float = 40.0,
    phase_s: float = 4.0,
    baseline: bool = True,
) -> dict[str, Any]:
    """A model that hangs: its requests get 504 at the route's timeout and free their
    slots; another model's requests, through the same gateway, are unaffected. With
    ``baseline`` False the other model's requests are not measured before the hang
    (``others_before`` is then empty): only what the hang leaves them."""
    models = [
        gw.Model("linear", base_ms=10, per_item_ms=0.2),
        gw.Model("stuck", base_ms=120_000, per_item_ms=0),
    ]
    with gw.tritons(workdir / "triton", models) as servers:
        routes = [
            gw.route("team-a", "linear", gw.servers_of(servers)),
            gw.route("team-a", "stuck", gw.servers_of(servers), timeout_ms=timeout_ms),
        ]
        with gw.gateway(workdir / "gw", {"team-a": Limits()}, routes) as gateway:
            replica = gateway.replicas[0]
            hdrs = gw.headers(gateway.token("team-a"))
            with gw.OpenLoop(replica.url, INFER.format("linear"), hdrs, rate) as before:
                time.sleep(phase_s if baseline else 0.0)
            hung: list[gw.Sample] = []
            with gw.OpenLoop(replica.url, INFER.format("linear"), hdrs, rate) as during:
                threads = [
                    threading.Thread(
                        target=lambda: hung.append(gw.one(replica.url, INFER.format("stuck"), hdrs))
                    )
                    for _ in range(hung_requests)
                ]
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
                time.sleep(max(0.0, phase_s - timeout_ms / 1000))
            in_flight = int(replica.stat("m_team-a_stuck")["scur"])
            response_errors = replica.metric(
                "haproxy_backend_response_errors_total", proxy="m_team-a_stuck"
            )
    latencies = [s.latency for s in hung]
    return {
        "timeout_ms": timeout_ms,
        "hung_statuses": {str(k): v for k, v in gw.statuses(hung).items()},
        "hung_latency_ms": sorted(_ms(x) for x in latencies),
        "worst_deviation": round(max(abs(x * 1000 / timeout_ms - 1) for x in latencies), 3),
        "in_flight_after": in_flight,
        "exporter_response_errors": response_errors,
        "others_before": _summary(before.samples),
        "others_during": _summary(during.samples),
    }


# --- 6. limits changed under load ----------------------------------------------------


class ClosedLoop:
    """``clients`` threads sending back to back until :meth:`stop`; samples as they come."""

    def __init__(self, url: str, path: str, hdrs: dict[str, str], clients: int) -> None:
        self.samples: list[gw.Sample] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._args = (url, path, hdrs)
        self._threads = [threading.Thread(target=self._client) for _ in range(clients)]

    def _client(self) -> None:
        url, path, hdrs = self._args
        with httpx.Client(base_url=url, timeout=60) as http:
            while not self._stop.is_set():
                sample = gw.send(http, path, hdrs, "")
                with self._lock:
                    self.samples.append(sample)

    def __enter__(self) -> ClosedLoop:
        for t in self._threads:
            t.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def stop(self) -> None:
        self._stop.set()
        for t in self._threads:
            t.join()

    def count(self) -> int:
        with self._lock:
            return len(self.samples)


def _rps(samples: Sequence[gw.Sample]) -> float:
    if not samples:
        return 0.0
    span = max(s.started + s.latency for s in samples) - min(s.started for s in samples)
    return round(len(samples) / max(span, 1e-9), 1)


# How long B sends before its limit is lowered, and how long after that its count of the
# last 10 s certainly stays over the new limit (20 a second for 10 s is 200; at 10 a
# second the limit is 100 in 10 s; the oldest leave the window only after 5 s).
B_HISTORY_S = 11.0
B_COUNTED_S = 4.0


def limits_change(
    workdir: Path, *, requests: int = 10_000, clients: int = 12, changes: int = 3
) -> dict[str, Any]:
    """Limits changed by new configurations, reloaded while tenant A sends at least
    ``requests`` requests (under its limits: every one should succeed) and tenant B
    sends 20 a second, under its limit until the last change lowers it to 10."""
    model = gw.Model("linear", base_ms=2, per_item_ms=0.05, max_batch_size=16)
    a_caps = [(5000, 64), (4000, 48), (6000, 56), (5000, 60)][: changes + 1]
    with gw.tritons(workdir / "triton", [model], replicas=2) as servers:
        routes = [
            gw.route("team-a", "linear", gw.servers_of(servers), server_maxconn=model.slots()),
            gw.route("team-b", "linear", gw.servers_of(servers), server_maxconn=model.slots()),
        ]

        def tenants(step: int, b_rate: int) -> dict[str, Limits]:
            rps, cap = a_caps[step]
            return {
                "team-a": Limits(requests_per_second=rps, burst=500, concurrency=cap),
                "team-b": Limits(requests_per_second=b_rate, burst=0),
            }

        with gw.gateway(workdir / "gw", tenants(0, 50), routes) as gateway:
            replica = gateway.replicas[0]
            path = INFER.format("linear")
            # B opens a connection per request. A connection idle at a reload gets one
            # more answer from the old worker, under the old limits (docs/gateway.md,
            # "Reloads"); B's figures measure the new worker's handed-over counts.
            b_hdrs = {**gw.headers(gateway.token("team-b")), "Connection": "close"}
            reloads = []
            started = time.monotonic()
            with (
                ClosedLoop(replica.url, path, gw.headers(gateway.token("team-a")), clients) as a,
                gw.OpenLoop(replica.url, path, b_hdrs, 20) as b,
            ):
                for step in range(1, len(a_caps)):
                    b_rate = 10 if step == len(a_caps) - 1 else 50
                    if b_rate == 10:
                        # B's count of the last 10 s is then about 200: at 10 a second it
                        # is over the new limit's 100 for at least 5 s after the change.
                        gw.wait_until(
                            "10 s of B's requests",
                            lambda: time.monotonic() - started > B_HISTORY_S,
                            timeout=B_HISTORY_S + 5,
                            step=0.2,
                        )
                    new = gateway.base_config(tenants(step, b_rate), routes)
                    applied = gateway.apply(new)[0]
                    reloads.append(
                        {
                            "at_s": round(time.monotonic() - started, 1),
                            "seconds": round(applied.seconds, 2),
                            "tables_handed_over": applied.tables_handed_over,
                            "team_a_slots": int(replica.stat("gate_team-a", "routes")["slim"]),
                            "team_a_slots_wanted": a_caps[step][1],
                        }
                    )
                last_change = time.monotonic()
                gw.wait_until(
                    f"{requests} requests of team-a",
                    lambda: a.count() >= requests and time.monotonic() - last_change > 4,
                    timeout=180,
                    step=0.2,
                )
    a_failed = [s for s in a.samples if s.status != 200]
    b_before = [s for s in b.samples if s.started < reloads[-1]["at_s"] + started - 1]
    b_after = [s for s in b.samples if s.started > last_change + 1]
    b_after_ok = [s for s in b_after if s.status == 200]
    # While B's count from before the change still holds it over the new limit.
    b_counted = [s for s in b_after if s.started < last_change + B_COUNTED_S]
    return {
        "a_requests": len(a.samples),
        "a_failed": len(a_failed),
        "a_failed_statuses": {str(k): v for k, v in gw.statuses(a_failed).items()},
        "a_rps": _rps(a.samples),
        "reloads": reloads,
        "b_rate_rps": 20,
        "b_limit_after_rps": 10,
        "b_before_last_change": {str(k): v for k, v in gw.statuses(b_before).items()},
        "b_after_last_change": {str(k): v for k, v in gw.statuses(b_after).items()},
        "b_while_counted": {str(k): v for k, v in gw.statuses(b_counted).items()},
        "b_admitted_rps_after": round(
            len(b_after_ok) / max(1e-9, max(s.started for s in b_after) - (last_change + 1)), 1
        )
        if b_after
        else 0.0,
    }


# --- 7. identity ------------------------------------------------------------------


def identity(workdir: Path) -> dict[str, Any]:
    """What bad tokens and other tenants get: every refusal counted by its status."""
    with (
        gw.tritons(workdir / "a", [gw.Model("linear"), gw.Model("ranker")]) as a_servers,
        gw.tritons(workdir / "b", [gw.Model("linear")]) as b_servers,
    ):
        routes = [
            gw.route("team-a", "linear", gw.servers_of(a_servers, "a")),
            gw.route("team-a", "ranker", gw.servers_of(a_servers, "a")),
            gw.route("team-b", "linear", gw.servers_of(b_servers, "b")),
        ]
        tenants = {
            "team-a": Limits(requests_per_second=1000),
            "team-b": Limits(requests_per_second=5),
        }
        with gw.gateway(workdir / "gw", tenants, routes) as gateway:
            issuer = gateway.issuer
            url = gateway.replicas[0].url

            def status(model: str, token: str | None) -> int:
                return httpx.post(
                    url + INFER.format(model), json=BODY, headers=gw.headers(token), timeout=10
                ).status_code

            bad = {
                "missing": None,
                "forged": issuer.token("team-a", key=gw.rsa_pair(issuer.keys[0].kid)),
                "expired": issuer.token("team-a", lifetime_s=-1),
                "not yet valid": issuer.token("team-a", not_before_s=600),
                "wrong audience": issuer.token("team-a", audience=["kubernetes"]),
                "wrong issuer": issuer.token("team-a", issuer="https://evil.example"),
            }
            bad_status = {name: status("linear", token) for name, token in bad.items()}
            a, b = gateway.token("team-a"), gateway.token("team-b")
            cross = status("ranker", b)  # team-a's model, asked for with team-b's token
            time.sleep(1.1)  # that request counted against team-b: let its second pass
            a_spent = [status("linear", a) for _ in range(50)]
            b_statuses = [status("linear", b) for _ in range(6)]
            unadmitted = status("linear", gateway.token("team-c"))
    return {
        "bad_tokens": bad_status,
        "bad_tokens_refused_401": sum(1 for s in bad_status.values() if s == 401),
        "bad_tokens_total": len(bad_status),
        "a_requests": len(a_spent),
        "a_ok": a_spent.count(200),
        "b_statuses_after_a": b_statuses,
        "b_limit_intact": b_statuses == [200] * 5 + [429],
        "b_to_a_model": cross,
        "unadmitted_tenant": unadmitted,
    }


# --- 8. scaling -------------------------------------------------------------------


def scaling(workdir: Path, *, clients: int = 12, hold_s: float = 4.0) -> dict[str, Any]:
    """Servers added and removed by new configurations, reloaded under load; a removed
    server's tritonserver is stopped once no worker sends it anything."""
    model = gw.Model("linear", base_ms=2, per_item_ms=0.05, max_batch_size=16)
    with gw.tritons(workdir / "triton", [model], replicas=3) as servers:
        pods = gw.servers_of(servers)

        def routes(members: Sequence[int]) -> list[Any]:
            return [
                gw.route(
                    "team-a", "linear", [pods[i] for i in members], server_maxconn=model.slots()
                )
            ]

        with gw.gateway(workdir / "gw", {"team-a": Limits()}, routes([0, 1])) as gateway:
            replica = gateway.replicas[0]
            steps = []
            started = time.monotonic()
            with ClosedLoop(
                replica.url, INFER.format("linear"), gw.headers(gateway.token("team-a")), clients
            ) as load:
                for label, members in (
                    ("add triton-2", [0, 1, 2]),
                    ("remove triton-0", [1, 2]),
                    ("remove triton-1", [2]),
                    ("add triton-1", [1, 2]),
                ):
                    time.sleep(hold_s)
                    applied = gateway.apply(
                        gateway.base_config({"team-a": Limits()}, routes(members))
                    )
                    drained = gw.wait_until(
                        "old workers done",
                        lambda: not runner.master_status(replica.runtime).old_workers,
                        timeout=30,
                    )
                    served = {
                        row["svname"]: int(row["stot"])
                        for row in replica.stats()
                        if row["pxname"] == "m_team-a_linear" and row["svname"] != "BACKEND"
                    }
                    steps.append(
                        {
                            "step": label,
                            "at_s": round(time.monotonic() - started, 1),
                            "reload_s": round(applied[0].seconds, 2),
                            "old_worker_drained_s": round(drained, 2),
                            "servers": sorted(served),
                        }
                    )
                    if label == "remove triton-0":
                        # Its pod terminates only now: nothing can reach it any more.
                        servers[0].stop()
                time.sleep(hold_s)
                # What the last worker sent each server since it started.
                final = {
                    row["svname"]: int(row["stot"])
                    for row in replica.stats()
                    if row["pxname"] == "m_team-a_linear" and row["svname"] != "BACKEND"
                }
    failed = [s for s in load.samples if s.status != 200]
    return {
        "requests": len(load.samples),
        "failed": len(failed),
        "failed_statuses": {str(k): v for k, v in gw.statuses(failed).items()},
        "rps": _rps(load.samples),
        "steps": steps,
        "last_worker_requests_per_server": final,
    }


# --- replicas: one limit across gateway pods ----------------------------------------


def replicas(
    workdir: Path,
    *,
    limit: int = 100,
    offered_per_replica: float = 150.0,
    seconds: float = 12.0,
    concurrency: int = 4,
    delay_samples: int = 20,
) -> dict[str, Any]:
    """Two gateway replicas, peered: one tenant's rate limit holds for the sum of both
    replicas' traffic; its concurrency cap for the sum of their in-flight requests; and
    the time one replica's count takes to show at the other."""
    fast = gw.Model("linear", base_ms=5, per_item_ms=0.2)
    slow = gw.Model("slow", base_ms=500, per_item_ms=0, max_batch_size=1, instances=8)
    with gw.tritons(workdir / "triton", [fast, slow]) as servers:
        routes = [
            gw.route("team-a", "linear", gw.servers_of(servers)),
            gw.route("team-b", "slow", gw.servers_of(servers), server_maxconn=slow.slots()),
            gw.route("team-c", "linear", gw.servers_of(servers)),
        ]
        tenants = {
            "team-a": Limits(requests_per_second=limit, burst=limit // 10),
            "team-b": Limits(concurrency=concurrency, queue_timeout_ms=700),
            "team-c": Limits(requests_per_second=10_000),
        }
        with gw.gateway(workdir / "gw", tenants, routes, replicas=2) as gateway:
            first, second = gateway.replicas
            # Replication delay: a request at one replica, its key's count at the other.
            # Replication delay: a request counted at one replica (a model-less one,
            # answered at once after it is counted), until the other shows the count.
            delays = []
            c_hdrs = gw.headers(gateway.token("team-c"))
            with httpx.Client(base_url=first.url) as http:
                http.post(INFER.format("absent"), json=BODY, headers=c_hdrs)
                for _ in range(delay_samples):
                    before = second.rate("rate_10s", "team-c|gw-0")
                    sent = time.monotonic()
                    http.post(INFER.format("absent"), json=BODY, headers=c_hdrs)
                    while second.rate("rate_10s", "team-c|gw-0") <= before:
                        if time.monotonic() - sent > 5:
                            raise AssertionError("a count never reached the other replica")
                    delays.append(time.monotonic() - sent)
            a_hdrs = gw.headers(gateway.token("team-a"))
            loads = [
                gw.OpenLoop(
                    r.url, INFER.format("linear"), a_hdrs, offered_per_replica, seconds=seconds
                )
                for r in gateway.replicas
            ]
            with loads[0], loads[1]:
                loads[0].join()
                loads[1].join()
            # Concurrency: 12 slow requests, 6 at each replica, at once.
            b_hdrs = gw.headers(gateway.token("team-b"))
            peak = {"in_flight": 0}
            stop = threading.Event()

            def sample_in_flight() -> None:
                while not stop.is_set():
                    total = sum(int(r.stat("m_team-b_slow")["scur"]) for r in gateway.replicas)
                    peak["in_flight"] = max(peak["in_flight"], total)
                    time.sleep(0.02)

            watcher = threading.Thread(target=sample_in_flight)
            watcher.start()
            results: list[gw.Sample] = []
            lock = threading.Lock()

            def slow_client(url: str) -> None:
                sample = gw.one(url, INFER.format("slow"), b_hdrs)
                with lock:
                    results.append(sample)

            clients = [
                threading.Thread(target=slow_client, args=(r.url,))
                for r in gateway.replicas
                for _ in range(6)
            ]
            for t in clients:
                t.start()
            for t in clients:
                t.join()
            stop.set()
            watcher.join()
    admitted = [sum(1 for s in load.samples if s.status == 200) / seconds for load in loads]
    allowed = limit + (limit // 10) / 10
    return {
        "limit_rps": limit,
        "burst": limit // 10,
        "allowed_rps": allowed,
        "offered_rps_per_replica": offered_per_replica,
        "admitted_rps_per_replica": [round(x, 1) for x in admitted],
        "admitted_rps_total": round(sum(admitted), 1),
        "admitted_vs_limit": round(sum(admitted) / limit, 3),
        "replication_delay_ms": {
            "p50": _ms(statistics.median(delays)),
            "max": _ms(max(delays)),
            "samples": len(delays),
            "all": [_ms(d) for d in delays],
        },
        "concurrency_cap": concurrency,
        "peak_in_flight_both_replicas": peak["in_flight"],
        "slow_statuses": {str(k): v for k, v in gw.statuses(results).items()},
    }


# --- 9. overflow --------------------------------------------------------------------


def _executed(server: TritonServer, model: str) -> int:
    """Requests ``model`` has answered on one tritonserver, by its own statistics."""
    stats = httpx.get(f"{server.http_url}/v2/models/{model}/stats", timeout=10).json()
    return int(stats["model_stats"][0]["inference_stats"]["success"]["count"])


def _burst(
    clients: Sequence[httpx.Client], path: str, hdrs: dict[str, str], seconds: float
) -> tuple[list[gw.Sample], float]:
    """A closed loop (as :func:`gw.closed_loop`) on clients made beforehand, all starting
    at once: making an httpx client costs about 20 ms of the interpreter (its TLS
    context loads the CA bundle), so halves of a second that made 48 clients each would
    spend most of their time starting up, and the more so the higher the level."""
    samples: list[gw.Sample] = []
    lock = threading.Lock()
    go = threading.Barrier(len(clients) + 1)
    stop = [0.0]

    def client(http: httpx.Client) -> None:
        local = []
        go.wait()
        while time.monotonic() < stop[0]:
            local.append(gw.send(http, path, hdrs, ""))
        with lock:
            samples.extend(local)

    threads = [threading.Thread(target=client, args=(http,)) for http in clients]
    for t in threads:
        t.start()
    started = time.monotonic()
    stop[0] = started + seconds
    go.wait()
    for t in threads:
        t.join()
    return samples, time.monotonic() - started


def overflow(
    workdir: Path,
    *,
    levels: Sequence[int] = (8, 16, 24, 32, 40, 48),
    seconds: float = 2.0,
    p95_target_ms: float = 100.0,
) -> dict[str, Any]:
    """A model whose only replica is saturated, with and without an overflow replica in
    another, idle, pool: throughput at a P95 target through the gateway (token
    verified), level by level in alternating halves, and where the requests went.

    Two tritonservers serve the same model: the first stands for the model's only
    replica in its own, saturated pool, the second for its overflow replica in a pool
    with room to spare. The model is the overhead scenario's, 20 ms + 1 ms an item in
    batches of up to 8 on one instance: a sleep, standing for a small model's batched
    forward pass on a GPU, which costs the GPU's time and not this machine's CPU. At
    the 16 requests in flight the operator lets a replica hold (``server_maxconn``),
    it is two batches deep, its P95 about three batches (~85 ms, just under the 100 ms
    target), and it tops out near 230 requests a
    second: more clients only wait in the gateway's queue. With the overflow replica,
    the requests over those 16 go to the second replica instead of the queue, so the
    P95 holds until both are full (32 clients).

    Two gateways run side by side on routes that differ only in ``overflow`` (empty, or
    the second server), so no half waits for a reload; only one carries load at a time.
    Each side's clients are made once (:func:`_burst`), and a point's throughput is its
    successful requests over the time its halves took, up to their last answer."""
    model = gw.Model("linear", base_ms=20, per_item_ms=1, max_batch_size=8, max_queue_delay="2ms")
    server_maxconn = model.slots()
    tenants = {"team-a": Limits()}
    with gw.tritons(workdir / "triton", [model], replicas=2) as servers:
        own, spare = gw.servers_of(servers)
        plain = gw.route("team-a", model.name, [own], server_maxconn=server_maxconn)
        spilling = dataclasses.replace(plain, overflow=(spare,))
        with (
            gw.gateway(workdir / "without", tenants, [plain]) as without,
            gw.gateway(workdir / "with", tenants, [spilling]) as with_,
            ExitStack() as stack,
        ):
            path = INFER.format(model.name)
            sides = {
                name: (gateway.replicas[0].url, gw.headers(gateway.token("team-a")))
                for name, gateway in (("without", without), ("with", with_))
            }
            clients = {
                name: [
                    stack.enter_context(httpx.Client(base_url=url, timeout=60))
                    for _ in range(max(levels))
                ]
                for name, (url, _) in sides.items()
            }
            # Both Python-backend instances warmed, and every client's connection made.
            for server in servers:
                gw.closed_loop(server.http_url, path, {}, 8, 0.5)
            for name, (_, hdrs) in sides.items():
                _burst(clients[name], path, hdrs, 0.3)
            spill_backend = overflow_backend(spilling)
            spill_before = int(with_.replicas[0].stat(spill_backend)["stot"])
            own_before = int(with_.replicas[0].stat(spilling.backend)["stot"])
            ladders: dict[str, list[dict[str, Any]]] = {name: [] for name in sides}
            spare_served = {name: 0 for name in sides}
            for level in levels:
                pooled: dict[str, list[gw.Sample]] = {name: [] for name in sides}
                spent = {name: 0.0 for name in sides}
                spilled = {name: 0 for name in sides}
                # Alternating halves (without, with, without, with), as in overhead.
                for _ in range(2):
                    for name, (_, hdrs) in sides.items():
                        before = _executed(servers[1], model.name)
                        samples, elapsed = _burst(clients[name][:level], path, hdrs, seconds / 2)
                        pooled[name] += samples
                        spent[name] += elapsed
                        spilled[name] += _executed(servers[1], model.name) - before
                for name in sides:
                    point = _point(level, pooled[name], spent[name])
                    ok = sum(1 for s in pooled[name] if s.status == 200)
                    point["overflow_share"] = round(spilled[name] / ok, 3) if ok else 0.0
                    ladders[name].append(point)
                    spare_served[name] += spilled[name]
            stats = with_.replicas[0]
            spill_served = int(stats.stat(spill_backend)["stot"]) - spill_before
            own_served = int(stats.stat(spilling.backend)["stot"]) - own_before
            without_backends = {row["pxname"] for row in without.replicas[0].stats()}
    best = {name: _at_target(points, p95_target_ms) for name, points in ladders.items()}
    ratio = best["with"] / best["without"] if best["without"] else 0.0
    total = own_served + spill_served
    return {
        "model": "20 ms + 1 ms/item, max batch 8, 2 ms delay, one instance a replica",
        "server_maxconn": server_maxconn,
        "p95_target_ms": p95_target_ms,
        "seconds_per_point": seconds,
        "ladders": ladders,
        "throughput_at_target": best,
        "throughput_ratio": round(ratio, 3),
        "errors": {name: sum(p["errors"] for p in points) for name, points in ladders.items()},
        # HAProxy's counts of the "with" gateway's two backends over the ladder.
        "with_backend_requests": {"own": own_served, "overflow": spill_served},
        "with_overflow_share": round(spill_served / total, 3) if total else 0.0,
        "without_has_overflow_backend": spill_backend in without_backends,
        # Requests the overflow replica's tritonserver answered during each side's halves.
        "overflow_replica_requests": spare_served,
    }


def environment() -> dict[str, Any]:
    """What the figures were measured on."""
    return {"cpus": os.cpu_count()}
