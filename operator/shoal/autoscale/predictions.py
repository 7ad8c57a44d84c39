"""What the predictive loop found for each model, and what it keeps between rounds."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from shoal.metrics.status import format_seconds

if TYPE_CHECKING:  # numpy's module: loaded by the predictive round alone
    from shoal.autoscale.predict import CapacityEstimate

ModelKey = tuple[str, str]  # (namespace, name)


@dataclass(frozen=True)
class Prediction:
    """One model's figures from the latest round. ``capacity`` and ``required`` are None
    until the model has served enough batches to measure what a replica sustains."""

    forecast_rate: float
    capacity: CapacityEstimate | None
    required: int | None
    cold_start_s: float | None
    # The replicas the forecast's learned error needs standing (predictive.warmPool).
    warm_pool: int | None = None

    def status(self) -> dict[str, Any]:
        """The model's status fields (camelCase), rounded for reading."""
        return {
            "forecastRate": round(self.forecast_rate, 2),
            "capacityPerReplica": (
                round(self.capacity.per_replica_rps, 2) if self.capacity is not None else None
            ),
            "requiredReplicas": self.required,
            "coldStart": (
                format_seconds(self.cold_start_s) if self.cold_start_s is not None else None
            ),
        }


@dataclass
class Predictions:
    """The latest prediction per model (read by the models' passes for their status),
    and the measurements a round carries to the next: the last good capacity (a quiet
    model keeps it) and each model's cold start with when it was read."""

    _latest: dict[ModelKey, Prediction] = field(default_factory=dict)
    _cold_starts: dict[ModelKey, tuple[float, float | None]] = field(default_factory=dict)
    # Each model's replica ceiling as its last pass planned it (its HPA's maxReplicas):
    # the forecast never asks for more.
    _ceilings: dict[ModelKey, int] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)

    def get(self, key: ModelKey) -> Prediction | None:
        with self._guard:
            return self._latest.get(key)

    def replace(self, latest: dict[ModelKey, Prediction]) -> None:
        with self._guard:
            self._latest = dict(latest)
            for key in list(self._cold_starts):
                if key not in latest:
                    del self._cold_starts[key]

    def keys(self) -> set[ModelKey]:
        with self._guard:
            return set(self._latest)

    def set_ceiling(self, key: ModelKey, replicas: int) -> None:
        with self._guard:
            self._ceilings[key] = replicas

    def ceiling(self, key: ModelKey) -> int | None:
        with self._guard:
            return self._ceilings.get(key)

    def forget(self, key: ModelKey) -> None:
        """The model is gone: drop what its passes left here."""
        with self._guard:
            self._ceilings.pop(key, None)

    def cold_start(self, key: ModelKey) -> tuple[float, float | None] | None:
        """(monotonic time read, seconds) of the model's cold start, if read before."""
        with self._guard:
            return self._cold_starts.get(key)

    def set_cold_start(self, key: ModelKey, read_at: float, seconds: float | None) -> None:
        with self._guard:
            self._cold_starts[key] = (read_at, seconds)
