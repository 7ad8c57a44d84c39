"""How long one batch takes on one replica: the batching benchmark's measured curve.

The replica model needs one number per batch size: the time the model instance is busy
with a batch of b requests. The batching benchmark measures it on the real tritonserver
and fits ``base_ms + per_item_ms * b``; the simulator uses that fit, so its replicas are
as fast as the served model was, not as fast as someone guessed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BATCHING_RESULTS = Path(__file__).resolve().parent.parent / "results" / "batching.json"


class CalibrationError(RuntimeError):
    """The batching benchmark's results lack the latency-vs-batch curve."""


@dataclass(frozen=True)
class Calibration:
    """Execution time of one batch of b items: ``base_s + per_item_s * b``."""

    base_s: float
    per_item_s: float
    source: str
    points: tuple[tuple[int, float], ...] = ()

    def batch_seconds(self, size: int) -> float:
        return self.base_s + self.per_item_s * size

    def max_throughput(self, max_batch: int) -> float:
        """Requests per second one replica serves when every batch is full."""
        return max_batch / self.batch_seconds(max_batch)

    def as_dict(self) -> dict[str, Any]:
        return {
            "base_ms": round(self.base_s * 1000, 3),
            "per_item_ms": round(self.per_item_s * 1000, 4),
            "source": self.source,
            "points": [{"batch": b, "median_ms": ms} for b, ms in self.points],
        }


def parse_calibration(document: dict[str, Any], source: str) -> Calibration:
    """The ``latency_curve`` of a batching.json document (pure)."""
    curve = document.get("latency_curve")
    if not isinstance(curve, dict) or "fit" not in curve:
        raise CalibrationError(
            f'{source} has no "latency_curve" with a "fit": run `python -m benchmarks.batching` '
            "first, it measures the latency-vs-batch curve this benchmark is calibrated on"
        )
    fit = curve["fit"]
    base_ms, per_item_ms = float(fit["base_ms"]), float(fit["per_item_ms"])
    if base_ms <= 0 or per_item_ms < 0:
        raise CalibrationError(f"{source}: implausible fit {fit}")
    points = tuple(
        (int(p["batch"]), float(p["median_ms"])) for p in curve.get("points", []) if "batch" in p
    )
    return Calibration(base_ms / 1000, per_item_ms / 1000, source, points)


def load_calibration(path: Path = BATCHING_RESULTS) -> Calibration:
    """Read the batching benchmark's results file (I/O edge)."""
    if not path.exists():
        raise CalibrationError(
            f"{path} does not exist: run `python -m benchmarks.batching` first, it measures "
            "the latency-vs-batch curve this benchmark is calibrated on"
        )
    if path.resolve() == BATCHING_RESULTS:
        source = "benchmarks/results/batching.json"
    else:
        source = f"{path.name} given with --batching-results (not benchmarks/results/batching.json)"
    return parse_calibration(json.loads(path.read_text()), source)
