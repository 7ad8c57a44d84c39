"""Every field you can set, you can also unset: a property test over every optional
field of the three kinds, on the real cluster with the real operator.

Each case (tests/support/optional_fields.py) gets its own object: a model for model
and policy fields, a pool (with one model) for pool fields. As a GitOps tool would, the
test server-side applies every object with its field set, waits until the operator has
handled them and run passes, and checks that every child equals what applying a fresh
render of the live spec would leave (the server's own dry run of that apply, so the
server's defaulting is compared too, and a field left behind shows as a difference).
Then it applies every object again without its field and checks the same. Finally a
no-op resync writes nothing.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from e2e.operator import OperatorProcess
from kubernetes import client

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.common import parse_object
from shoal.api.constants import API_VERSION, MODEL_LABEL, POOL_LABEL
from shoal.api.inferencemodel import InferenceModel
from shoal.api.kinds import MODEL, POOL, planned_by
from shoal.api.tenantpool import TenantPool
from shoal.cache import key_of
from shoal.kube.client import ApiError, Kube
from shoal.kube.kueue import KueueProbe
from shoal.render.batching import effective_batching
from shoal.render.gateway import GatewaySite, gateway_name, gateway_objects, oidc_keys_in
from shoal.render.keys import PublicKey
from shoal.render.model_plan import ModelFacts, plan_model
from shoal.render.overflow import overflow_objects
from shoal.render.pool_plan import PoolFacts, live_namespaces, plan_pool
from tests.support.optional_fields import CASES, resolve
from tests.support.passes import operator_counters, wait_for_passes
from tests.support.shoal_objects import Shoal
from tests.support.wait import wait_for

IM, TP, BP = "InferenceModel", "TenantPool", "BatchPolicy"
VOLATILE = ("resourceVersion", "managedFields", "generation", "creationTimestamp", "uid")
# What may be left behind, by the table of kinds: a pool's namespaced objects, and a
# model's (its overflow stack's among them).
TENANT_KINDS = [k for k in planned_by(POOL) if k.namespaced]
MODEL_KINDS = planned_by(MODEL)


def _base_model(pool: str, name: str) -> dict[str, Any]:
    """A model of ``pool`` whose Triton name is its own: the namespace holds many models
    of one pool, and a Triton name taken by an earlier one is refused."""
    return {
        "pool": pool,
        "model": {"name": name, "backend": "python", "storageUri": "s3://models/linear"},
        "runtime": {"gpus": 0},
    }


def _base_pool(namespace: str) -> dict[str, Any]:
    return {
        "isolation": "Shared",
        "tenants": {"namespaces": [namespace]},
        "placement": {"nodeSelector": {"shoal.dev/node-group": "shared-gpu"}},
        "quota": {"gpus": 8},
    }


def _doc(kind: str, name: str, spec: dict[str, Any], namespace: str = "") -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": meta, "spec": spec}


class World:
    """The objects of every case, applied as a GitOps tool would."""

    def __init__(self, api: client.ApiClient, names: dict[str, str]) -> None:
        self.shoal = Shoal(api)
        self.names = names
        suffix = uuid.uuid4().hex[:6]
        self.shared_pool = f"fields-{suffix}"
        # The overflow cases' other pool, admitting the same namespace.
        self.overflow_pool = f"spill-{suffix}"
        self.policy = "base-policy"
        self.cases = [(case, f"c{i:02d}-{suffix}") for i, case in enumerate(CASES)]

    def documents(self, *, with_field: bool) -> list[dict[str, Any]]:
        ns, tp_ns = self.names["namespace"], self.names["pool_namespace"]
        names = {**self.names, "policy": self.policy, "overflow_pool": self.overflow_pool}
        docs = [
            _doc(TP, self.shared_pool, _base_pool(ns)),
            _doc(TP, self.overflow_pool, _base_pool(ns)),
            _doc(BP, self.policy, {"priorityLevels": 2}, ns),
        ]
        for case, name in self.cases:
            if case.kind == IM:
                spec = case.spec(_base_model(self.shared_pool, name), with_field=with_field)
                docs.append(_doc(IM, name, resolve(spec, names), ns))
            elif case.kind == BP:
                docs.append(
                    _doc(BP, name, resolve(case.spec({}, with_field=with_field), names), ns)
                )
                model = _base_model(self.shared_pool, name)
                model["batchPolicy"] = {"name": name}
                docs.append(_doc(IM, name, model, ns))
            else:
                pool_names = {**names, "namespace": tp_ns}
                spec = case.spec(_base_pool(tp_ns), with_field=with_field)
                docs.append(_doc(TP, name, resolve(spec, pool_names)))
                docs.append(_doc(IM, name, _base_model(name, name), tp_ns))
        return docs

    def apply(self, *, with_field: bool) -> None:
        """Server-side apply every document as the ``gitops`` field manager (without
        forcing conflicts, as ``kubectl apply --server-side`` does): pools and policies,
        then the models that name them, each group side by side. One by one, the ~150
        requests queued behind the operator's own answers to the first ones, and the
        apply alone took most of a minute."""
        docs = self.documents(with_field=with_field)
        _side_by_side(self._apply_one, [d for d in docs if d["kind"] != IM])
        _side_by_side(self._apply_one, [d for d in docs if d["kind"] == IM])

    def delete(self) -> None:
        docs = self.documents(with_field=False)
        _side_by_side(self._delete_one, [d for d in docs if d["kind"] == IM])
        _side_by_side(self._delete_one, [d for d in docs if d["kind"] != IM])

    def _apply_one(self, doc: dict[str, Any]) -> None:
        self.shoal.apply(doc, field_manager="gitops")

    def _delete_one(self, doc: dict[str, Any]) -> None:
        meta = doc["metadata"]
        self.shoal.delete(doc["kind"], meta["name"], meta.get("namespace"))


def _side_by_side(send: Callable[[dict[str, Any]], object], docs: list[dict[str, Any]]) -> None:
    with ThreadPoolExecutor(max_workers=8) as senders:
        list(senders.map(send, docs))


def _clean(obj: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in obj["metadata"].items() if k not in VOLATILE}
    return {**{k: v for k, v in obj.items() if k != "status"}, "metadata": meta}


def _handled(shoal: Shoal, docs: list[dict[str, Any]]) -> list[str]:
    """The objects the operator has not yet handled at their current generation."""
    behind = []
    for doc in docs:
        meta = doc["metadata"]
        live = shoal.get(doc["kind"], meta["name"], meta.get("namespace"))
        if (live.get("status") or {}).get("observedGeneration") != live["metadata"]["generation"]:
            behind.append(f"{doc['kind']} {meta['name']}")
    return behind


def _differences(
    kube: Kube, core: client.CoreV1Api, namespaces_of_cases: tuple[str, ...]
) -> list[str]:
    """Every child that differs from a fresh render of the live specs, and every pool
    object that should not exist (or is missing)."""
    shoal_objects = {kind: kube.list(API_VERSION, kind) for kind in (IM, TP, BP)}
    pools = {p["metadata"]["name"]: parse_object(TenantPool, p) for p in shoal_objects[TP]}
    # Pools being deleted (another test's, waiting for their models) keep what they had.
    live_pools = {
        p["metadata"]["name"]
        for p in shoal_objects[TP]
        if not p["metadata"].get("deletionTimestamp")
    }
    policies = {
        (p["metadata"]["namespace"], p["metadata"]["name"]): parse_object(BatchPolicy, p)
        for p in shoal_objects[BP]
    }
    namespaces = kube.list("v1", "Namespace")
    now = dt.datetime.now(dt.UTC)
    kueue_served = KueueProbe().served(kube)
    desired: list[dict[str, Any]] = []
    site = GatewaySite()
    # The operator's own pool planner, on the facts the cluster gives.
    pool_facts = PoolFacts(
        now=now,
        namespaces=live_namespaces(namespaces),
        gateway_namespace=site.namespace,
        kueue_served=kueue_served,
        pools=[p for p in pools.values() if p.metadata.name in live_pools],
    )
    for pool in pools.values():
        if pool.metadata.name not in live_pools:
            continue
        planned = plan_pool(pool, pool_facts)
        desired += planned.objects
        admitted = list(planned.admitted)
        if pool.spec.gateway.enabled:
            desired += _gateway(kube, pool, site, admitted)
    for body in shoal_objects[IM]:
        model = parse_object(InferenceModel, body)
        model_pool = pools.get(model.spec.pool)
        if model_pool is None:
            continue
        ref = model.spec.batch_policy
        policy = policies.get((model.metadata.namespace or "", ref.name)) if ref else None
        # The operator's own planner, on the facts the cluster gives: the moment, and
        # whether it serves Kueue (no forecast: no Prometheus in this tier).
        facts = ModelFacts(now=now, kueue_served=kueue_served)
        desired += plan_model(model, model_pool, policy.spec if policy else None, facts).objects
        overflow = model.spec.overflow
        if overflow is not None and overflow.pool in pools:
            batching = effective_batching(model, policy.spec if policy else None)
            desired += overflow_objects(model, batching, pools[overflow.pool], site.namespace)
    # Hundreds of children, each a read and a dry run: checked side by side.
    with ThreadPoolExecutor(max_workers=8) as checks:
        found = checks.map(lambda obj: _difference(kube, shoal_objects[TP], obj), desired)
        out = [difference for difference in found if difference]
    wanted = {key_of(o["kind"], o) for o in desired}
    for pool_name in live_pools:
        for kind in TENANT_KINDS:
            for live in kube.list(kind.api_version, kind.kind, labels=f"{POOL_LABEL}={pool_name}"):
                key = key_of(kind.kind, live)
                if key not in wanted:
                    out.append(f"{kind.kind} {key[1]}/{key[2]}: left behind")
    # A model's children in the test's namespaces (an overflow stack among them).
    for namespace in namespaces_of_cases:
        for kind in MODEL_KINDS:
            for live in kube.list(kind.api_version, kind.kind, namespace, labels=MODEL_LABEL):
                key = key_of(kind.kind, live)
                if key not in wanted:
                    out.append(f"{kind.kind} {key[1]}/{key[2]}: left behind")
    return out


def _difference(kube: Kube, pools: list[dict[str, Any]], obj: dict[str, Any]) -> str:
    """How the live ``obj`` differs from applying it afresh; empty when it does not."""
    meta = obj["metadata"]
    where = f"{obj['kind']} {meta.get('namespace')}/{meta['name']}"
    live = kube.get(obj["apiVersion"], obj["kind"], meta["name"], meta.get("namespace"))
    if live is None:
        return f"{where}: missing"
    try:
        preview = kube.preview(obj)
    except ApiError as exc:
        owner = next(
            (p for p in pools if f"shoal-pool-{p['metadata']['name']}" == meta["name"]), None
        )
        said = (owner or {}).get("status", {}).get("conditions", [])[:1]
        return f"{where}: applying a fresh render fails: {exc.status} {exc.body}; pool says {said}"
    if _clean(preview) != _clean(live):
        return f"{where}: " + _diff(_clean(live), _clean(preview))
    return ""


def _gateway(
    kube: Kube, pool: TenantPool, site: GatewaySite, admitted: list[str]
) -> list[dict[str, Any]]:
    """The pool's gateway objects, with the configuration the operator rendered from the
    live endpoints and keys (tests/e2e/test_gateway_* check what it says): here, their
    shape, and that they follow the pool's fields."""
    live = kube.get("v1", "ConfigMap", gateway_name(pool.metadata.name), site.namespace) or {}
    data = dict(live.get("data") or {})
    text = data.pop("haproxy.cfg", "")
    # The OIDC issuers' keys (spec.gateway.oidc), as the ConfigMap says whose they are.
    oidc = oidc_keys_in(live)
    theirs = {key.file_name for keys in oidc.values() for key in keys}
    keys = tuple(
        PublicKey(name.removesuffix(".pem"), "RS256", pem)
        for name, pem in data.items()
        if name not in theirs
    )
    return gateway_objects(pool, site, text, keys, admitted, list(oidc.items()))


