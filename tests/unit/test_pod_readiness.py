"""One reading of a Pod's readiness serves the cache, the drain and the cold start."""

from __future__ import annotations

from typing import Any

from shoal.cache import projection
from shoal.render.pods import is_ready, ready_condition


def pod(*conditions: tuple[str, str], name: str = "p") -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "ns", "uid": name},
        "status": {
            "podIP": "10.0.0.1",
            "phase": "Running",
            "conditions": [
                {"type": t, "status": s, "lastTransitionTime": "2026-01-01T00:01:00Z"}
                for t, s in conditions
            ],
        },
    }


def test_only_a_true_ready_condition_counts() -> None:
    assert is_ready(pod(("PodScheduled", "True"), ("Ready", "True")))
    assert not is_ready(pod(("Ready", "False")))
    assert not is_ready(pod(("ContainersReady", "True")))
    assert not is_ready({"metadata": {}})
    found = ready_condition(pod(("Ready", "True")))
    assert found is not None
    assert found["lastTransitionTime"] == "2026-01-01T00:01:00Z"


def test_the_cache_keeps_a_gateway_pods_readiness() -> None:
    assert projection("Pod", pod(("Ready", "True")))["status"]["ready"] is True
    assert projection("Pod", pod(("Ready", "False")))["status"]["ready"] is False
