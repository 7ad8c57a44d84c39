"""What Argo CD and kstatus make of Shoal's real status, object by object.

The objects come from the API server with the operator running; the verdicts from the
gitops-health tool (e2e/cluster/tools/gitops-health): the shipped Lua health script in
gopher-lua, set up as Argo CD runs a health check, and cli-utils' kstatus, which Flux's
health assessment uses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from e2e.argocd_health import FRAGMENT, SCRIPTS, key
from e2e.cluster.local import ensure_tool
from e2e.install import Kubectl
from e2e.operator import OperatorProcess
from kubernetes import client

from shoal.api.crd import KINDS
from tests.support.shoal_objects import (
    GROUP,
    VERSION,
    Shoal,
    batch_policy,
    condition,
    inference_model,
    ready,
    wait_ready,
    wait_reason,
)
from tests.support.wait import wait_for

Verdicts = dict[str, dict[str, dict[str, str]]]


@pytest.fixture(scope="module")
def tool() -> Path:
    return ensure_tool(
        "gitops-health", "shoal.dev/e2e/cluster/tools/gitops-health", "gitops-health"
    )


def verdicts(tool: Path, objects: dict[str, dict[str, Any]], *sources: str) -> Verdicts:
    """The tool's answer for each of ``objects``, by the same labels."""
    run = subprocess.run(
        [str(tool), *sources],
        input=json.dumps(list(objects.values())),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert len(lines) == len(objects), run.stdout
    return {
        label: {"argo": o["argo"], "kstatus": o["kstatus"]}
        for label, o in zip(objects, lines, strict=True)
    }


def installed_argocd_cm(
    kubectl: Kubectl, core: client.CoreV1Api, namespace: str, tmp_path: Path
) -> Path:
    """Install the fragment as docs/operations.md says, into an argocd-cm that already
    holds a setting; return a file holding the ConfigMap as the API server then has it."""
    core.create_namespaced_config_map(
        namespace,
        client.V1ConfigMap(
            metadata=client.V1ObjectMeta(
                name="argocd-cm", labels={"app.kubernetes.io/part-of": "argocd"}
            ),
            data={"url": "https://argocd.example.com"},
        ),
    )
    kubectl(
        *("-n", namespace, "patch", "configmap", "argocd-cm", "--type", "merge"),
        f"--patch-file={FRAGMENT}",
    )
    live = core.read_namespaced_config_map("argocd-cm", namespace)
    shipped = yaml.safe_load(FRAGMENT.read_text())["data"]
    assert live.data == {"url": "https://argocd.example.com", **shipped}
    assert set(shipped) == {key(kind.name) for kind in KINDS}
    path = tmp_path / "argocd-cm.json"
    path.write_text(json.dumps(core.api_client.sanitize_for_serialization(live)))
    return path


def test_argo_cd_and_kstatus_read_every_kinds_conditions(
    api: client.ApiClient,
    core: client.CoreV1Api,
    kubectl: Kubectl,
    operator: OperatorProcess,
    namespace: str,
    tool: Path,
    tmp_path: Path,
) -> None:
    shoal = Shoal(api)
    with shoal.pool([namespace], gpus=64) as pool:
        shoal.create(batch_policy("small", maxBatchSize=2), namespace)
        # Straight from the create call: the operator has written no status yet.
        fresh = shoal.create(inference_model("served", pool, "small"), namespace)
        # 16 GPUs on one pod: no node has them, the pod stays Pending.
        shoal.create(inference_model("huge", pool, gpus=16), namespace)
        # Warm-up batches of 8 under a policy allowing 2: Stalled until the spec changes.
        broken = inference_model("broken", pool, "small")
        broken["spec"]["model"]["inputs"] = [{"name": "x", "dataType": "FP32", "dims": [4]}]
        broken["spec"]["model"]["warmup"] = {"batchSizes": [8]}
        shoal.create(broken, namespace)

        served = wait_ready(shoal, namespace, "served", timeout=60)
        huge = wait_reason(shoal, namespace, "huge", "Unschedulable", timeout=60)
        stalled = wait_reason(shoal, namespace, "broken", "InvalidBatching", timeout=30)
        tenant_pool = wait_for(
            f"TenantPool {pool} Ready",
            lambda: shoal.get("TenantPool", pool),
            ready,
            timeout=30,
        )
        policy = wait_for(
            "BatchPolicy small Ready",
            lambda: shoal.get("BatchPolicy", "small", namespace),
            ready,
            timeout=30,
        )
        # Straight from the patch call: a new generation the operator has not seen.
        patch = {"spec": {"scaling": {"maxReplicas": 4}}}
        bumped = cast(
            "dict[str, Any]",
            shoal.custom.patch_namespaced_custom_object(
                GROUP, VERSION, namespace, "inferencemodels", "served", patch
            ),
        )
        assert bumped["metadata"]["generation"] == served["metadata"]["generation"] + 1

        objects = {
            "fresh": fresh,
            "served": served,
            "bumped": bumped,
            "huge": huge,
            "broken": stalled,
            "pool": tenant_pool,
            "policy": policy,
        }
        cm = installed_argocd_cm(kubectl, core, namespace, tmp_path)
        got = verdicts(tool, objects, f"--argocd-cm={cm}")
        # The .lua files themselves give the same answers as the installed ConfigMap.
        assert verdicts(tool, objects, str(SCRIPTS)) == got

    def says(obj: dict[str, Any], type_: str) -> str:
        return str(condition(obj, type_)["message"])

    assert "status" not in fresh
    assert got["fresh"]["argo"]["status"] == "Progressing"
    # kstatus cannot tell "no status yet" from "has no status" and falls back to Current
    # (kubernetes-sigs/cli-utils#632): a Flux health check right after an apply can pass
    # before the operator's first pass; Argo CD's check above waits.
    assert got["fresh"]["kstatus"]["status"] == "Current"

    assert condition(served, "Ready")["status"] == "True"
    assert got["served"]["argo"] == {"status": "Healthy", "message": says(served, "Ready")}
    assert got["served"]["kstatus"]["status"] == "Current"

    generation = bumped["metadata"]["generation"]
    assert bumped["status"]["observedGeneration"] == generation - 1
    assert got["bumped"]["argo"] == {
        "status": "Progressing",
        "message": f"Waiting for the operator to observe generation {generation}.",
    }
    assert got["bumped"]["kstatus"]["status"] == "InProgress"

    assert condition(huge, "Reconciling")["status"] == "True"
    assert condition(huge, "Stalled")["status"] == "False"
    assert got["huge"]["argo"] == {"status": "Progressing", "message": says(huge, "Reconciling")}
    assert got["huge"]["kstatus"] == {"status": "InProgress", "message": says(huge, "Reconciling")}

    assert condition(stalled, "Stalled")["status"] == "True"
    assert got["broken"]["argo"] == {"status": "Degraded", "message": says(stalled, "Stalled")}
    assert got["broken"]["kstatus"] == {"status": "Failed", "message": says(stalled, "Stalled")}

    for label, obj in (("pool", tenant_pool), ("policy", policy)):
        assert got[label]["argo"] == {"status": "Healthy", "message": says(obj, "Ready")}, label
        assert got[label]["kstatus"]["status"] == "Current", label


def _model(status: dict[str, Any], generation: int = 3) -> dict[str, Any]:
    body = inference_model("edge", "pool")
    body["metadata"].update(namespace="ns", generation=generation)
    body["status"] = status
    return body


def _cond(type_: str, status: str, reason: str, message: str, generation: int = 3) -> Any:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
    }


