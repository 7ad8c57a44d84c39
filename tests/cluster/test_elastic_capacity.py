"""Elastic capacity on the real control plane with real Kueue (its controller and
webhooks, e2e/kueue.py), KWOK GPU nodes and the real HPA controller: a pool borrows a
cohort member's idle GPUs, the lender takes them back by preemption, borrowers share
idle GPUs by weight, and a capacity window changes a pool's quota at its start.

Figures (seconds to reclaim, replicas gained, shares) are printed and written to
$SHOAL_RESULTS_DIR/elastic_capacity.json when that is set.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from benchmarks.summary import WINDOW_PASS_SECONDS
from e2e.cluster.target import Target
from e2e.install import Kubectl
from e2e.kueue import running_kueue, version
from e2e.operator import OperatorProcess
from kubernetes import client

from shoal.api.constants import FIELD_MANAGER, MODEL_LABEL
from shoal.kube.client import Kube
from shoal.kube.drift import digest, last_applied
from tests.conftest import fresh_namespace
from tests.support.passes import operator_counters, wait_for_passes
from tests.support.shoal_objects import GROUP, VERSION, Shoal, condition, inference_model
from tests.support.wait import wait_for

QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GATE = "kueue.x-k8s.io/admission"
RECLAIM_TARGET_SECONDS = 60.0
DEDICATED = {
    "nodeSelector": {"shoal.dev/node-group": "dedicated-gpu"},
    "tolerations": [
        {"key": "shoal.dev/dedicated", "operator": "Equal", "value": "true", "effect": "NoSchedule"}
    ],
}
SHARED = {"nodeSelector": {"shoal.dev/node-group": "shared-gpu"}}


@pytest.fixture(scope="module")
def kueue(
    kubectl: Kubectl, kube_target: Target, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    with running_kueue(kubectl, kube_target.kubeconfig, tmp_path_factory.mktemp("kueue")):
        yield


def elastic_pool(
    name: str,
    namespace: str,
    placement: dict[str, Any],
    capacity: dict[str, Any],
    isolation: str = "Shared",
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantPool",
        "metadata": {"name": name},
        "spec": {
            "isolation": isolation,
            "tenants": {"namespaces": [namespace]},
            "placement": placement,
            "quota": {"gpus": 16},
            "capacity": capacity,
        },
    }


def model(name: str, pool: str, replicas: int) -> dict[str, Any]:
    body = inference_model(name, pool, min_replicas=replicas)
    body["spec"]["scaling"]["maxReplicas"] = 16
    return body


def pods(core: client.CoreV1Api, namespace: str, name: str) -> list[client.V1Pod]:
    found = core.list_namespaced_pod(namespace, label_selector=f"shoal.dev/model={name}").items
    return [p for p in found if p.metadata.deletion_timestamp is None]


def running(core: client.CoreV1Api, namespace: str, name: str) -> list[client.V1Pod]:
    """The model's pods Kueue admitted that run on a node."""
    return [
        p
        for p in pods(core, namespace, name)
        if not p.spec.scheduling_gates and p.spec.node_name and p.status.phase == "Running"
    ]


def gated(core: client.CoreV1Api, namespace: str, name: str) -> list[client.V1Pod]:
    return [
        p
        for p in pods(core, namespace, name)
        if any(g.name == GATE for g in p.spec.scheduling_gates or [])
    ]


def node_group(core: client.CoreV1Api, pod: client.V1Pod) -> str:
    node = core.read_node(str(pod.spec.node_name))
    return str((node.metadata.labels or {})["shoal.dev/node-group"])


def pool_gauge(pool: str, isolation: str, kind: str) -> str:
    """A series of the operator's shoal_pool_gpus, as its exposition names it."""
    return f'shoal_pool_gpus{{isolation="{isolation}",kind="{kind}",tenantpool="{pool}"}}'


def kueue_objects(
    api: client.ApiClient, plural: str, namespace: str | None = None
) -> list[dict[str, Any]]:
    custom = client.CustomObjectsApi(api)
    if namespace is None:
        found = custom.list_cluster_custom_object("kueue.x-k8s.io", "v1beta2", plural)
    else:
        found = custom.list_namespaced_custom_object("kueue.x-k8s.io", "v1beta2", namespace, plural)
    return list(cast("dict[str, Any]", found)["items"])


def pool_capacity(shoal: Shoal, name: str) -> dict[str, Any]:
    return (shoal.get("TenantPool", name).get("status") or {}).get("capacity") or {}


def wait_mode(shoal: Shoal, name: str, mode: str) -> dict[str, Any]:
    return wait_for(
        f"TenantPool {name} in {mode} mode",
        lambda: pool_capacity(shoal, name),
        lambda c: c.get("mode") == mode,
        timeout=60,
    )


def pool_writes_over_two_rounds(operator: OperatorProcess) -> dict[str, float]:
    """The operator's writes to Kueue's objects and to pools while two more resync
    rounds pass over every pool: none, once nothing changes."""
    before = operator_counters(operator.metrics_url)
    after = wait_for_passes(operator.metrics_url, rounds=2, kinds=("TenantPool",))
    kinds = ("ResourceFlavor", "ClusterQueue", "LocalQueue", "TenantPool")
    return {
        k: after[k] - before.get(k, 0)
        for k in after
        if k.startswith("shoal_api_writes_total{")
        and any(kind in k for kind in kinds)
        and after[k] != before.get(k, 0)
    }


# The capacity-window scenarios run side by side and record into one file.
_RECORD_LOCK = threading.Lock()


