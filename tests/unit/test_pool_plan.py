"""The pool's planner (shoal.render.pool_plan): one pure function decides a pool's
objects for the operator's pass and for ``shoal render`` alike."""

from __future__ import annotations

import datetime as dt
from typing import Any

from shoal.api.tenantpool import TenantPool
from shoal.render.documents import RenderFacts, render_documents
from shoal.render.pool_plan import PoolFacts, plan_pool
from tests.support.resources import example

NOW = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)
LABEL = "kubernetes.io/metadata.name"


def elastic(name: str = "shared", **capacity: Any) -> TenantPool:
    doc = example("TenantPool", "shared")
    doc["metadata"] = {"name": name}
    doc["spec"]["capacity"] = {"gpus": 2, **capacity}
    return TenantPool.model_validate(doc)


def kinds(objects: Any) -> list[str]:
    return [o["kind"] for o in objects]


def test_a_pool_admits_what_its_facts_hold_and_queues_only_where_kueue_is_served() -> None:
    pool = elastic()
    listed = list(pool.spec.tenants.namespaces)
    namespaces = {name: {LABEL: name} for name in [*listed, "elsewhere"]}
    plan = plan_pool(pool, PoolFacts(now=NOW, namespaces=namespaces, kueue_served=True))
    assert plan.admitted == tuple(sorted(listed))
    assert "elsewhere" not in plan.isolation
    assert kinds(plan.capacity) == [
        "ResourceFlavor",
        "ClusterQueue",
        *["LocalQueue"] * len(listed),
    ]
    assert plan.objects[0] is plan.priority_class
    without = plan_pool(pool, PoolFacts(now=NOW, namespaces=namespaces, kueue_served=False))
    assert without.capacity == ()
    # A namespace that does not exist is not admitted, listed or not.
    none = plan_pool(pool, PoolFacts(now=NOW, kueue_served=True))
    assert none.admitted == ()
    assert kinds(none.capacity) == ["ResourceFlavor", "ClusterQueue"]


def test_the_preview_of_an_elastic_pool_holds_its_kueue_objects() -> None:
    """shoal render plans pools with the same planner: with Kueue served (its default,
    --kueue) the preview has the pool's queues, without it none."""
    doc = elastic().model_dump(by_alias=True, exclude_none=True)
    served = render_documents([doc], facts=RenderFacts(at=NOW, kueue_served=True))
    queues = [o for o in served if o["kind"] in ("ResourceFlavor", "ClusterQueue", "LocalQueue")]
    assert kinds(queues)[:2] == ["ResourceFlavor", "ClusterQueue"]
    assert len(queues) == 2 + len(elastic().spec.tenants.namespaces)
    plain = render_documents([doc], facts=RenderFacts(at=NOW, kueue_served=False))
    assert not [o for o in plain if o["kind"] in ("ResourceFlavor", "ClusterQueue", "LocalQueue")]
