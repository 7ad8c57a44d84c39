"""What the HPA controller last read of each of its metrics (tests and benchmarks)."""

from __future__ import annotations

from kubernetes import client


def quantity(text: str) -> float:
    """A metric value as the HPA's status writes it ("250m", "3")."""
    return float(text[:-1]) / 1000 if text.endswith("m") else float(text)


def readings(hpa: client.V2HorizontalPodAutoscaler) -> dict[str, float]:
    """Each metric's last reading, by name: per replica for a Pods metric or an
    AverageValue Object metric, the object's value for a Value one."""
    out: dict[str, float] = {}
    for metric in (hpa.status.current_metrics if hpa.status else None) or []:
        if metric.type == "Pods" and metric.pods and metric.pods.current.average_value:
            out[metric.pods.metric.name] = quantity(metric.pods.current.average_value)
        elif metric.type == "Object" and metric.object:
            current = metric.object.current
            value = current.average_value or current.value
            if value is not None:
                out[metric.object.metric.name] = quantity(value)
    return out


def desired_replicas(hpa: client.V2HorizontalPodAutoscaler) -> int:
    """The replicas the HPA controller last decided on.

    The controller writes this in the same status update as the readings it decided
    on, after it has scaled the target: a test that reads the target's replicas and
    then the HPA's readings can see the scale with the readings from the sync before
    it. Reading both from one HPA object cannot."""
    return int((hpa.status.desired_replicas if hpa.status else None) or 0)
