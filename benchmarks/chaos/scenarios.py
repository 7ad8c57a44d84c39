"""The chaos scenarios: each faults a converging fleet, asserts the exact end state and
returns its figures. The chaos test tier runs them small; ``make chaos`` runs them at
full size with more rounds and writes the figures docs/benchmarks.md quotes.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from e2e.cluster import local
from e2e.install import install_crds, kubectl_for

from benchmarks import control_plane as bench
from benchmarks.chaos.fleet import model, rescaled
from benchmarks.chaos.rig import Rig, audit_events, succeeded
from shoal.kube.paths import path_of
from shoal.leader import LEASE_NAME, LEASE_SECONDS

# kopf answers its liveness endpoint from results up to this old (kopf's own constant):
# a probe answered within this time of a fault may still show the time before it.
PROBE_CACHE_SECONDS = 10.0
# How long a killed control-plane component stays down: longer than the probe cache,
# so the probe is seen failing.
DOWN_SECONDS = 15.0
TAKEN_BACK_WITHIN_SECONDS = 30.0
MIN_WAVE_S = 10.0


@dataclass(frozen=True)
class Size:
    models: int
    namespaces: int

    def fleet(self, max_replicas: int = 2, first: int = 0) -> list[dict[str, Any]]:
        return [model(i, self.namespaces, max_replicas) for i in range(first, first + self.models)]


def in_background(work: Callable[[], None]) -> Callable[[], None]:
    """Run ``work`` in a thread; the returned function joins it and re-raises."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            work()
        except BaseException as exc:  # surfaced on join
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()

    def join() -> None:
        thread.join()
        if errors:
            raise errors[0]

    return join


def settled(rig: Rig, fleet: list[dict[str, Any]], since: float | None = None) -> dict[str, Any]:
    """Converged exactly (seconds counted from ``since``, a monotonic time, if given),
    then a no-op resync that writes nothing."""
    seconds = rig.converge(fleet)
    if since is not None:
        seconds = time.monotonic() - since
    writes, passes = rig.noop_writes()
    assert not writes, f"{len(writes)} writes in a no-op resync ({passes} passes): {writes}"
    return {"converged_s": round(seconds, 1), "noop_writes": len(writes), "noop_passes": passes}


def ready_fleet(rig: Rig, size: Size) -> list[dict[str, Any]]:
    """The fleet applied and converged, with the operator running."""
    if rig.operator is None:
        rig.start_operator()
    fleet = size.fleet()
    rig.reset(fleet)
    rig.converge(fleet)
    return fleet


