"""The table of kinds (shoal.api.kinds) is the one place a child kind is declared: every
object a planner renders is a kind the table says that planner renders, so its
watch, its RBAC rule and its pruning follow from the entry alone. And each derived
table (REST paths, watches, ClusterRole) agrees with it."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.inferencemodel import InferenceModel
from shoal.api.kinds import CAPACITY, GATEWAY, KINDS, MODEL, PLANNERS, POOL, planned_by
from shoal.api.tenantpool import TenantPool
from shoal.kube.paths import collection_path
from shoal.render import rbac
from shoal.render.batching import effective_batching
from shoal.render.desired import model_objects, pool_objects
from shoal.render.elastic import Nominal, elastic_objects
from shoal.render.gateway import GatewaySite, gateway_objects
from shoal.render.keys import PublicKey
from shoal.render.overflow import overflow_objects
from shoal.render.tenancy import tenant_objects, withdrawn_namespace_objects
from shoal.watched import CHILDREN, INDEXED
from tests.support.resources import REPO, example_documents

KEY = PublicKey("kid-1", "RS256", "-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n")


def _examples() -> tuple[list[InferenceModel], dict[str, TenantPool], list[BatchPolicy]]:
    docs = example_documents()
    models = [InferenceModel.model_validate(d) for d in docs if d["kind"] == "InferenceModel"]
    pools = {
        d["metadata"]["name"]: TenantPool.model_validate(d)
        for d in docs
        if d["kind"] == "TenantPool"
    }
    policies = [BatchPolicy.model_validate(d) for d in docs if d["kind"] == "BatchPolicy"]
    return models, pools, policies


def rendered() -> Iterator[tuple[str, dict[str, Any]]]:
    """(planner, object) for everything each planner renders from the examples, an
    overflow twin and an elastic pool among them."""
    models, pools, policies = _examples()
    for model in models:
        pool = pools[model.spec.pool]
        policy = next(
            (
                p.spec
                for p in policies
                if model.spec.batch_policy and p.metadata.name == model.spec.batch_policy.name
            ),
            None,
        )
        for obj in model_objects(model, policy, pool, queue="q"):
            yield MODEL, obj
        other = next(p for name, p in pools.items() if name != model.spec.pool)
        doc = model.model_dump(by_alias=True, exclude_none=True)
        doc["spec"]["overflow"] = {"pool": other.metadata.name}
        twin = InferenceModel.model_validate(doc)
        for obj in overflow_objects(twin, effective_batching(twin, policy), other, "gws"):
            yield MODEL, obj
    for pool in pools.values():
        for obj in pool_objects(pool):
            yield POOL, obj
        for obj in tenant_objects(pool, "team-a", gateway_namespace="gws"):
            yield POOL, obj
        for obj in withdrawn_namespace_objects(pool, "team-b"):
            yield POOL, obj
        site = GatewaySite(namespace="gws", image="haproxy:test", agent_image="shoal:test")
        for obj in gateway_objects(pool, site, "global\n", (KEY,), ["team-a"]):
            yield GATEWAY, obj
        doc = pool.model_dump(by_alias=True, exclude_none=True)
        doc["spec"]["capacity"] = {"gpus": 2}
        elastic = TenantPool.model_validate(doc)
        for obj in elastic_objects(elastic, [elastic], ["team-a", "team-b"], Nominal(2)):
            yield CAPACITY, obj


def test_every_rendered_kind_is_in_the_table_under_its_planner() -> None:
    seen: dict[str, set[str]] = {planner: set() for planner in PLANNERS}
    for planner, obj in rendered():
        names = {k.kind for k in planned_by(planner)}
        assert obj["kind"] in names, (
            f"{planner} renders a {obj['kind']} ({obj['apiVersion']}) that shoal.api.kinds "
            f"does not list under it: it would be neither watched, allowed nor pruned"
        )
        entry = next(k for k in planned_by(planner) if k.kind == obj["kind"])
        assert entry.api_version == obj["apiVersion"], obj["kind"]
        seen[planner].add(obj["kind"])
    # And the table claims nothing a planner never renders (a stale entry would grant
    # RBAC for nothing).
    for planner in PLANNERS:
        assert seen[planner] == {k.kind for k in planned_by(planner)}, planner


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.kind)
def test_each_kind_has_one_entry_and_a_path(kind: Any) -> None:
    assert sum(1 for k in KINDS if k.kind == kind.kind) == 1
    path = collection_path(kind.api_version, kind.kind, "ns" if kind.namespaced else None)
    assert path.endswith(f"/{kind.plural}")
    # A child is watched (drift is repaired from the watch) unless nobody may watch it.
    if kind.planned_by:
        assert ("watch" in kind.verbs) == (kind.watch is not None), kind
        assert {"create", "patch", "delete", "get", "list"} <= set(kind.verbs), kind


def test_the_watches_are_the_tables() -> None:
    watched = {(w.api_version, w.kind, w.selector) for w in (*INDEXED, *CHILDREN)}
    assert watched == {(k.api_version, k.kind, k.watch) for k in KINDS if k.watch is not None}


def test_the_cluster_role_is_the_tables() -> None:
    """manifests/base/rbac.yaml is generated (test_generated_files keeps it so); here,
    that what it grants is what the table says, kind by kind."""
    text = (REPO / "manifests" / "base" / "rbac.yaml").read_text()
    role = next(d for d in yaml.safe_load_all(text) if d["kind"] == "ClusterRole")
    granted = {
        (group, resource): tuple(rule["verbs"])
        for rule in role["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
    }
    for kind in KINDS:
        assert granted[(kind.group, kind.plural)] == kind.verbs, kind.kind
    assert [r for _, r in rbac.rules()] == role["rules"]
