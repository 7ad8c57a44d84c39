"""Running ``shoal doctor`` as a user would, for the tests of its checks."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from e2e.cluster.target import Target

from shoal.doctor.findings import CHECKS


def doctor(
    target: Target, only: str, *args: str, prometheus: str | None = None
) -> tuple[int, dict[str, dict[str, str]]]:
    """``shoal doctor -o json`` with only the ``only`` check (and Prometheus at
    ``prometheus``, if given): its exit status and findings by name."""
    skip = [f"--skip={check}" for check in CHECKS if check != only]
    url = [f"--prometheus-url={prometheus}"] if prometheus else []
    env = {k: v for k, v in os.environ.items() if k != "SHOAL_PROMETHEUS_URL"}
    result = subprocess.run(
        [
            *(sys.executable, "-m", "shoal.cli", "doctor", f"--kubeconfig={target.kubeconfig}"),
            *("--output=json", *skip, *url, *args),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode in (0, 1), result.stderr
    findings = json.loads(result.stdout)["findings"]
    assert findings, result.stdout
    assert {f["check"] for f in findings} == {only}, findings
    return result.returncode, {f["name"]: f for f in findings}