# ------------------------------------------------------------------------ 1. kill -9
def operator_killed(rig: Rig, size: Size, rounds: int, seed: int) -> dict[str, Any]:
    """kill -9 the operator at a random point of a reconcile wave, then start it again.
    Each wave replaces a quarter of the models with new ones (creates, and orphans to
    collect) and changes every other model's maxReplicas (updates)."""
    rng = random.Random(seed)
    if rig.operator is None:
        rig.start_operator()
    fleet = size.fleet()
    began = time.monotonic()
    rig.reset(fleet)
    rig.converge(fleet)
    # Kill points fall within a wave's length (at least MIN_WAVE_S, should the fleet
    # already have stood when the scenario began).
    wave_s = max(time.monotonic() - began, MIN_WAVE_S)
    rounds_out = []
    next_index = size.models
    for r in range(rounds):
        replaced = set(rng.sample(range(len(fleet)), len(fleet) // 4))
        gone = [fleet[i] for i in sorted(replaced)]
        max_replicas = 3 + r % 3
        kept = rescaled([d for i, d in enumerate(fleet) if i not in replaced], max_replicas)
        new = [model(next_index + j, size.namespaces, max_replicas) for j in range(len(gone))]
        next_index += len(gone)
        fleet = kept + new
        kill_after = rng.uniform(0.0, wave_s)

        def wave(gone: list[dict[str, Any]] = gone, fleet: list[dict[str, Any]] = fleet) -> None:
            rig.delete(gone)
            rig.apply(fleet)

        join = in_background(wave)
        time.sleep(kill_after)
        rig.kill_operator()
        join()
        restarted = time.monotonic()
        rig.start_operator()
        figures = settled(rig, fleet, since=restarted)
        rounds_out.append({"round": r, "kill_after_s": round(kill_after, 1), **figures})
    return {
        "models": size.models,
        "namespaces": size.namespaces,
        "pools": len(bench.pools()),
        "seed": seed,
        "first_wave_s": round(wave_s, 1),
        "rounds": rounds_out,
        "worst_converged_s": max(r["converged_s"] for r in rounds_out),
    }


# -------------------------------------------------------- 2, 3. API server, etcd restart
def _healthy(url: str) -> bool:
    try:
        return httpx.get(url, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def component_restarted(rig: Rig, size: Size, component: str, seed: int) -> dict[str, Any]:
    """kill -9 ``component`` in the middle of a reconcile wave, keep it down, start it
    again: the operator reconnects on its own and converges, and its liveness probe does
    not report healthy while it cannot watch (beyond the probe's cache age)."""
    rng = random.Random(seed)
    fleet = ready_fleet(rig, size)
    operator = rig.operator
    assert operator is not None
    fleet = rescaled(fleet, 4)
    join = in_background(lambda: rig.apply(fleet))
    time.sleep(rng.uniform(0.0, 2.0))
    healthy_before = _healthy(operator.health_url)
    local.kill(rig.cluster, component)
    killed = time.monotonic()
    probes: list[tuple[float, bool]] = []
    while time.monotonic() - killed < DOWN_SECONDS:
        probes.append((time.monotonic() - killed, _healthy(operator.health_url)))
        time.sleep(0.5)
    local.start(rig.cluster, component)
    back = time.monotonic()
    join()
    # The operator can converge only to a wave the API server has taken: after a
    # restart the admission policy refuses every model until the API server has synced
    # its TenantPools again (the admin retries, as a GitOps controller would), which
    # can take longer than the restart itself. The operator's figure counts from when
    # both the server is back and the wave has landed.
    landed = time.monotonic()
    rig.converge(fleet)
    seconds = time.monotonic() - landed
    # The same process answers healthy again once its probe's cached failure expires.
    deadline = time.monotonic() + PROBE_CACHE_SECONDS + 5
    while not _healthy(operator.health_url):
        assert time.monotonic() < deadline, "the operator's liveness did not recover"
        time.sleep(0.5)
    assert Path(f"/proc/{operator.pid}").exists(), "the operator process is gone"
    healthy_late = [t for t, ok in probes if ok and t > PROBE_CACHE_SECONDS]
    if component == "kube-apiserver":
        # Its watches die with it: the probe must say so.
        assert not healthy_late, f"liveness healthy {healthy_late} s after {component} died"
        assert any(not ok for _, ok in probes), f"liveness never failed while {component} was down"
    # With etcd down the API server keeps its watches open and serves them (and the
    # probe's listing) from its cache; no write can land, so no event is missed, and a
    # restarted operator would gain nothing: the probe may stay healthy.
    assert seconds <= TAKEN_BACK_WITHIN_SECONDS, (
        f"converged {seconds:.1f} s after {component} was back and the wave had landed "
        f"({landed - back:.1f} s after it was back); last pending {rig.last_pending}"
    )
    writes, passes = rig.noop_writes()
    assert not writes, f"{len(writes)} writes in a no-op resync ({passes} passes): {writes}"
    failures = [t for t, ok in probes if not ok]
    return {
        "component": component,
        "models": size.models,
        "down_s": DOWN_SECONDS,
        "wave_landed_after_back_s": round(landed - back, 1),
        "converged_after_back_s": round(seconds, 1),
        "liveness_healthy_before_kill": healthy_before,
        "liveness_failed_after_s": round(min(failures), 1) if failures else None,
        "liveness_healthy_answers_beyond_cache": len(healthy_late),
        "noop_writes": len(writes),
    }


# ---------------------------------------------------------------- 4. a field fight
FIGHT_IMAGE = "registry.example/triton:admin-pinned"
FIGHT_GPUS = "7"


def _fights(model_doc: dict[str, Any]) -> list[tuple[dict[str, Any], Callable[[Any], bool]]]:
    """The admin's applies, each with how to tell that Shoal's value is back: the
    model's container image, and the GPU limit of its pool's quota in its namespace."""
    meta = model_doc["metadata"]
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        "spec": {"template": {"spec": {"containers": [{"name": "triton", "image": FIGHT_IMAGE}]}}},
    }
    quota = {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {
            "name": f"shoal-pool-{model_doc['spec']['pool']}",
            "namespace": meta["namespace"],
        },
        "spec": {"hard": {"requests.nvidia.com/gpu": FIGHT_GPUS}},
    }

    def image_back(live: Any) -> bool:
        return bool(live["spec"]["template"]["spec"]["containers"][0]["image"] != FIGHT_IMAGE)

    def quota_back(live: Any) -> bool:
        return bool(live["spec"]["hard"]["requests.nvidia.com/gpu"] != FIGHT_GPUS)

    return [(deployment, image_back), (quota, quota_back)]


def field_fight(rig: Rig, size: Size, seconds: float, interval: float) -> dict[str, Any]:
    """A second field manager forces its value onto a field Shoal manages, every
    ``interval`` seconds: Shoal takes it back once per change and never loops."""
    fleet = ready_fleet(rig, size)
    fights = _fights(fleet[0])
    began_events = len(audit_events(rig.audit_log))
    admin_writes = 0
    repaired_s: list[float] = []
    began = time.monotonic()
    with rig.http() as http:
        while time.monotonic() - began < seconds:
            for doc, _ in fights:
                http.patch(
                    path_of(doc),
                    params={"fieldManager": "admin", "force": "true"},
                    headers={"Content-Type": "application/apply-patch+yaml"},
                    json=doc,
                ).raise_for_status()
                admin_writes += 1
            changed = time.monotonic()
            for doc, back in fights:
                deadline = changed + interval
                while not back(http.get(path_of(doc)).raise_for_status().json()):
                    assert time.monotonic() < deadline, f"{doc['kind']} unrepaired in {interval} s"
                    time.sleep(0.1)
            repaired_s.append(time.monotonic() - changed)
            time.sleep(max(0.0, interval - (time.monotonic() - changed)))
    elapsed = time.monotonic() - began
    rig.converge(fleet)
    fought = {(d["kind"], d["metadata"]["namespace"], d["metadata"]["name"]) for d, _ in fights}
    repairs = 0
    for event in audit_events(rig.audit_log)[began_events:]:
        ref = event.get("objectRef") or {}
        kind = {"deployments": "Deployment", "resourcequotas": "ResourceQuota"}.get(
            ref.get("resource", "")
        )
        if succeeded(event) and (kind, ref.get("namespace"), ref.get("name")) in fought:
            repairs += 1
    # Once per change, each change repaired: never fewer (it would not have been
    # repaired), never more (a write loop).
    assert repairs == admin_writes, f"{repairs} repairs for {admin_writes} changes"
    writes, _ = rig.noop_writes()
    assert not writes, f"{len(writes)} writes in a no-op resync after the fight: {writes}"
    per_minute = 60.0 / elapsed
    return {
        "seconds": round(elapsed),
        "admin_writes_per_min": round(admin_writes * per_minute, 1),
        "operator_repairs_per_min": round(repairs * per_minute, 1),
        "worst_repair_s": round(max(repaired_s), 2),
        "noop_writes_after": len(writes),
    }


# ------------------------------------------------------------- 5. the API server sheds
SHED_FLAGS = (
    "--enable-priority-and-fairness=false",
    "--max-requests-inflight=3",
    "--max-mutating-requests-inflight=1",
)
SHED_MAX_SECONDS = 90.0


def _retries(rig: Rig) -> float:
    assert rig.operator is not None
    return sum(bench.counters(rig.operator.metrics_url, "shoal_reconcile_retries_total").values())


def api_sheds_load(rig: Rig, size: Size, pressure_s: float) -> dict[str, Any]:
    """The API server restarted with tiny in-flight limits answers 429 to whoever
    exceeds them; a wave runs under that pressure, then the limits are lifted: the
    operator backs off, loses nothing and converges."""
    fleet = ready_fleet(rig, size)
    retries_before = _retries(rig)
    began_events = len(audit_events(rig.audit_log))
    local.kill(rig.cluster, "kube-apiserver")
    local.start(rig.cluster, "kube-apiserver", SHED_FLAGS)
    pressed = time.monotonic()
    fleet = rescaled(fleet, 5)
    join = in_background(lambda: rig.apply(fleet))
    # The pressure lasts pressure_s, and on until one of the operator's passes was
    # refused (a slow machine may spend the first seconds starting the API server and
    # reconnecting the watches), at most SHED_MAX_SECONDS.
    time.sleep(pressure_s)
    while _retries(rig) == retries_before and time.monotonic() - pressed < SHED_MAX_SECONDS:
        time.sleep(0.5)
    pressed_s = time.monotonic() - pressed
    local.kill(rig.cluster, "kube-apiserver")
    local.start(rig.cluster, "kube-apiserver")
    lifted = time.monotonic()
    join()
    rig.converge(fleet)
    converged_s = time.monotonic() - lifted
    events = audit_events(rig.audit_log)[began_events:]
    throttled = sum(1 for e in events if (e.get("responseStatus") or {}).get("code") == 429)
    retries = _retries(rig) - retries_before
    assert retries > 0, f"no pass failed in {pressed_s:.0f} s of pressure: the limits did not bite"
    writes, passes = rig.noop_writes()
    assert not writes, f"{len(writes)} writes in a no-op resync ({passes} passes): {writes}"
    return {
        "models": size.models,
        "pressure_s": round(pressed_s, 1),
        "operator_writes_refused_429": throttled,
        "operator_retries": round(retries),
        "converged_after_lifted_s": round(converged_s, 1),
        "noop_writes": len(writes),
    }


# ------------------------------------------------------ 6. a tenant namespace deleted
def namespace_deleted(rig: Rig, size: Size) -> dict[str, Any]:
    """Delete a tenant namespace that holds models while the operator runs: nothing
    blocks the deletion, and the pool's status no longer counts it or its models."""
    fleet = ready_fleet(rig, size)
    victim = fleet[0]["metadata"]["namespace"]
    pool = fleet[0]["spec"]["pool"]
    inside = sum(1 for d in fleet if d["metadata"]["namespace"] == victim)
    remaining = [d for d in fleet if d["metadata"]["namespace"] != victim]
    left_in_pool = sum(1 for d in remaining if d["spec"]["pool"] == pool)
    with rig.http() as http:
        http.delete(f"/api/v1/namespaces/{victim}").raise_for_status()
        began = time.monotonic()
        while http.get(f"/api/v1/namespaces/{victim}").status_code != 404:
            assert time.monotonic() - began < 120, f"namespace {victim} still there after 120 s"
            time.sleep(0.5)
        gone_s = time.monotonic() - began

        def pool_status() -> dict[str, Any]:
            path = f"{bench.GROUP_PATH}/tenantpools/{pool}"
            return dict(http.get(path).raise_for_status().json().get("status") or {})

        while True:
            status = pool_status()
            if victim not in status.get("admittedNamespaces", []) and (
                status.get("models") == left_in_pool
            ):
                break
            assert time.monotonic() - began < 120, f"pool status still {status}"
            time.sleep(0.5)
        corrected_s = time.monotonic() - began
        # Bring the namespace back for whatever runs next; its models are gone.
        http.post("/api/v1/namespaces", json={"metadata": {"name": victim}}).raise_for_status()
    rig.converge(remaining)
    writes, passes = rig.noop_writes()
    assert not writes, f"{len(writes)} writes in a no-op resync ({passes} passes): {writes}"
    return {
        "models_in_namespace": inside,
        "namespace_gone_s": round(gone_s, 1),
        "pool_status_corrected_s": round(corrected_s, 1),
        "noop_writes": len(writes),
    }


# ------------------------------------------------------------ 0. leader failover
LEASE_NAMESPACE = "shoal-system"


def _holder(http: httpx.Client) -> str | None:
    path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{LEASE_NAME}"
    response = http.get(path)
    if response.status_code == 404:
        return None
    return (response.raise_for_status().json().get("spec") or {}).get("holderIdentity")


def leader_killed(rig: Rig, size: Size, seed: int) -> dict[str, Any]:
    """Two replicas with leader election; kill -9 the leader at a random point of a
    wave that creates the fleet: the follower takes the Lease over within the lease
    duration and converges the fleet exactly."""
    rng = random.Random(seed)
    rig.stop()
    # A wave: every model changes (or is created, if the fleet is new), others go.
    fleet = size.fleet(max_replicas=3)
    names = [f"shoal-operator-chaos-{seed}-{side}" for side in ("a", "b")]

    def settings(name: str) -> dict[str, str]:
        return {"SHOAL_LEADER_ELECTION_NAMESPACE": LEASE_NAMESPACE, "POD_NAME": name}

    with rig.http() as http:
        leader = rig.start_operator(settings(names[0]))
        while _holder(http) != names[0]:
            time.sleep(0.2)
        rig.start_operator(settings(names[1]))
        join = in_background(lambda: rig.reset(fleet))
        time.sleep(rng.uniform(0.0, MIN_WAVE_S))
        os.kill(leader.pid, signal.SIGKILL)
        killed = time.monotonic()
        while _holder(http) != names[1]:
            assert time.monotonic() - killed < 3 * LEASE_SECONDS, "no takeover"
            time.sleep(0.2)
        takeover_s = time.monotonic() - killed
        join()
    figures = settled(rig, fleet, since=killed)
    rig.stop()  # the next scenario starts a single operator of its own
    return {
        "models": size.models,
        "lease_duration_s": LEASE_SECONDS,
        "takeover_s": round(takeover_s, 1),
        **figures,
    }


# ------------------------------------------------------------ 7. upgrade in place
REPO = Path(__file__).resolve().parent.parent.parent


def _previous_tree(revision: str, into: Path) -> str:
    """The operator package, CRDs and admission policy of ``revision``, unpacked into
    ``into``; returns the commit."""
    commit = subprocess.run(
        ["git", "-C", str(REPO), "rev-parse", "--verify", f"{revision}^{{commit}}"],
        check=True, capture_output=True, text=True,
    ).stdout.strip()  # fmt: skip
    into.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", commit, "operator", "crds", "manifests/admission"],
        check=True, capture_output=True,
    ).stdout  # fmt: skip
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return commit


def _rendered_templates(fleet: list[dict[str, Any]], package_root: Path) -> dict[str, Any]:
    """Pod templates by model as the ``shoal`` package under ``package_root`` renders."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package_root), str(REPO)]))
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.chaos.templates"],
        input=json.dumps(fleet), env=env, cwd=REPO, check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    templates: dict[str, Any] = json.loads(out)
    return templates


def _live_templates(rig: Rig, fleet: list[dict[str, Any]]) -> dict[str, Any]:
    with rig.http() as http:
        return {
            d["metadata"]["name"]: http.get(
                f"/apis/apps/v1/namespaces/{d['metadata']['namespace']}/deployments/"
                f"{d['metadata']['name']}"
            )
            .raise_for_status()
            .json()["spec"]["template"]
            for d in fleet
        }


def _install_crds(rig: Rig, root: Path) -> None:
    kubectl = kubectl_for(rig.cluster.kubeconfig)
    crds = sorted(str(p) for p in (root / "crds").glob("*.shoal.dev.yaml"))
    kubectl("apply", "--server-side", "--force-conflicts", *[f"--filename={f}" for f in crds])
    policy = root / "manifests" / "admission" / "admission-policy.yaml"
    kubectl("apply", "--server-side", "--force-conflicts", f"--filename={policy}")


def upgraded_in_place(rig: Rig, size: Size, revision: str = "HEAD~1") -> dict[str, Any]:
    """The fleet converged by ``revision``'s operator and CRDs, then the current CRDs
    applied and the current operator started in its place (a chart upgrade's rolling
    update): a model's pods roll exactly when the two versions render its pod template
    differently, and the current operator then writes nothing in a no-op resync."""
    previous = rig.work / "previous"
    commit = _previous_tree(revision, previous)
    fleet = size.fleet()
    wanted = {
        name
        for name, template in _rendered_templates(fleet, previous / "operator").items()
        if template != _rendered_templates(fleet, REPO / "operator")[name]
    }
    rig.stop()
    _install_crds(rig, previous)
    rig.start_operator({"PYTHONPATH": str(previous / "operator")})
    rig.reset(fleet)
    rig.converge(fleet, autoscaled=False)  # the previous operator may predate it
    before = _live_templates(rig, fleet)
    rig.stop()
    install_crds(kubectl_for(rig.cluster.kubeconfig))
    rig.start_operator()
    figures = settled(rig, fleet)
    after = _live_templates(rig, fleet)
    rolled = {name for name in before if before[name] != after[name]}
    assert rolled == wanted, (
        f"rolled {sorted(rolled)[:5]} ({len(rolled)}), "
        f"the render changed for {sorted(wanted)[:5]} ({len(wanted)})"
    )
    return {
        "from_commit": commit[:12],
        "models": size.models,
        "rollouts": len(rolled),
        "templates_changed": len(wanted),
        **figures,
    }