def _diff(live: Any, want: Any, path: str = "") -> str:
    if isinstance(live, dict) and isinstance(want, dict):
        for key in sorted(set(live) | set(want)):
            if live.get(key) != want.get(key):
                return _diff(live.get(key), want.get(key), f"{path}.{key}")
        return path
    return f"{path}: live {json.dumps(live)[:200]} != applied {json.dumps(want)[:200]}"


@pytest.fixture
def world(api: client.ApiClient, core: client.CoreV1Api, namespace: str) -> Iterator[World]:
    extra = {k: f"{namespace[:45]}-{k[:3]}" for k in ("pool_namespace", "other", "gateway")}
    for name in extra.values():
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    built = World(api, {"namespace": namespace, **extra})
    try:
        yield built
    finally:
        built.delete()
        for name in extra.values():
            core.delete_namespace(name)


def _converge(
    api: client.ApiClient, operator: OperatorProcess, world: World, *, with_field: bool
) -> list[str]:
    world.apply(with_field=with_field)
    docs = world.documents(with_field=with_field)
    wait_for(
        "the operator to handle every object's generation",
        lambda: _handled(world.shoal, docs),
        lambda behind: not behind,
        timeout=180,
        interval=2,
    )
    wait_for_passes(operator.metrics_url, rounds=2, kinds=(IM, TP, BP), timeout=240)
    cases = (world.names["namespace"], world.names["pool_namespace"])
    return _differences(Kube(api), client.CoreV1Api(api), cases)


