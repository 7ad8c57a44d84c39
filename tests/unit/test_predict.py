"""The predictive signal: demand forecast, capacity per replica, required replicas."""

from __future__ import annotations

import math

import pytest

from shoal.autoscale.predict import (
    DAY_S,
    BatchCounters,
    BatchSettings,
    CapacityEstimate,
    Forecast,
    ForecastConfig,
    RateHistory,
    estimate_capacity,
    forecast_demand,
    required_replicas,
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


def test_a_short_history_has_no_trend_yet() -> None:
    forecast = forecast_demand(history([1000.0, 2000.0, 3000.0]), CONFIG)
    assert forecast.trend == pytest.approx(2000.0)  # the level of the last minute
    assert forecast.rate == 3000.0  # the latest rate, through the peak


def test_idle_history_forecasts_nothing_and_empty_history_too() -> None:
    assert forecast_demand(history([0.0] * 50), CONFIG).rate == 0.0
    assert forecast_demand(history([]), CONFIG).rate == 0.0


def test_an_idle_minute_inside_steady_traffic_does_not_drop_the_forecast() -> None:
    rates = [200.0] * 30 + [0.0] * 4 + [200.0] * 2
    assert forecast_demand(history(rates), CONFIG).rate >= 200.0


def test_a_burst_is_remembered_and_fades() -> None:
    base = [100.0] * 40
    burst = [500.0] * 4
    just_after = forecast_demand(history([*base, *burst, 100.0]), CONFIG)
    assert just_after.peak == pytest.approx(500.0 * 2 ** (-15 / 120))
    later = forecast_demand(history([*base, *burst, *[100.0] * 16]), CONFIG)
    assert 100.0 < later.rate < just_after.rate
    gone = forecast_demand(history([*base, *burst, *[100.0] * 60]), CONFIG)
    assert gone.rate == pytest.approx(100.0)


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
    return BatchCounters(executions, size * executions, executions * (base_s + per_item_s * size))


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
