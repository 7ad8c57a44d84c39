"""The predictive signal: demand forecast, capacity per replica, required replicas."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest

from shoal.autoscale.predict import (
    DAY_S,
    DEFAULT_FALLBACK_HEADROOM,
    BatchCounters,
    BatchSettings,
    CapacityEstimate,
    Forecast,
    ForecastConfig,
    RateHistory,
    conformal_quantile,
    estimate_capacity,
    forecast_demand,
    required_replicas,
    warm_pool_replicas,
)

STEP = 15.0
CONFIG = ForecastConfig(horizon_s=120.0)
SETTINGS = BatchSettings(max_batch_size=32, max_queue_delay_s=0.002, target_p95_s=0.25)


def history(rates: list[float]) -> RateHistory:
    return RateHistory(STEP, tuple(rates))


def test_a_rising_ramp_is_projected_one_horizon_ahead() -> None:
    # +1 request/s every second: 15 per step; the forecast looks 120 s ahead.
    rates = [100.0 + 15.0 * i for i in range(40)]
    forecast = forecast_demand(history(rates), CONFIG)
    assert forecast.trend == pytest.approx(rates[-1] + 120.0)
    assert forecast.rate == forecast.trend


def test_a_short_history_has_no_trend_yet_and_falls_back_to_the_default_headroom() -> None:
    forecast = forecast_demand(history([1000.0, 2000.0, 3000.0]), CONFIG)
    assert forecast.trend == pytest.approx(2000.0)  # the level of the last minute
    assert forecast.rate == pytest.approx(2000.0)
    # No forecast scored yet: the error is the documented fallback share of the rate.
    assert forecast.fallback
    assert forecast.errors == 0
    assert forecast.error == pytest.approx(DEFAULT_FALLBACK_HEADROOM * 2000.0)
    assert forecast.demand == pytest.approx(forecast.rate + forecast.error)


def test_idle_history_forecasts_nothing_and_empty_history_too() -> None:
    assert forecast_demand(history([0.0] * 50), CONFIG).rate == 0.0
    assert forecast_demand(history([]), CONFIG).rate == 0.0


def test_an_idle_minute_inside_steady_traffic_does_not_drop_the_forecast() -> None:
    rates = [200.0] * 30 + [0.0] * 4 + [200.0] * 2
    assert forecast_demand(history(rates), CONFIG).rate >= 200.0


def test_a_burst_is_remembered_and_fades_with_the_optional_peak_memory() -> None:
    config = replace(CONFIG, peak_half_life_s=120.0)
    base = [100.0] * 40
    burst = [500.0] * 4
    just_after = forecast_demand(history([*base, *burst, 100.0]), config)
    assert just_after.peak == pytest.approx(500.0 * 2 ** (-15 / 120))
    later = forecast_demand(history([*base, *burst, *[100.0] * 16]), config)
    assert 100.0 < later.rate < just_after.rate
    gone = forecast_demand(history([*base, *burst, *[100.0] * 60]), config)
    assert gone.rate == pytest.approx(100.0)
    assert forecast_demand(history([*base, *burst, 100.0]), CONFIG).peak == 0.0  # off


def noisy(n: int, level: float, spread: float, seed: int = 7) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in level + rng.uniform(-spread, spread, size=n)]


def test_a_steady_trace_learns_a_small_error() -> None:
    # Two hours at 1000 requests/s, +-2% noise: the error is a few percent of the rate.
    forecast = forecast_demand(history(noisy(480, 1000.0, 20.0)), CONFIG)
    assert not forecast.fallback
    assert forecast.errors > 400
    assert 0.0 < forecast.error < 60.0
    assert forecast.demand < 1100.0


def test_a_bursty_history_keeps_its_bursts_worth_of_capacity_standing() -> None:
    # 1000 requests/s with a 5x burst of two minutes every 30 minutes; now, between
    # bursts, the rate is back at 1000 but the error keeps the burst's capacity.
    rates = noisy(480, 1000.0, 20.0)
    for start in range(60, 480, 120):
        rates[start : start + 8] = [5000.0] * 8
    rates[-20:] = noisy(20, 1000.0, 20.0, seed=8)
    forecast = forecast_demand(history(rates), CONFIG)
    assert forecast.rate == pytest.approx(1000.0, rel=0.05)
    assert forecast.error >= 3900.0
    assert forecast.demand >= 4900.0
    # The same history with the bursts older than the error window: no headroom left.
    calm = forecast_demand(history(rates), replace(CONFIG, error_window_s=600.0))
    assert calm.error < 100.0


def test_idle_minutes_between_busy_ones_keep_capacity_for_the_return() -> None:
    # On-off traffic: busy at 200 requests/s for four minutes, idle for four, for an
    # hour; now idle. The forecast is 0 but the demand covers the next busy spell.
    rates = ([200.0] * 16 + [0.0] * 16) * 8
    forecast = forecast_demand(history(rates[:-8]), CONFIG)
    assert forecast.rate == 0.0
    assert forecast.error == pytest.approx(200.0)
    capacity = CapacityEstimate(100.0, 32, 0.022, 0.001, "fit")
    assert required_replicas(forecast, capacity, min_replicas=0) == 2
    assert warm_pool_replicas(forecast, capacity) == 2
    # All idle: nothing forecast, nothing learned.
    idle = forecast_demand(history([0.0] * 300), CONFIG)
    assert (idle.rate, idle.error, idle.fallback) == (0.0, 0.0, False)


def test_what_the_hpa_still_holds_is_credited_before_headroom_is_learned() -> None:
    # The same on-off traffic. An HPA that keeps a count for 5 minutes after it was asked
    # for still holds the busy spell's replicas through each 4-minute idle one, so no
    # forecast of it fell short and no headroom is learned: the idle model asks for
    # nothing, and the replicas the HPA holds serve the return.
    rates = ([200.0] * 16 + [0.0] * 16) * 8
    held = forecast_demand(history(rates[:-8]), replace(CONFIG, cool_down_s=300.0))
    assert (held.rate, held.error) == (0.0, 0.0)
    # A 1-minute hold lets the replicas go halfway through the idle spell: the return
    # outruns what stands, and the error is the busy rate, as with no hold at all.
    short = forecast_demand(history(rates[:-8]), replace(CONFIG, cool_down_s=60.0))
    assert short.error == pytest.approx(200.0)
    # The hold reaches further back for credit, but the same number of forecasts is
    # scored, whatever the hold.
    none = forecast_demand(history(rates[:-8]), CONFIG)
    assert held.errors == short.errors == none.errors


def test_the_error_is_the_conformal_order_statistic() -> None:
    errors = np.arange(1.0, 201.0)  # 1..200
    assert conformal_quantile(errors, 0.99) == 199.0  # ceil(201 * 0.99) = 199th
    assert conformal_quantile(errors[:10], 0.99) == 10.0  # too few: the largest
    assert conformal_quantile(np.empty(0), 0.99) == 0.0


def test_the_warm_pool_covers_the_learned_error() -> None:
    capacity = CapacityEstimate(100.0, 32, 0.022, 0.001, "fit")
    forecast = Forecast(300.0, 300.0, 300.0, 0.0, None, error=250.0)
    assert warm_pool_replicas(forecast, capacity) == 3
    assert warm_pool_replicas(replace(forecast, error=0.0), capacity) == 1
    assert warm_pool_replicas(forecast, capacity, max_replicas=2) == 2
    assert required_replicas(forecast, capacity) == 6  # ceil((300 + 250) / 100)


def test_a_single_outlier_does_not_tilt_the_trend() -> None:
    rates = [100.0] * 11 + [1000.0] + [100.0] * 11
    assert forecast_demand(history(rates), CONFIG).trend == pytest.approx(100.0)


def test_yesterdays_peak_is_prepared_for_at_todays_level() -> None:
    # Yesterday: level 100, a peak of 400 starting 90 s after this moment of the day.
    per_day = round(DAY_S / STEP)
    rates = [100.0] * (per_day + 100)
    then = len(rates) - 1 - per_day
    for i in range(then + 6, then + 20):
        rates[i] = 400.0
    rates[-40:] = [150.0] * 40  # today runs 1.5x yesterday
    forecast = forecast_demand(history(rates), CONFIG)
    assert forecast.seasonal == pytest.approx(600.0)
    assert forecast.rate == pytest.approx(600.0)
    short = forecast_demand(history(rates[-100:]), CONFIG)
    assert short.seasonal is None


def linear(base_s: float, per_item_s: float, size: float, executions: float) -> BatchCounters:
    """Counters as Triton keeps them: compute time is added once per request."""
    batch_s = base_s + per_item_s * size
    return BatchCounters(executions, size * executions, size * executions * batch_s)


def test_capacity_from_batches_of_several_sizes_fits_the_cost_line() -> None:
    seen = [linear(0.022, 0.001, b, 100) for b in (4.0, 8.0, 12.0)]
    estimate = estimate_capacity(seen, SETTINGS, None)
    assert estimate is not None
    assert estimate.source == "fit"
    assert estimate.base_s == pytest.approx(0.022)
    assert estimate.per_item_s == pytest.approx(0.001)
    assert estimate.batch_size == 32
    assert estimate.per_replica_rps == pytest.approx(0.85 * 32 / 0.054)


def test_capacity_plans_on_a_batch_that_meets_the_latency_target() -> None:
    seen = [linear(0.050, 0.010, b, 100) for b in (2.0, 5.0, 8.0)]
    estimate = estimate_capacity(seen, SETTINGS, None)
    assert estimate is not None
    # 0.002 + 2 * (0.05 + 0.01 b) <= 0.25  ->  b <= 7.4
    assert estimate.batch_size == 7


def test_low_traffic_keeps_the_last_good_capacity() -> None:
    good = estimate_capacity([linear(0.022, 0.001, b, 100) for b in (4, 8, 12)], SETTINGS, None)
    assert good is not None
    quiet = [linear(0.022, 0.001, 1.0, 3)]
    kept = estimate_capacity(quiet, SETTINGS, good)
    assert kept is not None
    assert kept.per_replica_rps == good.per_replica_rps
    assert kept.source == "previous"
    assert estimate_capacity(quiet, SETTINGS, None) is None


def test_one_batch_size_gives_a_lower_bound_unless_a_fit_exists() -> None:
    same = [linear(0.022, 0.001, 8.0, 100) for _ in range(3)]
    bound = estimate_capacity(same, SETTINGS, None)
    assert bound is not None
    assert bound.source == "observed"
    assert bound.per_replica_rps == pytest.approx(0.85 * 8 / 0.030)
    fit = estimate_capacity([linear(0.022, 0.001, b, 100) for b in (4, 8, 12)], SETTINGS, None)
    assert fit is not None
    kept = estimate_capacity(same, SETTINGS, fit)
    assert kept is not None
    assert kept.per_replica_rps == fit.per_replica_rps


def test_required_replicas_rounds_up_with_headroom_and_bounds() -> None:
    capacity = CapacityEstimate(100.0, 32, 0.022, 0.001, "fit")

    def need(rate: float, headroom: float = 0.0, **bounds: int) -> int:
        return required_replicas(
            Forecast(rate, rate, rate, rate, None), capacity, headroom, **bounds
        )

    assert need(300.0) == 3
    assert need(300.0, 0.1) == 4
    assert need(0.0) == 1
    assert need(0.0, min_replicas=0) == 0
    assert need(10_000.0, max_replicas=64) == 64
    assert need(301.0) == math.ceil(3.01)
