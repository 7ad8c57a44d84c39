"""What the operator's process loads: the peak-memory target (issue: control-plane
figures) leaves no room for libraries only one feature needs."""

from __future__ import annotations

import json
import subprocess
import sys

# Loaded by shoal.reconcile.predictive_round (numpy) or by tritonclient's gRPC client, never by a
# plain operator: together about 35 MB of its memory.
HEAVY = ("numpy", "grpc", "ml_dtypes")


def _modules_after(code: str) -> set[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {m.split(".")[0] for m in json.loads(out.splitlines()[-1])}


def test_the_operator_starts_without_numpy_or_the_grpc_client() -> None:
    loaded = _modules_after("import shoal.cli, shoal.handlers, shoal.runtime")
    assert not loaded & set(HEAVY), sorted(loaded & set(HEAVY))


def test_rendering_a_config_does_not_load_the_grpc_client() -> None:
    code = (
        "from shoal.render.model_config import dynamic_batching\n"
        "from shoal.api.batchpolicy import BatchPolicySpec\n"
        "dynamic_batching(BatchPolicySpec())"
    )
    loaded = _modules_after(code)
    assert "grpc" not in loaded
    assert "tritonclient" in loaded  # the schema still comes from Triton's own proto


def test_the_grpc_client_imported_later_shares_the_schema() -> None:
    code = (
        "import shoal.render.model_config as rendered\n"
        "import tritonclient.grpc as client\n"
        "assert rendered.pb is client.model_config_pb2\n"
        "assert client.model_config_pb2.ModelConfig(name='m').name == 'm'"
    )
    assert "grpc" in _modules_after(code)


def test_the_predictive_round_loads_numpy_when_it_is_needed() -> None:
    assert "numpy" in _modules_after("import shoal.reconcile.predictive_round")