def record(figures: dict[str, Any]) -> None:
    print(json.dumps(figures, indent=2))
    out = os.environ.get("SHOAL_RESULTS_DIR")
    if out:
        path = Path(out) / "elastic_capacity.json"
        with _RECORD_LOCK:
            existing = json.loads(path.read_text()) if path.exists() else {}
            path.write_text(json.dumps({**existing, **figures}, indent=2) + "\n")


class Settled:
    """True once the same observation has been seen for ``seconds`` without a change
    (fair sharing reaches its shares by preemption, through intermediate ones)."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.first_shares: tuple[int, ...] | None = None
        self._last: tuple[int, ...] | None = None
        self._since = 0.0

    def __call__(self, shares: tuple[int, ...]) -> bool:
        now = time.monotonic()
        if self.first_shares is None and sum(shares) > 0:
            self.first_shares = shares
        if shares != self._last:
            self._last, self._since = shares, now
        return now - self._since >= self.seconds


# How long shares must hold unchanged to count as settled: Kueue preempts towards fair
# shares over several scheduling cycles, each well under this, so shares that hold
# this long (and are within a GPU of the weights) are where it stopped.
SETTLED_SECONDS = 10.0


@pytest.fixture
def second_namespace(core: client.CoreV1Api) -> Iterator[str]:
    name = f"t-elastic-{uuid.uuid4().hex[:5]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name, propagation_policy="Background")


def test_a_pool_borrows_idle_gpus_and_the_lender_takes_them_back(
    kueue: None,
    api: client.ApiClient,
    core: client.CoreV1Api,
    operator: OperatorProcess,
    namespace: str,
    second_namespace: str,
    gpu_nodes: list[client.V1Node],
) -> None:
    shoal = Shoal(api)
    cohort = f"c-{uuid.uuid4().hex[:6]}"
    lender, borrower = f"lender-{cohort}", f"borrower-{cohort}"
    shoal.create(
        elastic_pool(
            lender,
            namespace,
            DEDICATED,
            {"gpus": 4, "cohort": cohort},
            isolation="Dedicated",
        )
    )
    shoal.create(elastic_pool(borrower, second_namespace, SHARED, {"gpus": 2, "cohort": cohort}))
    try:
        wait_mode(shoal, lender, "Kueue")
        wait_mode(shoal, borrower, "Kueue")
        # A ClusterQueue Kueue has just been given can read inactive for a moment (its
        # flavor not yet in Kueue's cache), which the pool reports as it is; it settles.
        wait_for(
            "the lender's ElasticCapacity to settle",
            lambda: condition(shoal.get("TenantPool", lender), "ElasticCapacity")["status"],
            lambda status: status in ("True", "Unknown"),
            timeout=60,
        )
        # The lender serves one replica: three of its four GPUs are idle.
        shoal.create(model("steady", lender, 1), namespace)
        shoal.create(model("bursty", borrower, 2), second_namespace)
        wait_for(
            "each model's first replicas admitted and running",
            lambda: (
                len(running(core, namespace, "steady")),
                len(running(core, second_namespace, "bursty")),
            ),
            lambda counts: counts == (1, 2),
            timeout=120,
        )
        template = client.AppsV1Api(api).read_namespaced_deployment("steady", namespace)
        assert (template.spec.template.metadata.labels or {})[QUEUE_LABEL] == f"shoal-{lender}"
        assert not template.spec.template.spec.node_selector  # the flavor places it
        steady_uid = running(core, namespace, "steady")[0].metadata.uid
        own_uids = {p.metadata.uid for p in running(core, second_namespace, "bursty")}

        # Borrow: the borrower's load rises to 5 replicas; 2 GPUs are its own.
        shoal.patch(
            "InferenceModel", "bursty", {"spec": {"scaling": {"minReplicas": 5}}}, second_namespace
        )
        started = time.monotonic()
        wait_for(
            "the borrower to run 5 replicas",
            lambda: len(running(core, second_namespace, "bursty")),
            lambda n: n == 5,
            timeout=120,
        )
        borrow_seconds = time.monotonic() - started
        groups = sorted(node_group(core, p) for p in running(core, second_namespace, "bursty"))
        # Borrowed replicas run on the lender's nodes, placed by its flavor.
        borrowed_replicas = groups.count("dedicated-gpu")
        assert groups == ["dedicated-gpu"] * 3 + ["shared-gpu"] * 2
        figures = wait_for(
            "the pools' status to show the loan",
            lambda: (pool_capacity(shoal, borrower), pool_capacity(shoal, lender)),
            lambda c: c[0].get("borrowedGpus") == 3 and c[1].get("lentGpus") == 3,
            timeout=60,
        )
        assert figures[0]["inUseGpus"] == 5
        assert figures[1]["inUseGpus"] == 1
        # The operator's gauges say the same, for the dashboard and the reclaim alert.
        lent = pool_gauge(lender, "Dedicated", "lent")
        borrowed = pool_gauge(borrower, "Shared", "borrowed")
        gauges = wait_for(
            "the operator's pool gauges to show the loan",
            lambda: operator_counters(operator.metrics_url),
            lambda c: c.get(lent) == 3 and c.get(borrowed) == 3,
            timeout=60,
        )
        assert gauges[pool_gauge(lender, "Dedicated", "nominal")] == 4
        # Nothing changes now: passes over the pools rewrite none of Kueue's objects
        # (whatever Kueue's webhooks default in them) and no pool's status.
        rewritten = pool_writes_over_two_rounds(operator)
        assert not rewritten, f"writes while nothing changed: {rewritten}"

        # Reclaim: the lender's load returns. Its nominal 4 GPUs come back by
        # preemption of the borrowed replicas, never of the borrower's own.
        shoal.patch(
            "InferenceModel", "steady", {"spec": {"scaling": {"minReplicas": 4}}}, namespace
        )
        started = time.monotonic()
        wait_for(
            "the lender to run its 4 replicas",
            lambda: len(running(core, namespace, "steady")),
            lambda n: n == 4,
            timeout=RECLAIM_TARGET_SECONDS * 2,
        )
        reclaim_seconds = time.monotonic() - started
        lender_kept = steady_uid in {p.metadata.uid for p in running(core, namespace, "steady")}
        remaining = {p.metadata.uid for p in running(core, second_namespace, "bursty")}
        waiting = wait_for(
            "the borrowed replicas to wait for quota again",
            lambda: gated(core, second_namespace, "bursty"),
            lambda found: len(found) == 3,
            timeout=60,
        )
        record(
            {
                "kueue_version": version(),
                "borrow": {
                    "replicas_gained": borrowed_replicas,
                    "seconds_to_borrowed_replicas_running": round(borrow_seconds, 1),
                },
                "reclaim": {
                    "seconds": round(reclaim_seconds, 1),
                    "target_seconds": RECLAIM_TARGET_SECONDS,
                    "met": reclaim_seconds <= RECLAIM_TARGET_SECONDS,
                    "lender_replica_preempted": not lender_kept,
                    "borrower_own_replicas_preempted": len(own_uids - remaining),
                    "borrowed_replicas_waiting": len(waiting),
                },
            }
        )
        assert lender_kept, "the lender's own replica was preempted"
        assert own_uids == remaining, "the borrower's own replicas were preempted"
        assert reclaim_seconds <= RECLAIM_TARGET_SECONDS
        status = wait_for(
            "the borrower's status to say replicas wait for quota",
            lambda: shoal.get("InferenceModel", "bursty", second_namespace).get("status") or {},
            lambda s: (s.get("replicaStates") or {}).get("WaitingForQuota") == 3,
            timeout=60,
        )
        wait_for(
            "the borrower's pool to count them",
            lambda: pool_capacity(shoal, borrower),
            lambda c: c.get("waitingReplicas") == 3 and c.get("borrowedGpus") == 0,
            timeout=60,
        )
        assert status["replicaStates"]["WaitingForQuota"] == 3

        # Unset the borrower's capacity: its Kueue objects go, its pods stop naming a
        # queue, and it is back to hard quotas.
        shoal.patch("TenantPool", borrower, {"spec": {"capacity": None}})
        wait_mode(shoal, borrower, "HardQuota")
        wait_for(
            "the borrower's ClusterQueue and LocalQueue to go",
            lambda: (
                [q["metadata"]["name"] for q in kueue_objects(api, "clusterqueues")],
                kueue_objects(api, "localqueues", second_namespace),
            ),
            lambda found: f"shoal-{borrower}" not in found[0] and not found[1],
            timeout=60,
        )
        wait_for(
            "the borrower's pods to name no queue",
            lambda: client.AppsV1Api(api).read_namespaced_deployment("bursty", second_namespace),
            lambda d: QUEUE_LABEL not in (d.spec.template.metadata.labels or {}),
            timeout=60,
        )
    finally:
        shoal.delete("InferenceModel", "steady", namespace)
        shoal.delete("InferenceModel", "bursty", second_namespace)
        shoal.delete("TenantPool", lender)
        shoal.delete("TenantPool", borrower)


def test_borrowers_share_idle_gpus_by_weight(
    kueue: None,
    api: client.ApiClient,
    core: client.CoreV1Api,
    operator: OperatorProcess,
    namespace: str,
    second_namespace: str,
    gpu_nodes: list[client.V1Node],
) -> None:
    """Two borrowers of weights 1 and 3, each wanting 8 replicas, compete for a lender's
    8 idle GPUs: they end up with 2 and 6, within one GPU."""
    shoal = Shoal(api)
    cohort = f"w-{uuid.uuid4().hex[:6]}"
    lender, light, heavy = f"idle-{cohort}", f"light-{cohort}", f"heavy-{cohort}"
    with_third = f"t-elastic-{uuid.uuid4().hex[:5]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=with_third)))
    shoal.create(
        elastic_pool(lender, with_third, DEDICATED, {"gpus": 8, "cohort": cohort}, "Dedicated")
    )
    shoal.create(elastic_pool(light, namespace, SHARED, {"gpus": 0, "cohort": cohort, "weight": 1}))
    shoal.create(
        elastic_pool(heavy, second_namespace, SHARED, {"gpus": 0, "cohort": cohort, "weight": 3})
    )
    try:
        for pool in (lender, light, heavy):
            wait_mode(shoal, pool, "Kueue")
        shoal.create(model("light", light, 8), namespace)
        shoal.create(model("heavy", heavy, 8), second_namespace)
        started = time.monotonic()
        settled = Settled(seconds=SETTLED_SECONDS)
        shares = wait_for(
            f"the lender's 8 GPUs shared out by weight, unchanged for {SETTLED_SECONDS:g} s",
            lambda: (
                len(running(core, namespace, "light")),
                len(running(core, second_namespace, "heavy")),
            ),
            lambda s: settled(s) and sum(s) == 8 and abs(s[0] - 2) <= 1 and abs(s[1] - 6) <= 1,
            timeout=240,
        )
        first_seen = settled.first_shares
        record(
            {
                "weights": {
                    "weights": [1, 3],
                    "idle_gpus": 8,
                    "shares": list(shares),
                    "expected": [2, 6],
                    "first_shares_seen": list(first_seen) if first_seen else None,
                    "seconds_to_settle": round(time.monotonic() - started - SETTLED_SECONDS, 1),
                }
            }
        )
    finally:
        shoal.delete("InferenceModel", "light", namespace)
        shoal.delete("InferenceModel", "heavy", second_namespace)
        for pool in (lender, light, heavy):
            shoal.delete("TenantPool", pool)
        core.delete_namespace(with_third, propagation_policy="Background")


def next_whole_minute(at_least: float) -> dt.datetime:
    """The first whole minute (UTC) at least ``at_least`` seconds from now."""
    soonest = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=at_least)
    minute = soonest.replace(second=0, microsecond=0)
    return minute if minute >= soonest else minute + dt.timedelta(minutes=1)


def serve(
    shoal: Shoal, core: client.CoreV1Api, namespace: str, pool: str, name: str, replicas: int
) -> None:
    """Create model ``name`` with a warm pool of ``replicas`` in ``pool``; returns once
    Kueue has admitted them all and they run."""
    shoal.create(model(name, pool, replicas), namespace)
    wait_running(core, namespace, name, replicas, "admitted and running")


def wait_running(
    core: client.CoreV1Api, namespace: str, name: str, replicas: int, what: str
) -> None:
    wait_for(
        f"the {name} model's {replicas} replicas {what}",
        lambda: len(running(core, namespace, name)),
        lambda n: n == replicas,
        timeout=120,
    )


# How far ahead a window's start must be when it is set: enough for the spec change to
# be handled (a pass takes about a second) and the state before the window read; a
# window's start is a cron minute, so the wait is this plus up to a minute.
WINDOW_LEAD_SECONDS = 8.0
# A window just long enough for what happens inside it (a few seconds, see
# benchmarks/results/elastic_capacity.json), several times over; its end is awaited.
SHORT_WINDOW_SECONDS = 20


def add_window(
    shoal: Shoal, pool: str, capacity: dict[str, Any], duration: str, gpus: int = 2
) -> dt.datetime:
    """Give ``pool`` (with ``capacity`` so far) a window of ``gpus`` opening at the next
    whole minute at least WINDOW_LEAD_SECONDS away; returns its start (not yet come)."""
    opens = next_whole_minute(at_least=WINDOW_LEAD_SECONDS)
    window = {
        "name": "night",
        "start": f"{opens.minute} {opens.hour} * * *",
        "duration": duration,
        "gpus": gpus,
    }
    shoal.patch("TenantPool", pool, {"spec": {"capacity": {**capacity, "windows": [window]}}})
    assert seconds_since(opens) < 0, "the window opened before it was set: no boundary"
    return opens


def seconds_since(moment: dt.datetime) -> float:
    return (dt.datetime.now(dt.UTC) - moment).total_seconds()


def own_gpu_quota(api: client.ApiClient, pool: str) -> str:
    queue = next(q for q in kueue_objects(api, "clusterqueues") if q["metadata"]["name"] == pool)
    flavor = queue["spec"]["resourceGroups"][0]["flavors"][0]
    gpu = next(r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu")
    return str(gpu["nominalQuota"])


def own_queue(api: client.ApiClient, pool: str) -> dict[str, Any]:
    found = [q for q in kueue_objects(api, "clusterqueues") if q["metadata"]["name"] == pool]
    return found[0] if found else {}


def own_flavor_gpu(queue: dict[str, Any]) -> dict[str, Any]:
    flavor = queue["spec"]["resourceGroups"][0]["flavors"][0]
    return dict(next(r for r in flavor["resources"] if r["name"] == "nvidia.com/gpu"))


def test_each_capacity_field_unset_leaves_the_queue_and_a_withdrawn_namespace_its_queue(
    kueue: None,
    api: client.ApiClient,
    operator: OperatorProcess,
    namespace: str,
    second_namespace: str,
) -> None:
    """Every field of spec.capacity, set on real Kueue and then unset one by one: the
    ClusterQueue drops what the field put there (after Kueue's webhooks defaulted it),
    the status follows, a namespace the pool stops admitting loses its LocalQueue, and
    then passes over the pool rewrite nothing."""
    shoal = Shoal(api)
    name = f"unset-{uuid.uuid4().hex[:6]}"
    queue = f"shoal-{name}"
    # Opens every minute and stays open an hour: open now, whatever the time.
    always = {"name": "always", "start": "* * * * *", "duration": "1h", "gpus": 3}
    capacity = {
        "gpus": 4,
        "cohort": f"c-{name}",
        "weight": 3,
        "borrowingLimit": 2,
        "lendingLimit": 1,
        "windows": [always],
    }
    body = elastic_pool(name, namespace, SHARED, capacity)
    body["spec"]["tenants"]["namespaces"] = [namespace, second_namespace]
    shoal.create(body)
    try:
        wait_mode(shoal, name, "Kueue")
        set_queue = wait_for(
            "the ClusterQueue with every field set",
            lambda: own_queue(api, queue),
            lambda q: bool(q) and own_flavor_gpu(q).get("nominalQuota") == "3",
            timeout=60,
        )
        assert own_flavor_gpu(set_queue) == {
            "name": "nvidia.com/gpu",
            "nominalQuota": "3",
            "borrowingLimit": "2",
            "lendingLimit": "1",
        }
        assert set_queue["spec"]["cohortName"] == f"c-{name}"
        assert set_queue["spec"]["fairSharing"]["weight"] == "3"
        assert pool_capacity(shoal, name)["window"] == "always"
        # The pass applies the ClusterQueue before the tenants' LocalQueues.
        wait_for(
            "the second namespace's LocalQueue",
            lambda: kueue_objects(api, "localqueues", second_namespace),
            lambda found: len(found) == 1,
            timeout=30,
        )

        def unset(field: str, holds: Callable[[dict[str, Any]], bool]) -> None:
            shoal.patch("TenantPool", name, {"spec": {"capacity": {field: None}}})
            wait_for(
                f"the ClusterQueue without capacity.{field}",
                lambda: own_queue(api, queue),
                holds,
                timeout=60,
            )

        unset("windows", lambda q: own_flavor_gpu(q)["nominalQuota"] == "4")
        wait_for(
            "the pool's status without a window",
            lambda: pool_capacity(shoal, name),
            lambda c: c.get("nominalGpus") == 4 and "window" not in c,
            timeout=60,
        )
        unset("lendingLimit", lambda q: "lendingLimit" not in own_flavor_gpu(q))
        unset("borrowingLimit", lambda q: "borrowingLimit" not in own_flavor_gpu(q))
        unset("weight", lambda q: q["spec"].get("fairSharing", {}).get("weight") == "1")
        unset("cohort", lambda q: "cohortName" not in q["spec"] and "fairSharing" not in q["spec"])

        shoal.patch("TenantPool", name, {"spec": {"tenants": {"namespaces": [namespace]}}})
        wait_for(
            "the withdrawn namespace's LocalQueue to go",
            lambda: kueue_objects(api, "localqueues", second_namespace),
            lambda found: not found,
            timeout=60,
        )
        assert len(kueue_objects(api, "localqueues", namespace)) == 1
        # The pass deletes the LocalQueue before it writes the pool's status: that
        # write is part of the change, so the count starts once the status shows it.
        wait_for(
            "the pool's status to admit only the first namespace",
            lambda: shoal.get("TenantPool", name),
            lambda p: (
                (p.get("status") or {}).get("admittedNamespaces") == [namespace]
                and (p.get("status") or {}).get("observedGeneration") == p["metadata"]["generation"]
            ),
            timeout=60,
        )
        rewritten = pool_writes_over_two_rounds(operator)
        assert not rewritten, f"writes while nothing changed: {rewritten}"
    finally:
        shoal.delete("TenantPool", name)


# ------------------------------------------------- shoal render is what the operator writes
# ``shoal render`` previews exactly what the operator writes, for a model whose plan
# depends on what only the cluster knows: a scheduled window open now (its floor), an
# elastic pool on real Kueue (the queue label and the pool's GPU ceiling) and predictive
# scaling. The preview runs the real CLI with the facts the operator read given as
# flags; each child the operator applied carries the digest of the object it applied,
# which must be the digest of the preview's object.


def _documents(namespace: str, pool: str) -> list[dict[str, Any]]:
    # 3 GPUs now: the model's HPA stops at 3 replicas, not its 8.
    pool_doc = elastic_pool(pool, namespace, SHARED, {"gpus": 3})
    model = inference_model("planned", pool, min_replicas=1)
    model["metadata"]["namespace"] = namespace
    model["spec"]["scaling"].update(
        {
            "maxReplicas": 8,
            # Open at every minute for an hour: open whenever the test looks.
            "schedules": [{"name": "always", "start": "* * * * *", "duration": "1h",
                           "minReplicas": 2}],
            "predictive": {"enabled": True},
        }
    )  # fmt: skip
    return [pool_doc, model]


def _render(docs: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    """The real CLI, with the facts the operator read: now, Kueue served."""
    source = tmp_path / "resources.yaml"
    source.write_text(yaml.safe_dump_all(docs))
    at = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    shoal = Path(sys.executable).parent / "shoal"
    out = subprocess.run(
        [str(shoal), "render", "-f", str(source), "--at", at, "--kueue"],
        check=True, capture_output=True, text=True,
    ).stdout  # fmt: skip
    assert out.startswith(f"# time: {at} (--at)\n"), out[:300]
    return [d for d in yaml.safe_load_all(out) if d]


def test_the_preview_is_what_the_operator_writes(
    kueue: None,
    api: client.ApiClient,
    operator: OperatorProcess,
    namespace: str,
    tmp_path: Path,
) -> None:
    shoal = Shoal(api)
    pool = f"planned-{uuid.uuid4().hex[:6]}"
    docs = _documents(namespace, pool)
    try:
        shoal.create(docs[0])
        shoal.create(docs[1], namespace)
        live_model = wait_for(
            "the model to be served",
            lambda: shoal.get("InferenceModel", "planned", namespace),
            lambda m: (
                (condition(m, "Ready") or {}).get("reason") is not None
                and (m.get("status") or {}).get("warmPool") == 2
            ),
            timeout=60,
        )
        # The preview cannot know the model's uid (its owner references name it): the
        # test gives it, as the only fact of identity.
        docs[1]["metadata"]["uid"] = live_model["metadata"]["uid"]
        preview = [
            o
            for o in _render(docs, tmp_path)
            if (o["metadata"].get("labels") or {}).get(MODEL_LABEL) == "planned"
            and o["metadata"].get("namespace") == namespace
        ]
        kinds = {o["kind"] for o in preview}
        assert {"ConfigMap", "Deployment", "Service", "HorizontalPodAutoscaler"} <= kinds
        hpa = next(o for o in preview if o["kind"] == "HorizontalPodAutoscaler")
        # The plan's decisions, visible in the preview: the window's floor, the pool's
        # GPU ceiling, and the Kueue queue on the pods.
        assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 3)
        deployment = next(o for o in preview if o["kind"] == "Deployment")
        labels = deployment["spec"]["template"]["metadata"]["labels"]
        assert labels.get("kueue.x-k8s.io/queue-name") == f"shoal-{pool}"
        kube = Kube(api)
        for obj in preview:
            meta = obj["metadata"]
            live = kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta["namespace"])
            assert live is not None, f"{obj['kind']} {obj['metadata']['name']} not written"
            assert last_applied(live) == digest(obj), (
                f"{obj['kind']} {obj['metadata']['name']}: the operator applied another "
                "object than the preview shows"
            )
    finally:
        shoal.delete("InferenceModel", "planned", namespace)
        shoal.delete("TenantPool", pool)


# ------------------------------------------------------------------- capacity windows
# A window's start is a cron minute, so each window test waits up to a minute for its
# boundary, and most of the rest for Kueue and the HPA: the four scenarios run side by
# side (each in namespaces and pools of its own, on the session's operator) and each
# test reports its own. They come last in the module: the tests above count the
# operator's writes while nothing changes, which the scenarios would disturb.
Scenario = Callable[[client.ApiClient, client.CoreV1Api, str, str], None]


def _scenario(run: Scenario, api: client.ApiClient, core: client.CoreV1Api) -> None:
    first, second = (fresh_namespace(core, f"{run.__name__}-{n}") for n in ("a", "b"))
    try:
        run(api, core, first, second)
    finally:
        for name in (first, second):
            core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture(scope="module")
def windows(
    kueue: None, api: client.ApiClient, core: client.CoreV1Api, operator: OperatorProcess
) -> Iterator[dict[Scenario, Future[None]]]:
    scenarios = (_lowers, _grown, _no_gpus, _cohort)
    with ThreadPoolExecutor(len(scenarios)) as runner:
        yield {s: runner.submit(_scenario, s, api, core) for s in scenarios}


def _lowers(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, second_namespace: str
) -> None:
    """A pool of 4 GPUs (no cohort) with two models, ``steady`` (warm pool 1) and
    ``nightly`` (warm pool 3), and a short window of 2 GPUs: at the window's start
    the ClusterQueue's quota drops to 2 within a pass, each model's HPA stops at its
    share (the window's GPUs less the other's warm pool: 1 each), and the HPA scales
    ``nightly``'s 2 replicas above it down (graceful deletion by the ReplicaSet
    controller), none preempted by Kueue, ``steady`` and one of ``nightly``'s untouched;
    when the window closes, the 4 GPUs and replicas come back."""
    shoal = Shoal(api)
    autoscaling = client.AutoscalingV2Api(api)
    name = f"window-{uuid.uuid4().hex[:6]}"
    shoal.create(elastic_pool(name, namespace, SHARED, {"gpus": 4}))
    try:
        wait_mode(shoal, name, "Kueue")
        serve(shoal, core, namespace, name, "steady", 1)
        serve(shoal, core, namespace, name, "nightly", 3)
        # Room for the quota, both HPAs and the drain (4.6 s measured) before it closes.
        window_seconds = 1.5 * SHORT_WINDOW_SECONDS
        opens = add_window(shoal, name, {"gpus": 4}, duration=f"{window_seconds:g}s")
        assert own_gpu_quota(api, f"shoal-{name}") == "4"
        hpa = autoscaling.read_namespaced_horizontal_pod_autoscaler("nightly", namespace)
        # The pool's 4 GPUs less steady's warm pool of 1.
        assert (hpa.spec.min_replicas, hpa.spec.max_replicas) == (3, 3)
        before = {p.metadata.uid for p in running(core, namespace, "nightly")}
        steady = {p.metadata.uid for p in running(core, namespace, "steady")}

        time.sleep(max(0.0, -seconds_since(opens)))
        wait_for(
            "the ClusterQueue's quota to drop to the window's 2 GPUs",
            lambda: own_gpu_quota(api, f"shoal-{name}"),
            lambda quota: quota == "2",
            timeout=30,
        )
        quota_s = seconds_since(opens)
        status = wait_for(
            "the pool's status to name the window",
            lambda: pool_capacity(shoal, name),
            lambda c: c.get("nominalGpus") == 2 and c.get("window") == "night",
            timeout=30,
        )
        for each in ("nightly", "steady"):

            def read(each: str = each) -> client.V2HorizontalPodAutoscaler:
                return autoscaling.read_namespaced_horizontal_pod_autoscaler(each, namespace)

            wait_for(
                f"{each}'s HPA to stop at its share of the window, 1 replica",
                read,
                lambda h: (h.spec.min_replicas, h.spec.max_replicas) == (1, 1),
                timeout=30,
            )
        kept = wait_for(
            "the replicas above the quota to be scaled down",
            lambda: {p.metadata.uid for p in pods(core, namespace, "nightly")},
            lambda uids: len(uids) == 1,
            timeout=90,
        )
        drained_s = seconds_since(opens)
        in_window = {p.metadata.uid for p in pods(core, namespace, "steady")}
        reasons = [
            (e.reason or "", e.message or "")
            for e in core.list_namespaced_event(namespace).items
            if e.last_timestamp is None or e.last_timestamp >= opens
        ]
        preempted = [r for r in reasons if "Preempt" in r[0] or "Evict" in r[0]]
        rescaled = [
            m for r, m in reasons if r == "SuccessfulRescale" and "above Spec.MaxReplicas" in m
        ]
        closed = opens + dt.timedelta(seconds=window_seconds)
        time.sleep(max(0.0, -seconds_since(closed)))
        wait_for(
            "the pool's 4 GPUs back when the window closes",
            lambda: (own_gpu_quota(api, f"shoal-{name}"), pool_capacity(shoal, name)),
            lambda q: q[0] == "4" and q[1].get("nominalGpus") == 4 and "window" not in q[1],
            timeout=30,
        )
        restored_quota_s = seconds_since(closed)
        wait_running(core, namespace, "nightly", 3, "running again")
        restored_s = seconds_since(closed)
        record(
            {
                "window": {
                    "nominal_gpus": [4, 2],
                    "models": 2,
                    "seconds_from_start_to_quota": round(quota_s, 1),
                    "seconds_from_start_to_drained": round(drained_s, 1),
                    "replicas_scaled_down": len(before - kept),
                    "replicas_kept_untouched": len(before & kept) + len(steady & in_window),
                    "replicas_preempted_or_evicted": len(preempted),
                    "seconds_from_close_to_quota": round(restored_quota_s, 1),
                    "seconds_from_close_to_replicas_back": round(restored_s, 1),
                }
            }
        )
        assert status["inUseGpus"] >= 2
        assert kept <= before, "a replica that fit the new quota was replaced"
        assert in_window == steady, "the steady model's replica was touched"
        assert not preempted, f"replicas were preempted or evicted, not drained: {preempted}"
        assert rescaled, f"no HPA scale-down above maxReplicas among {reasons}"
        assert quota_s <= WINDOW_PASS_SECONDS, f"the quota changed {quota_s:.1f} s after the start"
    finally:
        shoal.delete("InferenceModel", "nightly", namespace)
        shoal.delete("InferenceModel", "steady", namespace)
        shoal.delete("TenantPool", name)


def _grown(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, second_namespace: str
) -> None:
    """Two models of a 4-GPU pool (no cohort), each with a warm pool of 1 raised to 2 by
    an open schedule, hold all 4 GPUs. A window of 3: each one's share (3 less the
    other's warm pool of 1) is 2 and would keep all 4 above the quota; together they
    give back the one GPU over it, the first by name on a tie, so 3 keep running and
    none is preempted or evicted."""
    shoal = Shoal(api)
    name = f"grown-{uuid.uuid4().hex[:6]}"
    shoal.create(elastic_pool(name, namespace, SHARED, {"gpus": 4}))
    always = {"name": "always", "start": "0 0 * * *", "duration": "24h", "minReplicas": 2}
    try:
        wait_mode(shoal, name, "Kueue")
        for each in ("alpha", "beta"):
            body = model(each, name, 1)
            body["spec"]["scaling"]["schedules"] = [always]
            shoal.create(body, namespace)
            wait_running(core, namespace, each, 2, "admitted and running")
        before = {
            p.metadata.uid for each in ("alpha", "beta") for p in running(core, namespace, each)
        }
        opens = add_window(shoal, name, {"gpus": 4}, duration="1m", gpus=3)
        time.sleep(max(0.0, -seconds_since(opens)))
        kept = wait_for(
            "the models to come down to the window's 3 GPUs together",
            lambda: {
                each: {p.metadata.uid for p in pods(core, namespace, each)}
                for each in ("alpha", "beta")
            },
            lambda seen: [len(seen["alpha"]), len(seen["beta"])] == [1, 2],
            timeout=60,
        )
        reasons = [
            e.reason or ""
            for e in core.list_namespaced_event(namespace).items
            if e.last_timestamp is None or e.last_timestamp >= opens
        ]
        preempted = [r for r in reasons if "Preempt" in r or "Evict" in r]
        assert not preempted, preempted
        assert kept["alpha"] | kept["beta"] <= before, "a replica that fit was replaced"
    finally:
        for each in ("alpha", "beta"):
            shoal.delete("InferenceModel", each, namespace)
        shoal.delete("TenantPool", name)


def _no_gpus(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, second_namespace: str
) -> None:
    """A pool of 2 GPUs (no cohort) whose short window gives it none: at the
    window's start the model's Deployment goes to 0 replicas (a graceful scale-down by
    the ReplicaSet controller, no preemption) and the model says why, in a Normal
    Event; when the window closes the replicas field is given back to the HPA, which
    brings the warm pool of 2 back."""
    shoal = Shoal(api)
    apps = client.AppsV1Api(api)
    name = f"park-{uuid.uuid4().hex[:6]}"
    shoal.create(elastic_pool(name, namespace, SHARED, {"gpus": 2}))
    try:
        wait_mode(shoal, name, "Kueue")
        serve(shoal, core, namespace, name, "nightly", 2)
        opens = add_window(shoal, name, {"gpus": 2}, duration=f"{SHORT_WINDOW_SECONDS}s", gpus=0)
        time.sleep(max(0.0, -seconds_since(opens)))
        wait_for(
            "the model's Deployment at 0 replicas and its pods gone",
            lambda: (
                apps.read_namespaced_deployment("nightly", namespace).spec.replicas,
                len(pods(core, namespace, "nightly")),
            ),
            lambda seen: seen == (0, 0),
            timeout=60,
        )
        parked_s = seconds_since(opens)
        ready = wait_for(
            "the model to say the window parked it",
            lambda: condition(shoal.get("InferenceModel", "nightly", namespace), "Ready"),
            lambda c: c.get("reason") == "ScaledToZero",
            timeout=30,
        )
        assert ready["status"] == "False"
        assert "capacity window night gives it 0 GPUs" in ready["message"], ready
        # Where the spec says it should be: GitOps health does not wait on it.
        parked_model = shoal.get("InferenceModel", "nightly", namespace)
        assert condition(parked_model, "Reconciling").get("status") == "False", parked_model
        events = [
            (e.type, e.reason)
            for e in core.list_namespaced_event(namespace).items
            if e.involved_object.name == "nightly"
        ]
        assert ("Normal", "ScaledToZero") in events, events
        evicted = [r for _, r in events if "Preempt" in (r or "") or "Evict" in (r or "")]

        closed = opens + dt.timedelta(seconds=SHORT_WINDOW_SECONDS)
        time.sleep(max(0.0, -seconds_since(closed)))
        wait_running(core, namespace, "nightly", 2, "running again")
        back_s = seconds_since(closed)
        wait_for(
            "the model Ready again",
            lambda: condition(shoal.get("InferenceModel", "nightly", namespace), "Ready"),
            lambda c: c.get("status") == "True",
            timeout=60,
        )
        deployment = apps.read_namespaced_deployment("nightly", namespace)
        owners = {
            f.manager
            for f in deployment.metadata.managed_fields or []
            if "f:replicas" in json.dumps(f.fields_v1 or {})
        }
        warnings = [
            (e.reason, e.message)
            for e in core.list_namespaced_event(namespace).items
            if e.type == "Warning" and e.reason in ("ScaledToZero", "ScalingDisabled")
        ]
        record(
            {
                "window_of_no_gpus": {
                    "seconds_from_start_to_no_replicas": round(parked_s, 1),
                    "seconds_from_close_to_replicas_back": round(back_s, 1),
                    "replicas_preempted_or_evicted": len(evicted),
                }
            }
        )
        assert not evicted, f"replicas were preempted or evicted, not drained: {evicted}"
        assert not warnings, warnings
        # The operator no longer holds the replicas: the HPA does.
        assert FIELD_MANAGER not in owners, owners
    finally:
        shoal.delete("InferenceModel", "nightly", namespace)
        shoal.delete("TenantPool", name)


def _cohort(
    api: client.ApiClient, core: client.CoreV1Api, namespace: str, second_namespace: str
) -> None:
    """A 4-GPU pool in a cohort runs 4 replicas; a window gives it 2. Kueue
    leaves the 4 admitted, so Shoal evicts the 2 above the quota, one at a time as the
    model's PodDisruptionBudget allows: their replacements are admitted on the idle
    lender's GPUs. Nothing is preempted, and the model never has fewer than 3 ready."""
    shoal = Shoal(api)
    cohort = f"d-{uuid.uuid4().hex[:6]}"
    lender, name = f"idle-{cohort}", f"night-{cohort}"
    shoal.create(
        elastic_pool(
            lender, second_namespace, DEDICATED, {"gpus": 4, "cohort": cohort}, "Dedicated"
        )
    )
    shoal.create(elastic_pool(name, namespace, SHARED, {"gpus": 4, "cohort": cohort}))
    try:
        wait_mode(shoal, lender, "Kueue")
        wait_mode(shoal, name, "Kueue")
        shoal.create(model("nightly", name, 4), namespace)
        wait_for(
            "the model's 4 replicas running on its own GPUs",
            lambda: sorted(node_group(core, p) for p in running(core, namespace, "nightly")),
            lambda groups: groups == ["shared-gpu"] * 4,
            timeout=120,
        )
        # Open long enough for the drain; nothing here needs it to close.
        opens = add_window(shoal, name, {"gpus": 4, "cohort": cohort}, duration="10m")
        time.sleep(max(0.0, -seconds_since(opens)))
        fewest_ready = 4
        apps = client.AppsV1Api(api)

        def placed() -> list[str]:
            nonlocal fewest_ready
            ready = apps.read_namespaced_deployment("nightly", namespace).status.ready_replicas
            fewest_ready = min(fewest_ready, ready or 0)
            return sorted(node_group(core, p) for p in running(core, namespace, "nightly"))

        wait_for(
            "2 replicas moved onto the lender's GPUs",
            placed,
            lambda groups: groups == ["dedicated-gpu"] * 2 + ["shared-gpu"] * 2,
            timeout=120,
        )
        moved_s = seconds_since(opens)
        figures = wait_for(
            "the pool's status to show the drain done and the loan",
            lambda: pool_capacity(shoal, name),
            lambda c: c.get("drainingGpus") == 0 and c.get("borrowedGpus") == 2,
            timeout=60,
        )
        reasons = [e.reason or "" for e in core.list_namespaced_event(namespace).items]
        preempted = [r for r in reasons if "Preempt" in r]
        pool_events = core.list_namespaced_event(
            "default", field_selector=f"involvedObject.name={name}"
        ).items
        record(
            {
                "window_in_cohort": {
                    "seconds_from_start_to_drained_onto_lender": round(moved_s, 1),
                    "replicas_moved": 2,
                    "fewest_ready_replicas": fewest_ready,
                    "replicas_preempted": len(preempted),
                }
            }
        )
        assert figures["nominalGpus"] == 2
        assert not preempted, preempted
        assert fewest_ready >= 3, f"{fewest_ready} ready at worst: the budget was not honoured"
        assert any(e.reason == "DrainingAboveQuota" for e in pool_events), pool_events
        hpa = client.AutoscalingV2Api(api).read_namespaced_horizontal_pod_autoscaler(
            "nightly", namespace
        )
        assert hpa.spec.max_replicas == 16  # a pool that may borrow is not capped
    finally:
        shoal.delete("InferenceModel", "nightly", namespace)
        shoal.delete("TenantPool", name)
        shoal.delete("TenantPool", lender)


def test_a_capacity_window_lowers_the_quota_at_its_start_and_drains_what_is_above(
    gpu_nodes: list[client.V1Node], windows: dict[Scenario, Future[None]]
) -> None:
    """See ``_lowers``."""
    windows[_lowers].result()


def test_models_grown_above_their_warm_pools_come_down_to_a_lowered_window_together(
    gpu_nodes: list[client.V1Node], windows: dict[Scenario, Future[None]]
) -> None:
    """See ``_grown``."""
    windows[_grown].result()


def test_a_window_of_no_gpus_parks_the_models_and_its_end_brings_them_back(
    gpu_nodes: list[client.V1Node], windows: dict[Scenario, Future[None]]
) -> None:
    """See ``_no_gpus``."""
    windows[_no_gpus].result()


def test_in_a_cohort_a_lowered_window_drains_by_eviction_onto_a_lenders_gpus(
    gpu_nodes: list[client.V1Node], windows: dict[Scenario, Future[None]]
) -> None:
    """See ``_cohort``."""
    windows[_cohort].result()
