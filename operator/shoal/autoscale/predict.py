"""Predictive scaling: forecast demand, measure capacity, size the replica count.

A reactive autoscaler pays the metric lag plus the cold start on every rise: by the time
a queue shows, the replicas it asks for are a minute or more away. This module looks
ahead instead. It answers one question, repeatedly: how many replicas must be Ready
*one horizon from now* (the model's cold start plus the metric lag), given

- the model's recent arrival rates (Triton's request counters, or the pool gateway's,
  which see requests before Triton queues them), from which ``forecast_demand``
  projects the short-term trend, remembers recent peaks and, with enough history,
  repeats last day's or last week's shape;
- what one replica sustains at the model's batch settings while meeting the P95
  target, which ``estimate_capacity`` derives from Triton's own execution counters;
- a headroom for what the forecast cannot see.

``required_replicas`` combines them. The HPA stays the actuator: the operator publishes
the number as a metric in the same HPA as the reactive queue-depth and P95 metrics, and
the HPA takes the largest proposal, so the reactive metrics remain a safety net.

Everything here is pure: plain numbers and frozen dataclasses in, dataclasses out, no
clock, no I/O. The operator and the autoscaling replay import the same functions, so
what the replay measures is what ships.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

# Default horizon parts, in seconds. The metric lag is the worst-case age of the signal
# when the HPA acts on it: a scrape interval, a rule evaluation, one predictor run and
# one HPA sync, 15 s each in a typical setup.
DEFAULT_METRIC_LAG_S = 60.0
DAY_S = 86_400.0
WEEK_S = 7 * DAY_S


@dataclass(frozen=True)
class RateHistory:
    """A model's arrival rate (requests/s), one value per ``step_s``, oldest first.

    The last value is the most recent. Idle steps are zeros, not gaps: a quiet minute is
    information (demand was low), whereas a missing sample would be a guess.
    """

    step_s: float
    rates: tuple[float, ...]

    def last(self, seconds: float) -> np.ndarray[tuple[int], np.dtype[np.float64]]:
        """The values covering the last ``seconds`` (at least one when any exist)."""
        n = max(1, math.ceil(seconds / self.step_s))
        return np.asarray(self.rates[-n:], dtype=np.float64)


@dataclass(frozen=True)
class ForecastConfig:
    """How far to look ahead and how much of the past to trust.

    ``horizon_s``: the model's cold start plus the metric lag; a replica asked for now
    serves from then on, so that is the moment the forecast must cover.
    ``trend_window_s``: the span over which the slope is fitted; a few minutes follow a
    steep ramp within a couple of steps while one noisy sample cannot tilt the line.
    ``peak_window_s`` and ``peak_half_life_s``: recent peaks are remembered and fade, so
    bursty traffic keeps its capacity for a while after a burst and the replica count
    falls only as the memory of the peak fades (scale down only when the forecast allows
    it).
    ``season_periods_s``: daily and weekly repetition, used only when the history
    reaches back that far; ``season_window_s`` is the span compared around each point.
    """

    horizon_s: float
    trend_window_s: float = 180.0
    peak_window_s: float = 600.0
    peak_half_life_s: float = 120.0
    level_window_s: float = 60.0
    season_periods_s: tuple[float, ...] = (DAY_S, WEEK_S)
    season_window_s: float = 600.0
    season_scale_limits: tuple[float, float] = (0.5, 2.0)


@dataclass(frozen=True)
class Forecast:
    """Demand one horizon ahead, and the parts it was taken from (requests/s).

    ``rate`` is the largest of ``trend``, ``peak`` and ``seasonal``: each covers a way
    demand rises that the others miss (a ramp, a burst that comes back, a daily peak).
    """

    rate: float
    level: float
    trend: float
    peak: float
    seasonal: float | None


def theil_sen_slope(
    values: np.ndarray[tuple[int], np.dtype[np.float64]], step_s: float
) -> tuple[float, float]:
    """The median of pairwise slopes and the matching intercept at the last point.

    Robust: up to about 29% of the points can be outliers (a burst second, an idle
    scrape) without moving the line, unlike a least-squares fit.
    """
    n = values.size
    if n < 2:
        return 0.0, float(values[-1]) if n else 0.0
    x = (np.arange(n, dtype=np.float64) - (n - 1)) * step_s  # the last point at x = 0
    i, j = np.triu_indices(n, k=1)
    slope = float(np.median((values[j] - values[i]) / (x[j] - x[i])))
    intercept = float(np.median(values - slope * x))
    return slope, intercept


def _seasonal(history: RateHistory, config: ForecastConfig, level: float) -> float | None:
    """Last period's demand one horizon after this moment, scaled by how today's level
    compares with that period's level at this moment; None without a whole period."""
    rates = np.asarray(history.rates, dtype=np.float64)
    step = history.step_s
    half = max(1, round(config.season_window_s / step / 2))
    ahead = max(0, round(config.horizon_s / step))
    best: float | None = None
    lo_scale, hi_scale = config.season_scale_limits
    for period_s in config.season_periods_s:
        p = round(period_s / step)
        now = rates.size - 1
        then = now - p  # this moment, one period ago
        if then - 2 * half < 0:
            continue
        past_level = float(rates[then - 2 * half + 1 : then + 1].mean())
        future = rates[max(0, then + ahead - half) : then + ahead + half + 1]
        if future.size == 0:
            continue
        scale = level / past_level if past_level > 0 else hi_scale
        scale = min(max(scale, lo_scale), hi_scale)
        value = float(future.max()) * scale
        best = value if best is None else max(best, value)
    return best


