"""Equal SLO attainment: each scaler's cheapest setting that keeps the SLO.

Comparing replica-seconds only makes sense at equal service, so each scaler's one knob
is searched for the setting that uses the fewest replica-seconds while keeping at least
the goal share of windows in SLO. The candidates are ordered from most replicas (most
aggressive) to fewest; attainment falls, roughly monotonically, along that order, so a
bisection finds the last passing candidate in about 2 log2(n) replays. Replays are not
perfectly monotone (a setting can pass while a more aggressive one fails), so the
answer is the cheapest passing setting among those evaluated, which a denser search
could still improve on.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from benchmarks.autoscaling.simulate import RunResult


@dataclass(frozen=True)
class Knob:
    """One scaler setting: its name, candidates (most replicas first), its default."""

    name: str
    candidates: tuple[float, ...]
    default: float
    short: str = ""  # for tables

    @property
    def label(self) -> str:
        return self.short or self.name


@dataclass
class SearchResult:
    knob: Knob
    goal: float
    evaluated: dict[float, RunResult] = field(default_factory=dict)
    chosen: RunResult | None = None  # cheapest evaluated setting meeting the goal
    default: RunResult | None = None

    @property
    def reached(self) -> bool:
        return self.chosen is not None

    def best_effort(self) -> RunResult:
        """The chosen setting, or else the one with the highest attainment."""
        if self.chosen is not None:
            return self.chosen
        return max(self.evaluated.values(), key=lambda r: (r.attainment, -r.replica_seconds))


def cheapest_passing(
    knob: Knob, goal: float, evaluate: Callable[[float], RunResult], max_evaluations: int = 10
) -> SearchResult:
    """Find the last candidate whose attainment is at least ``goal``.

    Starts at the default; if it fails, halves the index until a candidate passes (the
    most aggressive settings run the most replicas and are the slowest to replay, so
    they are tried last); then bisects between the last pass and the first failure.
    """
    result = SearchResult(knob, goal)
    candidates = knob.candidates

    def passes(index: int) -> bool:
        value = candidates[index]
        if value not in result.evaluated:
            result.evaluated[value] = evaluate(value)
        return result.evaluated[value].attainment >= goal

    start = min(range(len(candidates)), key=lambda i: abs(candidates[i] - knob.default))
    lo: int | None = None
    hi: int | None = None
    if passes(start):
        lo = start
        hi = len(candidates) - 1
        if passes(hi):
            lo = hi
    else:
        hi = start
        index = start
        while index > 0:
            index //= 2
            if passes(index):
                lo = index
                break
            hi = index
    if lo is not None and hi is not None:
        while hi - lo > 1 and len(result.evaluated) < max_evaluations:
            mid = (lo + hi) // 2
            if passes(mid):
                lo = mid
            else:
                hi = mid
    passing = [r for r in result.evaluated.values() if r.attainment >= goal]
    if passing:
        result.chosen = min(passing, key=lambda r: r.replica_seconds)
    if knob.default not in result.evaluated:
        result.evaluated[knob.default] = evaluate(knob.default)
    result.default = result.evaluated[knob.default]
    return result
