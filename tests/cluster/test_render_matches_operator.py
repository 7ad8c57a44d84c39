"""``shoal render`` previews exactly what the operator writes, for a model whose plan
depends on what only the cluster knows: a scheduled window open now (its floor), an
elastic pool on real Kueue (the queue label and the pool's GPU ceiling) and predictive
scaling. The preview runs the real CLI with the facts the operator read given as flags;
each child the operator applied carries the digest of the object it applied, which must
be the digest of the preview's object.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from e2e.cluster.target import Target
from e2e.install import Kubectl
from e2e.kueue import running_kueue
from e2e.operator import OperatorProcess
from kubernetes import client

from shoal.api.constants import MODEL_LABEL
from shoal.kube.client import Kube
from shoal.kube.drift import digest, last_applied
from tests.support.shoal_objects import GROUP, VERSION, Shoal, condition, inference_model
from tests.support.wait import wait_for

SHARED = {"nodeSelector": {"shoal.dev/node-group": "shared-gpu"}}


@pytest.fixture(scope="module")
def kueue(
    kubectl: Kubectl, kube_target: Target, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    with running_kueue(kubectl, kube_target.kubeconfig, tmp_path_factory.mktemp("kueue")):
        yield


def _documents(namespace: str, pool: str) -> list[dict[str, Any]]:
    pool_doc = {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "TenantPool",
        "metadata": {"name": pool},
        "spec": {
            "isolation": "Shared",
            "tenants": {"namespaces": [namespace]},
            "placement": SHARED,
            "quota": {"gpus": 16},
            # 3 GPUs now: the model's HPA stops at 3 replicas, not its 8.
            "capacity": {"gpus": 3},
        },
    }
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