def forecast_demand(history: RateHistory, config: ForecastConfig) -> Forecast:
    """Arrival rate to provision for one horizon from now.

    - trend: a robust line through the last ``trend_window_s``, extended by the horizon
      (never below zero; a falling trend cannot pull the forecast below the other parts;
      the recent level until the history covers the window);
    - peak: the highest recent rate, halved every ``peak_half_life_s`` of its age, so a
      burst is remembered and the latest rate always counts in full;
    - seasonal: what followed this moment one day (or week) ago, scaled to today's level.
    """
    if not history.rates:
        return Forecast(0.0, 0.0, 0.0, 0.0, None)
    step = history.step_s
    level = float(history.last(config.level_window_s).mean())
    window = history.last(config.trend_window_s)
    if window.size * step >= config.trend_window_s:
        slope, intercept = theil_sen_slope(window, step)
        trend = max(0.0, intercept + slope * config.horizon_s)
    else:
        # A slope from a few points, extended by a horizon several times their span,
        # turns noise into a surge: until the window is full, the trend is the level.
        trend = level
    recent = history.last(config.peak_window_s)
    ages = (recent.size - 1 - np.arange(recent.size)) * step
    peak = float(np.max(recent * np.exp2(-ages / config.peak_half_life_s)))
    seasonal = _seasonal(history, config, level)
    rate = max(trend, peak, seasonal or 0.0)
    return Forecast(rate=rate, level=level, trend=trend, peak=peak, seasonal=seasonal)


@dataclass(frozen=True)
class BatchCounters:
    """One replica's Triton counters over one interval (increments, not totals).

    ``executions``: ``nv_inference_exec_count`` (batches run); ``inferences``:
    ``nv_inference_count`` (requests in them); ``compute_s``:
    ``nv_inference_compute_infer_duration_us`` / 1e6 (time the model spent on them).
    """

    executions: float
    inferences: float
    compute_s: float


@dataclass(frozen=True)
class BatchSettings:
    """What bounds a replica's throughput: the batcher's settings and the SLO."""

    max_batch_size: int
    max_queue_delay_s: float
    target_p95_s: float


@dataclass(frozen=True)
class CapacityConfig:
    """``utilization``: the share of a replica's full-batch throughput to plan on; under
    random arrivals the queue (and the P95) grows steeply near saturation, and about 85%
    keeps it a fraction of a batch time. ``min_executions``: batches an estimate needs
    before it replaces the last good one (below that, traffic is too low to measure)."""

    utilization: float = 0.85
    min_executions: float = 200.0
    min_batch_spread: float = 2.0


@dataclass(frozen=True)
class CapacityEstimate:
    """Requests/s one replica sustains within the P95 target, and how it was found.

    ``base_s`` and ``per_item_s`` are the fitted cost of a batch (``base_s + per_item_s
    * size``); ``source`` is ``fit`` (a line through batches of different sizes),
    ``observed`` (one operating point: the throughput at the batch size seen, a lower
    bound since larger batches amortise the fixed cost), or ``previous`` (traffic too
    low; the last good estimate kept).
    """

    per_replica_rps: float
    batch_size: int
    base_s: float
    per_item_s: float
    source: str


