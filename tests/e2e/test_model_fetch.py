"""A model's files travel from its storage URI to sit beside the rendered config.

The init container's command is run for real (rclone, the same tool the fetch image
carries) on a pvc:// source, and the real tritonserver then serves the result. What
the kubelet would do is done by hand, and only that: the claim's directory stands at
/mnt/source, the emptyDir at /models, and the ConfigMap's config.pbtxt is placed where
its subPath mount would put it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import httpx
from e2e.linear_model import BODY

from e2e import triton
from shoal.api.tenantpool import TenantPool
from shoal.render.desired import model_objects
from shoal.render.model_fetch import MODEL_ROOT, SOURCE_MOUNT
from tests.e2e.test_batching_on_triton import linear_model
from tests.support.resources import example

MODELS = Path(__file__).resolve().parents[2] / "e2e" / "models"


def test_pvc_source_is_copied_and_the_rendered_config_wins(tmp_path: Path) -> None:
    model = linear_model(1, 0.1)
    model = model.model_copy(
        update={
            "spec": model.spec.model_copy(
                update={
                    "model": model.spec.model.model_copy(
                        update={"storage_uri": "pvc://model-store/teams/ads/linear"}
                    )
                }
            )
        }
    )
    pool = TenantPool.model_validate(example("TenantPool", "shared"))
    objects = {o["kind"]: o for o in model_objects(model, None, pool)}
    pod = objects["Deployment"]["spec"]["template"]["spec"]
    fetch = pod["initContainers"][0]
    claim = next(v for v in pod["volumes"] if v["name"] == "model-source")
    assert claim["persistentVolumeClaim"] == {"claimName": "model-store", "readOnly": True}

    # The claim's contents: a version directory, and a stale config that must not win.
    source = tmp_path / "claim"
    version = source / "teams" / "ads" / "linear" / "1"
    version.mkdir(parents=True)
    shutil.copy(MODELS / "linear_cost.py", version / "model.py")
    (version.parent / "config.pbtxt").write_text('name: "linear"\nbackend: "nonexistent"\n')
    models = tmp_path / "models"
    models.mkdir()

    args = [
        a.replace(SOURCE_MOUNT, str(source)).replace(MODEL_ROOT, str(models)) for a in fetch["args"]
    ]
    subprocess.run(["rclone", *args], check=True, capture_output=True, timeout=60)
    assert (models / "linear" / "1" / "model.py").exists()

    # The kubelet's subPath mount of the ConfigMap, over whatever was copied.
    config = objects["ConfigMap"]["data"]["config.pbtxt"]
    (models / "linear" / "config.pbtxt").write_text(config)

    with triton.running(models, tmp_path / "work") as server:
        served = httpx.get(f"{server.http_url}/v2/models/linear/config", timeout=5).json()
        assert served["backend"] == "python"
        assert served["dynamic_batching"]["max_queue_delay_microseconds"] == 2000
        reply = httpx.post(f"{server.http_url}/v2/models/linear/infer", json=BODY, timeout=10)
        assert reply.status_code == 200, reply.text