@pytest.mark.parametrize(
    ("status", "argo"),
    [
        pytest.param(
            {
                "observedGeneration": 3,
                "conditions": [
                    _cond("Ready", "True", "Available", "1 of 1 replicas ready to serve."),
                    _cond("Stalled", "True", "InvalidBatching", "old", generation=2),
                ],
            },
            {"status": "Healthy", "message": "1 of 1 replicas ready to serve."},
            id="a-condition-from-an-older-generation-is-ignored",
        ),
        pytest.param(
            {
                "observedGeneration": 3,
                "conditions": [
                    _cond("Ready", "False", "Unschedulable", ""),
                    _cond("Stalled", "False", "AsExpected", "Nothing blocks the spec."),
                    _cond("Reconciling", "False", "Unschedulable", ""),
                ],
            },
            {"status": "Progressing", "message": "Unschedulable"},
            id="not-ready-nor-stalled-is-progressing-with-the-reason-when-no-message",
        ),
        pytest.param(
            {"observedGeneration": 3},
            {"status": "Progressing", "message": "Waiting for the Ready condition."},
            id="no-conditions",
        ),
    ],
)
def test_the_script_on_statuses_the_operator_does_not_write_today(
    tool: Path, status: dict[str, Any], argo: dict[str, str]
) -> None:
    """Corners no live object shows today: a stale condition, an empty message, no
    conditions at all."""
    got = verdicts(tool, {"edge": _model(status)}, str(SCRIPTS))["edge"]
    assert got["argo"] == argo
