"""Print the Deployment pod templates that the importable ``shoal`` renders for the
models on stdin (JSON), by model name. The upgrade scenario runs this once with the
previous commit's package first on the path and once with the current one, to know
which models' pods an upgrade really has to roll.

    python -m benchmarks.chaos.templates < models.json
"""

from __future__ import annotations

import json
import sys

from benchmarks import control_plane as bench
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.render.desired import model_objects


def main() -> None:
    pools = {p["metadata"]["name"]: TenantPool.model_validate(p) for p in bench.pools()}
    out = {}
    for doc in json.load(sys.stdin):
        im = InferenceModel.model_validate(doc)
        for obj in model_objects(im, None, pools[im.spec.pool]):
            if obj["kind"] == "Deployment":
                out[doc["metadata"]["name"]] = obj["spec"]["template"]
    json.dump(out, sys.stdout, sort_keys=True)


if __name__ == "__main__":
    main()
