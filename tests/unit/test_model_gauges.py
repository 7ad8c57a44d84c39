"""A model's conditions and P95 target as gauges: exactly the current status of each
type is 1, and nothing of a model stays once it is gone (the alerts read these)."""

from __future__ import annotations

from prometheus_client import REGISTRY

from shoal.telemetry import ModelGauges


def _condition(name: str, kind: str, status: str) -> float | None:
    labels = {"namespace": "ns", "inferencemodel": name, "type": kind, "status": status}
    return REGISTRY.get_sample_value("shoal_model_condition", labels)


def _target(name: str) -> float | None:
    labels = {"namespace": "ns", "inferencemodel": name}
    return REGISTRY.get_sample_value("shoal_model_target_p95_seconds", labels)


def test_only_the_current_status_of_each_condition_is_published() -> None:
    gauges = ModelGauges()
    gauges.publish("ns", "a", [{"type": "Ready", "status": "False"}], 0.25)
    assert _condition("a", "Ready", "False") == 1
    assert _target("a") == 0.25
    gauges.publish(
        "ns",
        "a",
        [{"type": "Ready", "status": "True"}, {"type": "Stalled", "status": "False"}],
        None,
    )
    assert _condition("a", "Ready", "False") is None
    assert _condition("a", "Ready", "True") == 1
    assert _condition("a", "Stalled", "False") == 1
    assert _target("a") is None


def test_a_condition_no_longer_reported_and_a_forgotten_model_leave_nothing() -> None:
    gauges = ModelGauges()
    gauges.publish("ns", "b", [{"type": "Custom", "status": "True"}], 1.0)
    gauges.publish("ns", "b", [{"type": "Ready", "status": "True"}], 1.0)
    assert _condition("b", "Custom", "True") is None
    gauges.forget("ns", "b")
    assert _condition("b", "Ready", "True") is None
    assert _target("b") is None