def test_every_optional_field_can_be_set_and_unset(
    api: client.ApiClient, operator: OperatorProcess, world: World
) -> None:
    assert len(world.cases) == len(CASES) >= 60
    with_field = _converge(api, operator, world, with_field=True)
    assert not with_field, "after setting each field:\n" + "\n".join(with_field)
    without = _converge(api, operator, world, with_field=False)
    assert not without, "after unsetting each field:\n" + "\n".join(without)
    previous: dict[str, float] = {}

    def writes_settled(now: dict[str, float]) -> bool:
        counts = {k: v for k, v in now.items() if k.startswith("shoal_api_writes_total{")}
        same = counts == previous
        if not same:  # shown if the wait times out: what kept writing
            print({k: v - previous.get(k, 0) for k, v in counts.items() if v != previous.get(k)})
        previous.clear()
        previous.update(counts)
        return same

    wait_for(
        "a resync period without writes",
        lambda: operator_counters(operator.metrics_url),
        writes_settled,
        timeout=120,
        interval=8,
    )
    before = operator_counters(operator.metrics_url)
    after = wait_for_passes(operator.metrics_url, rounds=2, kinds=(IM, TP, BP))
    writes = {
        k: after[k] - before.get(k, 0)
        for k in after
        if k.startswith("shoal_api_writes_total{") and after[k] != before.get(k, 0)
    }
    assert not writes, f"writes during a no-op resync: {writes}"
