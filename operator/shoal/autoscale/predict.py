"""Predictive scaling: forecast demand, measure capacity, size the replica count.

A reactive autoscaler pays the metric lag plus the cold start on every rise: by the time
a queue shows, the replicas it asks for are a minute or more away. This module looks
ahead instead. It answers one question, repeatedly: how many replicas must be Ready
*one horizon from now* (the model's cold start plus the metric lag), given

- the model's recent arrival rates (Triton's request counters, or the pool gateway's,
  which see requests before Triton queues them), from which ``forecast_demand``
  projects the recent level and short-term trend and, with enough history, repeats
  last day's or last week's shape;
- how far such forecasts have fallen short before: the forecast made one horizon ago
  is recomputed from the history up to then and compared with the highest rate that
  arrived since, over the last hours, and a high quantile of those shortfalls is the
  headroom (conformal-style). A steady model learns a small one, a bursty model keeps
  its bursts' worth of capacity standing, and no headroom is tuned by hand;
- what one replica sustains at the model's batch settings while meeting the P95
  target, which ``estimate_capacity`` derives from Triton's own execution counters.

``required_replicas`` combines them, and ``warm_pool_replicas`` sizes the warm pool
(``minReplicas: auto``) from the learned error alone. The HPA stays the actuator: the
operator publishes the number as a metric in the same HPA as the reactive queue-depth
and P95 metrics, and the HPA takes the largest proposal, so the reactive metrics remain
a safety net.

Everything here is pure: plain numbers and frozen dataclasses in, dataclasses out, no
clock, no I/O. The operator and the autoscaling replay import the same functions, so
what the replay measures is what ships.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

# Default horizon parts, in seconds. The metric lag is the worst-case age of the signal
# when the HPA acts on it: a scrape interval, a rule evaluation, one predictor run and
# one HPA sync, 15 s each in a typical setup.
DEFAULT_METRIC_LAG_S = 60.0
DAY_S = 86_400.0
WEEK_S = 7 * DAY_S
# Defaults of the learned error (see ForecastConfig). 0.99: one horizon in a hundred may
# outrun the standing capacity, which the reactive metrics then catch. Three hours: long
# enough to hold several bursts of a bursty model, short enough that a model whose
# traffic calmed down stops paying for old bursts. Ten minutes of scored forecasts
# before the quantile is trusted alone; until then at least half the forecast again.
DEFAULT_ERROR_QUANTILE = 0.99
DEFAULT_ERROR_WINDOW_S = 3 * 3600.0
DEFAULT_MIN_ERROR_HISTORY_S = 600.0
DEFAULT_FALLBACK_HEADROOM = 0.5

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]


@dataclass(frozen=True)
class RateHistory:
    """A model's arrival rate (requests/s), one value per ``step_s``, oldest first.

    The last value is the most recent. Idle steps are zeros, not gaps: a quiet minute is
    information (demand was low), whereas a missing sample would be a guess.
    """

    step_s: float
    rates: tuple[float, ...]

    def last(self, seconds: float) -> Floats:
        """The values covering the last ``seconds`` (at least one when any exist)."""
        n = max(1, math.ceil(seconds / self.step_s))
        return np.asarray(self.rates[-n:], dtype=np.float64)


@dataclass(frozen=True)
class ForecastConfig:
    """How far to look ahead, how much of the past to trust, and how to learn the error.

    ``horizon_s``: the model's cold start plus the metric lag; a replica asked for now
    serves from then on, so that is the moment the forecast must cover.
    ``level_window_s``: the recent level is the median of this span's rates, so one noisy
    or idle sample does not move it.
    ``trend_window_s``: the span over which the slope is fitted; a few minutes follow a
    steep ramp within a couple of steps while one noisy sample cannot tilt the line.
    ``peak_half_life_s`` and ``peak_window_s``: an optional memory of recent peaks that
    fades (None: off). The learned error already keeps the capacity that bursts need
    standing, and only for as long as they keep coming, so the memory is off by default.
    ``season_periods_s``: daily and weekly repetition, used only when the history
    reaches back that far; ``season_window_s`` is the span compared around each point.
    ``cool_down_s``: the HPA's scale-down stabilization window. The HPA keeps the highest
    count asked for over that span, so what stands after a forecast is the highest
    forecast of the span, not the forecast alone.

    The learned error (conformal-style): at every step of the last ``error_window_s``,
    the forecast made then, or the highest of the cool-down before it, which the HPA
    still holds, is compared with the highest rate that arrived over the horizon after
    it; the error to provision for is the ``error_quantile`` of the
    positive differences (the order statistic that split-conformal prediction uses, so
    with few errors it is the largest one). A steady model gets little headroom; a
    bursty one keeps its bursts' worth standing while they recur within the window.
    Until ``min_error_history_s`` of forecasts have been scored, the error is at least
    ``fallback_headroom`` times the forecast.
    """

    horizon_s: float
    level_window_s: float = 60.0
    trend_window_s: float = 180.0
    peak_window_s: float = 600.0
    peak_half_life_s: float | None = None
    season_periods_s: tuple[float, ...] = (DAY_S, WEEK_S)
    season_window_s: float = 600.0
    season_scale_limits: tuple[float, float] = (0.5, 2.0)
    cool_down_s: float = 0.0
    error_quantile: float = DEFAULT_ERROR_QUANTILE
    error_window_s: float = DEFAULT_ERROR_WINDOW_S
    min_error_history_s: float = DEFAULT_MIN_ERROR_HISTORY_S
    fallback_headroom: float = DEFAULT_FALLBACK_HEADROOM


@dataclass(frozen=True)
class Forecast:
    """Demand one horizon ahead, the parts it was taken from, and its learned error
    (requests/s).

    ``rate`` is the point forecast: the largest of ``trend``, ``peak`` (0 when the peak
    memory is off) and ``seasonal``, each covering a way demand rises that the others
    miss (a ramp, a burst that comes back, a daily peak). ``error`` is what the rate has
    fallen short by, at the configured quantile, over the horizon: ``demand`` (rate plus
    error) is what to provision for. ``errors`` counts the past forecasts scored;
    ``fallback`` is True while too few were to trust the quantile alone.
    """

    rate: float
    level: float
    trend: float
    peak: float
    seasonal: float | None
    error: float = 0.0
    errors: int = 0
    fallback: bool = False

    @property
    def demand(self) -> float:
        """The arrival rate to provision for: the forecast plus its learned error."""
        return self.rate + self.error


def _steps(seconds: float, step_s: float) -> int:
    return max(1, math.ceil(seconds / step_s - 1e-9))


def _trailing(rates: Floats, width: int, at: Ints) -> Floats:
    """Row k: the ``width`` rates ending at index ``at[k]``, NaN before the first."""
    padded = np.concatenate([np.full(width - 1, np.nan), rates])
    view: Floats = np.lib.stride_tricks.sliding_window_view(padded, width)
    return view[at]


@dataclass(frozen=True)
class _Parts:
    rate: Floats
    level: Floats
    trend: Floats
    peak: Floats
    seasonal: Floats  # NaN where no period applies


def _forecasts(rates: Floats, step: float, config: ForecastConfig, at: Ints) -> _Parts:
    """The forecast each index in ``at`` would have made from the rates up to it.

    Vectorised over the indices, so scoring hours of past forecasts costs about as much
    as one; each one reads only the rates up to its own index.
    """
    horizon = config.horizon_s
    level = np.median(_trailing(rates, _steps(config.level_window_s, step), at), axis=1)
    # nanmedian would be the exact "median of what exists", but only the first steps of
    # a history are short, and there the NaN-free median of fewer values is what counts.
    short = at < _steps(config.level_window_s, step) - 1
    for k in np.flatnonzero(short):
        level[k] = float(np.median(rates[: at[k] + 1]))
    width = _steps(config.trend_window_s, step)
    trend = level.copy()
    full = at >= width - 1
    if width >= 2 and full.any():
        # A slope from a few points, extended by a horizon several times their span,
        # turns noise into a surge: until the window is full, the trend is the level.
        rows = _trailing(rates, width, at[full])
        x = (np.arange(width, dtype=np.float64) - (width - 1)) * step
        i, j = np.triu_indices(width, k=1)
        slope = np.median((rows[:, j] - rows[:, i]) / (x[j] - x[i]), axis=1)
        intercept = np.median(rows - slope[:, None] * x, axis=1)
        trend[full] = np.maximum(0.0, intercept + slope * horizon)
    if config.peak_half_life_s:
        span = _steps(config.peak_window_s, step)
        ages = (span - 1 - np.arange(span)) * step
        decayed = _trailing(rates, span, at) * np.exp2(-ages / config.peak_half_life_s)
        peak = np.nanmax(decayed, axis=1)
    else:
        peak = np.zeros(at.size)
    seasonal = _seasonal(rates, step, config, level, at)
    # A falling trend lowers the forecast no further than the level: demand that has
    # been there in the last level window may come back within the horizon, and the
    # scored errors would otherwise learn the slope's noise as headroom.
    rate = np.maximum.reduce([level, trend, peak, np.nan_to_num(seasonal, nan=0.0)])
    return _Parts(rate, level, trend, peak, seasonal)


def _seasonal(
    rates: Floats, step: float, config: ForecastConfig, level: Floats, at: Ints
) -> Floats:
    """Last period's demand one horizon after each moment, scaled by how the level then
    compares with that period's level at the same moment; NaN without a whole period.

    A period no longer than the horizon cannot repeat itself ahead and is skipped.
    """
    best = np.full(at.size, np.nan)
    half = max(1, round(config.season_window_s / step / 2))
    ahead = max(0, round(config.horizon_s / step))
    lo_scale, hi_scale = config.season_scale_limits
    for period_s in config.season_periods_s:
        p = round(period_s / step)
        if p <= ahead + half:
            continue
        then = at - p  # each moment, one period ago
        ok = then - 2 * half + 1 >= 0
        if not ok.any():
            continue
        then_ok = then[ok]
        past_level = np.mean(_trailing(rates, 2 * half, then_ok), axis=1)
        start = np.maximum(0, then_ok + ahead - half)
        future = np.array(
            [rates[s : c + half + 1].max() for s, c in zip(start, then_ok + ahead, strict=True)]
        )
        with np.errstate(divide="ignore", invalid="ignore"):
            scale = np.where(past_level > 0, level[ok] / past_level, hi_scale)
        value = future * np.clip(scale, lo_scale, hi_scale)
        best[ok] = np.fmax(best[ok], value)
    return best


def conformal_quantile(errors: Floats, quantile: float) -> float:
    """The ``ceil((n + 1) q)``-th smallest of the n errors (the largest when that rank
    exceeds n); 0 without errors. Split-conformal prediction's bound: a new error falls
    below it with probability at least q when errors are exchangeable."""
    n = errors.size
    if n == 0:
        return 0.0
    rank = min(n, math.ceil((n + 1) * quantile - 1e-9))
    return float(np.partition(errors, rank - 1)[rank - 1])


def forecast_demand(history: RateHistory, config: ForecastConfig) -> Forecast:
    """Arrival rate one horizon from now, and the error to provision for on top.

    - trend: a robust line through the last ``trend_window_s``, extended by the horizon
      (never below zero; the level, the median of the last ``level_window_s``, until the
      history covers the window);
    - peak (optional): the highest recent rate, halved every ``peak_half_life_s`` of its
      age;
    - seasonal: what followed this moment one day (or week) ago, scaled to today's level;
    - error: the forecasts made over the last ``error_window_s`` are recomputed from the
      history up to each of them and scored against the highest rate that arrived over
      the horizon after it, each credited with the highest forecast of the cool-down
      before it (what the HPA's scale-down window keeps standing); the
      ``error_quantile`` of the positive shortfalls is the error (see
      ``ForecastConfig``). Stateless: the history is the only memory.
    """
    if not history.rates:
        return Forecast(0.0, 0.0, 0.0, 0.0, None, 0.0, 0, True)
    rates = np.asarray(history.rates, dtype=np.float64)
    step = history.step_s
    n = rates.size
    h = _steps(config.horizon_s, step)
    window = _steps(config.error_window_s, step)
    # Earlier forecasts the HPA still holds. It drops one exactly a window old, so this
    # credits one step more than it keeps; the metric lag in the horizon covers that.
    hold = int(config.cool_down_s // step)
    first = max(0, n - 1 - h - window + 1 - hold)
    at = np.arange(first, n, dtype=np.int64)
    parts = _forecasts(rates, step, config, at)
    held = parts.rate
    if hold:
        held = np.nanmax(_trailing(parts.rate, hold + 1, np.arange(at.size)), axis=1)
    # Forecasts made before the history covered the trend window are the warm-up's, not
    # the forecaster's: they are not scored.
    warm = _steps(max(config.level_window_s, config.trend_window_s), step) - 1
    mask = (at <= n - 1 - h) & (at >= max(warm, n - h - window))
    scored = at[mask]
    if scored.size:
        ahead: Floats = np.lib.stride_tricks.sliding_window_view(rates[1:], h)[scored]
        shortfall = ahead.max(axis=1) - held[mask]
        error = conformal_quantile(shortfall[shortfall > 0], config.error_quantile)
    else:
        error = 0.0
    rate = float(parts.rate[-1])
    fallback = scored.size * step < config.min_error_history_s
    if fallback:
        error = max(error, config.fallback_headroom * rate)
    seasonal = float(parts.seasonal[-1])
    return Forecast(
        rate=rate,
        level=float(parts.level[-1]),
        trend=float(parts.trend[-1]),
        peak=float(parts.peak[-1]),
        seasonal=None if math.isnan(seasonal) else seasonal,
        error=error,
        errors=int(scored.size),
        fallback=fallback,
    )


@dataclass(frozen=True)
class BatchCounters:
    """One replica's Triton counters over one interval (increments, not totals).

    ``executions``: ``nv_inference_exec_count`` (batches run); ``inferences``:
    ``nv_inference_count`` (requests in them); ``compute_s``:
    ``nv_inference_compute_infer_duration_us`` / 1e6. Triton counts compute time per
    request: a batch of eight adds its execution time eight times. So ``compute_s`` is
    the sum of size x time over the batches, and ``compute_s / executions`` is not the
    time of a batch (it is that times the batch size).
    """

    executions: float
    inferences: float
    compute_s: float

    @property
    def batch_s(self) -> float:
        """The mean time of a batch as its requests saw it (weighted by batch size)."""
        return self.compute_s / self.inferences if self.inferences > 0 else 0.0


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
    """Least squares of a batch's time (``BatchCounters.batch_s``) against its size,
    weighted by executions; None when the batch sizes seen are too alike to separate the
    fixed cost from the per-item cost, or the fit is not physical."""
    points = [o for o in observations if o.executions > 0]
    if len(points) < 3:
        return None
    w = np.array([o.executions for o in points])
    b = np.array([o.inferences / o.executions for o in points])
    c = np.array([o.batch_s for o in points])
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
    per_batch = compute / inferences  # per request: see BatchCounters
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
    headroom: float = 0.0,
    min_replicas: int = 1,
    max_replicas: int | None = None,
) -> int:
    """``ceil(forecast.demand / capacity * (1 + headroom))``, within the replica bounds.

    ``forecast.demand`` already holds the learned error, so ``headroom`` is an optional
    extra margin (0 by default). The demand falls only as the recent rates and the
    errors in the window allow: scale-down happens when the forecast allows it.
    """
    if capacity.per_replica_rps <= 0:
        raise ValueError("capacity per replica must be positive")
    # A tiny tolerance keeps float noise (e.g. 3.0000000001) from adding a replica.
    n = math.ceil(forecast.demand * (1.0 + headroom) / capacity.per_replica_rps - 1e-9)
    n = max(n, min_replicas)
    return n if max_replicas is None else min(n, max_replicas)


def warm_pool_replicas(
    forecast: Forecast,
    capacity: CapacityEstimate,
    min_replicas: int = 1,
    max_replicas: int | None = None,
) -> int:
    """``minReplicas: auto``: ``ceil(forecast.error / capacity)``, within the bounds.

    The learned error is how far demand has outrun the forecast within one horizon (the
    cold start plus the metric lag): the replicas that must already be standing when
    the forecast is wrong, since any asked for then arrive one cold start too late.
    """
    if capacity.per_replica_rps <= 0:
        raise ValueError("capacity per replica must be positive")
    n = max(math.ceil(forecast.error / capacity.per_replica_rps - 1e-9), min_replicas)
    return n if max_replicas is None else min(n, max_replicas)