def _cost_line(
    observations: Sequence[BatchCounters], min_spread: float
) -> tuple[float, float] | None:
    """Least squares of compute time per execution against batch size, weighted by
    executions; None when the batch sizes seen are too alike to separate the fixed cost
    from the per-item cost, or the fit is not physical."""
    points = [o for o in observations if o.executions > 0]
    if len(points) < 3:
        return None
    w = np.array([o.executions for o in points])
    b = np.array([o.inferences / o.executions for o in points])
    c = np.array([o.compute_s / o.executions for o in points])
    if float(b.max() - b.min()) < min_spread:
        return None
    bm = float(np.average(b, weights=w))
    cm = float(np.average(c, weights=w))
    var = float(np.average((b - bm) ** 2, weights=w))
    per_item = float(np.average((b - bm) * (c - cm), weights=w)) / var
    base = cm - per_item * bm
    if per_item < 0 or base <= 0:
        return None
    return base, per_item


def _best_batch(base_s: float, per_item_s: float, settings: BatchSettings) -> int:
    """The largest batch size whose latency fits the P95 target: a request may wait the
    queue delay, then for the batch in flight, then run in its own."""
    for size in range(settings.max_batch_size, 0, -1):
        if settings.max_queue_delay_s + 2 * (base_s + per_item_s * size) <= settings.target_p95_s:
            return size
    return 1


def estimate_capacity(
    observations: Sequence[BatchCounters],
    settings: BatchSettings,
    previous: CapacityEstimate | None,
    config: CapacityConfig | None = None,
) -> CapacityEstimate | None:
    """What one replica sustains, from recent per-replica counter increments.

    With batches of several sizes, fit the batch cost line and plan on the largest batch
    that meets the latency target (the batcher fills batches as load grows, so the
    throughput at that size is what a loaded replica reaches). With one size only, the
    throughput at that size is a safe lower bound, and a previous fit wins over it. With
    too few batches to measure, the previous estimate stands (None if there is none).
    """
    cfg = config or CapacityConfig()
    executions = sum(o.executions for o in observations)
    if executions < cfg.min_executions:
        return previous if previous is None else _as_previous(previous)
    line = _cost_line(observations, cfg.min_batch_spread)
    if line is not None:
        base, per_item = line
        size = _best_batch(base, per_item, settings)
        rps = cfg.utilization * size / (base + per_item * size)
        return CapacityEstimate(rps, size, base, per_item, "fit")
    if previous is not None and previous.source in ("fit", "previous"):
        return _as_previous(previous)
    inferences = sum(o.inferences for o in observations)
    compute = sum(o.compute_s for o in observations)
    if compute <= 0:
        return previous
    size = max(1, round(inferences / executions))
    per_batch = compute / executions
    rps = cfg.utilization * (inferences / executions) / per_batch
    return CapacityEstimate(rps, size, per_batch, 0.0, "observed")


def _as_previous(previous: CapacityEstimate) -> CapacityEstimate:
    if previous.source == "observed":
        return previous
    return CapacityEstimate(
        previous.per_replica_rps,
        previous.batch_size,
        previous.base_s,
        previous.per_item_s,
        "previous",
    )


def required_replicas(
    forecast: Forecast,
    capacity: CapacityEstimate,
    headroom: float,
    min_replicas: int = 1,
    max_replicas: int | None = None,
) -> int:
    """``ceil(forecast / capacity * (1 + headroom))``, within the replica bounds.

    The forecast already holds the recent peak, so this number falls only as fast as
    the peak's memory fades: scale-down happens when the forecast allows it.
    """
    if capacity.per_replica_rps <= 0:
        raise ValueError("capacity per replica must be positive")
    # A tiny tolerance keeps float noise (e.g. 3.0000000001) from adding a replica.
    n = math.ceil(forecast.rate * (1.0 + headroom) / capacity.per_replica_rps - 1e-9)
    n = max(n, min_replicas)
    return n if max_replicas is None else min(n, max_replicas)
