"""Arrival processes: the Azure conversation trace, amplified, and synthetic bursts.

One replica serves a couple of hundred requests a second; the trace carries about five.
Compressing time would raise the rate but would also shrink the trace's bursts relative
to the autoscalers' fixed clocks (15 s HPA sync, 60 s cold start), so the rate is
amplified instead: each arrival becomes k arrivals spread uniformly over the following
``jitter_s``. The shape of the load at every timescale the autoscalers see (seconds to
an hour) is the trace's; only sub-second structure is smoothed.

Each request is one item of work (one row of a batch): this benchmark serves a batched
model whose cost is per batch and per item, as the batching benchmark measured it. The
trace's token counts describe LLM requests and are not used: token-level cost
(prefill, decode, KV cache) is a different serving model.
"""

from __future__ import annotations

import csv
import datetime as dt
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

TRACES = Path(__file__).resolve().parent.parent / "traces"
AZURE_CONV = TRACES / "AzureLLMInferenceTrace_conv.csv"
WINDOW_S = 60.0

Arrivals = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Workload:
    """Sorted arrival times (seconds from 0) and how they were made."""

    name: str
    arrivals: Arrivals
    horizon_s: float  # whole one-minute windows only
    description: dict[str, Any]

    @property
    def windows(self) -> int:
        return round(self.horizon_s / WINDOW_S)

    def rate_per_window(self) -> npt.NDArray[np.float64]:
        counts = np.bincount((self.arrivals // WINDOW_S).astype(np.int64), minlength=self.windows)
        return counts[: self.windows] / WINDOW_S


def parse_trace_timestamps(lines: list[str]) -> Arrivals:
    """Seconds since the first request, from the CSV's TIMESTAMP column (pure)."""
    rows = csv.reader(lines)
    header = next(rows)
    column = header.index("TIMESTAMP")
    stamps = [dt.datetime.fromisoformat(row[column][:26]) for row in rows if row]
    first = stamps[0]
    return np.array([(s - first).total_seconds() for s in stamps], dtype=np.float64)


def load_trace(path: Path = AZURE_CONV) -> Arrivals:
    """The trace's arrival times (I/O edge)."""
    return parse_trace_timestamps(path.read_text().splitlines())


def amplify(
    base: Arrivals, k: int, jitter_s: float, seed: int, horizon_s: float | None = None
) -> Arrivals:
    """Each arrival becomes k, spread uniformly over [t, t + jitter_s) (pure, seeded)."""
    rng = np.random.default_rng(seed)
    out = (np.repeat(base, k) + rng.uniform(0.0, jitter_s, size=base.size * k)).astype(np.float64)
    out.sort()
    if horizon_s is not None:
        out = out[out < horizon_s]
    return out


def peak_window_rate(base: Arrivals) -> float:
    """Highest one-minute request rate of a trace, requests per second."""
    counts = np.bincount((base // WINDOW_S).astype(np.int64))
    return float(counts.max()) / WINDOW_S


def choose_amplification(base: Arrivals, replica_rate: float, peak_replicas: int) -> int:
    """The k at which the busiest minute needs about ``peak_replicas`` replicas.

    ``replica_rate`` is what one replica serves flat out (every batch full); the
    autoscalers need somewhat more replicas than this bound at the peak.
    """
    return max(1, math.floor(peak_replicas * replica_rate / peak_window_rate(base)))


def azure_workload(
    base: Arrivals, k: int, jitter_s: float, seed: int, minutes: int | None = None
) -> Workload:
    """The Azure trace at k times its rate, cut to whole minutes."""
    whole = math.floor(float(base[-1]) / WINDOW_S)
    if minutes is not None:
        whole = min(whole, minutes)
    horizon = whole * WINDOW_S
    arrivals = amplify(base[base < horizon], k, jitter_s, seed, horizon)
    return Workload(
        name="azure-conv",
        arrivals=arrivals,
        horizon_s=horizon,
        description={
            "source": f"benchmarks/traces/{AZURE_CONV.name} (Azure LLM inference trace 2023, "
            "conversation; Patel et al., Splitwise, ISCA 2024; CC BY 4.0)",
            "trace_requests": int(np.count_nonzero(base < horizon)),
            "amplification_k": k,
            "jitter_s": jitter_s,
            "minutes": whole,
        },
    )


@dataclass(frozen=True)
class Burst:
    """The rate multiplier ``factor`` between ``start_s`` and ``start_s + length_s``.

    ``ramp_s`` > 0 makes the change linear over that long at both ends instead of a step.
    """

    start_s: float
    length_s: float
    factor: float
    ramp_s: float = 0.0


DEFAULT_BURSTS = (
    Burst(start_s=360, length_s=120, factor=5.0),  # a spike: 5x for two minutes
    Burst(start_s=900, length_s=480, factor=2.5),  # a step: 2.5x for eight minutes
    Burst(start_s=1680, length_s=120, factor=5.0),  # another spike
    Burst(start_s=2040, length_s=300, factor=4.0, ramp_s=150),  # a ramp up and down
)


def rate_multiplier(
    t: npt.NDArray[np.float64], bursts: tuple[Burst, ...]
) -> npt.NDArray[np.float64]:
    """The baseline multiplier at each time: 1, or the largest burst active (pure)."""
    factor = np.ones_like(t)
    for b in bursts:
        if b.ramp_s > 0:
            up = np.clip((t - b.start_s) / b.ramp_s, 0.0, 1.0)
            down = np.clip((b.start_s + b.length_s - t) / b.ramp_s, 0.0, 1.0)
            level = 1.0 + (b.factor - 1.0) * np.minimum(up, down)
        else:
            inside = (t >= b.start_s) & (t < b.start_s + b.length_s)
            level = np.where(inside, b.factor, 1.0)
        factor = np.maximum(factor, level)
    return factor


def burst_workload(
    base_rate: float, minutes: int, seed: int, bursts: tuple[Burst, ...] = DEFAULT_BURSTS
) -> Workload:
    """A Poisson baseline with step, spike and ramp bursts (seeded, deterministic).

    Non-homogeneous Poisson arrivals by thinning: candidates at the peak rate, each kept
    with probability rate(t) / peak.
    """
    horizon = minutes * WINDOW_S
    kept = tuple(b for b in bursts if b.start_s < horizon)
    peak = base_rate * max([1.0, *(b.factor for b in kept)])
    rng = np.random.default_rng(seed)
    count = rng.poisson(peak * horizon)
    candidates = np.sort(rng.uniform(0.0, horizon, size=count))
    keep = rng.uniform(0.0, 1.0, size=count) < rate_multiplier(candidates, kept) * base_rate / peak
    return Workload(
        name="synthetic-bursts",
        arrivals=candidates[keep].astype(np.float64),
        horizon_s=horizon,
        description={
            "source": "synthetic, non-homogeneous Poisson (thinning), seeded",
            "base_rate_per_s": round(base_rate, 1),
            "minutes": minutes,
            "seed": seed,
            "bursts": [
                {
                    "start_s": b.start_s,
                    "length_s": b.length_s,
                    "factor": b.factor,
                    "shape": "ramp" if b.ramp_s else "step",
                }
                for b in kept
            ],
        },
    )


def describe_rates(workload: Workload) -> dict[str, float]:
    """Mean and peak one-minute rates, and the busiest second."""
    per_window = workload.rate_per_window()
    per_second = np.bincount(workload.arrivals.astype(np.int64))
    return {
        "requests": int(workload.arrivals.size),
        "mean_rate_per_s": round(float(per_window.mean()), 1),
        "peak_minute_rate_per_s": round(float(per_window.max()), 1),
        "peak_second_rate_per_s": float(per_second.max()),
    }
