"""One plan per model (shoal.render.model_plan): the decisions that depend on what only
the cluster knows, taken the same way by the operator and by ``shoal render``."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from shoal.api.conditions import Cond
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.reconcile.model import Outcome, model_status
from shoal.render.documents import RenderFacts, render_documents
from shoal.render.model_plan import ModelFacts, PlanError, PoolMember, plan_model
from tests.support.shoal_objects import inference_model

NOW = dt.datetime(2026, 12, 3, 12, 0, tzinfo=dt.UTC)
SHARED = {"nodeSelector": {"shoal.dev/node-group": "shared-gpu"}}


def _pool(capacity: dict[str, Any] | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "isolation": "Shared",
        "tenants": {"namespaces": ["t"]},
        "placement": SHARED,
        "quota": {"gpus": 16},
    }
    if capacity is not None:
        spec["capacity"] = capacity
    return {"apiVersion": "shoal.dev/v1alpha1", "kind": "TenantPool",
            "metadata": {"name": "p"}, "spec": spec}  # fmt: skip


def _model(name: str = "m", **scaling: Any) -> dict[str, Any]:
    doc = inference_model(name, "p", min_replicas=1)
    doc["metadata"]["namespace"] = "t"
    doc["spec"]["scaling"].update({"maxReplicas": 8, **scaling})
    return doc


def _plan(model: dict[str, Any], pool: dict[str, Any], **facts: Any) -> Any:
    return plan_model(
        InferenceModel.model_validate(model),
        TenantPool.model_validate(pool),
        None,
        ModelFacts(now=facts.pop("now", NOW), **facts),
    )


def _hpa(objects: Any) -> dict[str, Any]:
    hpa: dict[str, Any] = next(o for o in objects if o["kind"] == "HorizontalPodAutoscaler")
    return hpa


WINDOW = {"name": "noon", "start": "0 12 * * *", "duration": "1h", "minReplicas": 3}


def test_an_open_window_raises_the_floor_and_says_when_it_closes() -> None:
    plan = _plan(_model(schedules=[WINDOW]), _pool())
    assert plan.floor.min_replicas == 3
    assert (plan.bounds.floor, plan.bounds.ceiling) == (3, 8)
    assert _hpa(plan.objects)["spec"]["minReplicas"] == 3
    assert plan.next_change == NOW + dt.timedelta(hours=1)
    closed = _plan(_model(schedules=[WINDOW]), _pool(), now=NOW - dt.timedelta(minutes=1))
    assert closed.floor.min_replicas == 1


def test_the_forecasts_warm_pool_raises_the_floor_only_when_asked_for() -> None:
    asked = _model(predictive={"enabled": True, "warmPool": True})
    assert _plan(asked, _pool(), forecast_warm_pool=4).bounds.floor == 4
    assert (
        _plan(_model(predictive={"enabled": True}), _pool(), forecast_warm_pool=4).bounds.floor == 1
    )


def test_an_elastic_pool_with_kueue_queues_the_pods_and_caps_the_replicas() -> None:
    pool = _pool({"gpus": 3})
    plan = _plan(_model(), pool, kueue_served=True)
    assert plan.queue == "shoal-p"
    assert plan.gpu_ceiling == 3
    assert plan.bounds.ceiling == 3
    deployment = next(o for o in plan.objects if o["kind"] == "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert labels["kueue.x-k8s.io/queue-name"] == "shoal-p"
    # Without Kueue, neither.
    plain = _plan(_model(), pool, kueue_served=False)
    assert (plain.queue, plain.gpu_ceiling, plain.bounds.ceiling) == (None, None, 8)


def test_another_models_warm_pool_and_replicas_come_out_of_the_ceiling() -> None:
    other = PoolMember(("t", "other"), {"scaling": {"minReplicas": 2}}, available=2)
    plan = _plan(_model(), _pool({"gpus": 5}), kueue_served=True, pool_members=(other,))
    assert plan.gpu_ceiling == 3  # 5 GPUs less the other's warm pool of 2


def test_a_pool_with_fewer_gpus_than_a_replica_parks_the_model() -> None:
    window = {"name": "night", "start": "0 12 * * *", "duration": "1h", "gpus": 0}
    plan = _plan(_model(), _pool({"gpus": 3, "windows": [window]}), kueue_served=True)
    assert plan.parked
    assert plan.next_change == NOW + dt.timedelta(hours=1)


def test_a_schedule_that_cannot_be_evaluated_is_a_plan_error() -> None:
    bad = dict(WINDOW, timeZone="Europe/Atlantis")
    with pytest.raises(PlanError) as err:
        _plan(_model(schedules=[bad]), _pool())
    assert err.value.reason == "InvalidSchedule"


# ------------------------------------------------------------- shoal render's facts
def test_render_plans_with_the_facts_it_is_given() -> None:
    docs = [_pool({"gpus": 3}), _model(schedules=[WINDOW], predictive={"enabled": True,
            "warmPool": True})]  # fmt: skip
    facts = RenderFacts(at=NOW, kueue_served=True, forecasts={("t", "m"): 2})
    hpa = _hpa(render_documents(docs, facts=facts))
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (3, 3)
    late = RenderFacts(at=NOW + dt.timedelta(hours=2), kueue_served=False,
                       forecasts={("t", "m"): 2})  # fmt: skip
    hpa = _hpa(render_documents(docs, facts=late))
    assert (hpa["spec"]["minReplicas"], hpa["spec"]["maxReplicas"]) == (2, 8)


def test_the_cli_says_which_facts_it_assumed(tmp_path: Path) -> None:
    source = tmp_path / "docs.yaml"
    source.write_text(yaml.safe_dump_all([_pool({"gpus": 3}), _model(schedules=[WINDOW])]))
    shoal = Path(sys.executable).parent / "shoal"
    run = subprocess.run(
        [str(shoal), "render", "-f", str(source), "--at", "2026-12-03T12:30:00Z",
         "--no-kueue", "--forecast", "t/m=2"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    head = run.stdout.splitlines()[:4]
    assert head == [
        "# time: 2026-12-03T12:30:00Z (--at)",
        "# Kueue served: no (--kueue/--no-kueue)",
        "# forecast warm pools: t/m=2 (--forecast NS/NAME=N)",
        "# available replicas of other models: each its minReplicas (--available NS/NAME=N)",
    ]
    hpa = _hpa(d for d in yaml.safe_load_all(run.stdout) if d)
    assert hpa["spec"]["minReplicas"] == 3
    bad = subprocess.run(
        [str(shoal), "render", "-f", str(source), "--forecast", "m=2"],
        capture_output=True, text=True,
    )  # fmt: skip
    assert bad.returncode == 2
    assert "is not NAMESPACE/NAME=N" in bad.stderr


def test_models_above_their_warm_pools_give_a_lowered_window_back_together() -> None:
    """Each model's plan counts what it holds itself: two models holding 2 GPUs each
    (warm pools of 1) under a window of 3 give the one GPU over it back between them,
    the first by name on a tie. A plan that saw itself holding nothing would leave
    each at 2, both above the quota."""
    members = tuple(
        PoolMember(("t", name), {"scaling": {"minReplicas": 1}}, available=2)
        for name in ("alpha", "beta")
    )
    pool = _pool({"gpus": 3})
    ceilings = {
        name: _plan(_model(name), pool, kueue_served=True, pool_members=members).gpu_ceiling
        for name in ("alpha", "beta")
    }
    assert ceilings == {"alpha": 1, "beta": 2}


def test_the_warm_pool_status_reports_is_the_hpas_minimum() -> None:
    """A window asks for 3 replicas while the elastic pool's GPUs admit 2: the HPA keeps
    2, and status.warmPool says 2, not the 3 it cannot have."""
    model = _model(schedules=[WINDOW])
    plan = _plan(model, _pool({"gpus": 2}), kueue_served=True)
    assert plan.floor.min_replicas == 3
    assert _hpa(plan.objects)["spec"]["minReplicas"] == plan.bounds.floor == 2
    ready = Cond("Ready", "True", "Available", "2 of 2 replicas ready to serve.")
    outcome = Outcome(
        ready=ready,
        progressing=Cond("Progressing", "False", "RolloutComplete", "2 replicas available."),
        degraded=Cond("Degraded", "False", "AsExpected", "All objects are applied."),
        deployment={"status": {"replicas": 2, "readyReplicas": 2}},
        floor=plan.floor,
        bounds=plan.bounds,
    )
    doc = {**model, "metadata": {**model["metadata"], "generation": 1}}
    status = model_status(InferenceModel.model_validate(model), doc, outcome)
    assert status["warmPool"] == 2
    assert status["openSchedules"] == ["noon"]
