"""Proving that nothing changes after the operator has run passes, not after a sleep."""

from __future__ import annotations

import httpx

from tests.support.wait import wait_for


def operator_counters(metrics_url: str) -> dict[str, float]:
    """The operator's counters and gauges as ``name{labels}`` -> value."""
    out: dict[str, float] = {}
    for line in httpx.get(metrics_url, timeout=10).text.splitlines():
        if line.startswith("shoal_") and " " in line:
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def _passes(counters: dict[str, float], kind: str) -> float:
    prefix = f'shoal_reconciles_total{{kind="{kind}",'
    return sum(v for k, v in counters.items() if k.startswith(prefix))


def wait_for_passes(
    metrics_url: str,
    rounds: int = 3,
    kinds: tuple[str, ...] = ("InferenceModel", "TenantPool"),
    timeout: float = 120.0,
) -> dict[str, float]:
    """Wait until the periodic resync has run ``rounds`` more times and every object of
    ``kinds`` the operator serves has had, on average, ``rounds`` more passes; returns
    the counters then."""
    before = operator_counters(metrics_url)

    def done(now: dict[str, float]) -> bool:
        if now.get("shoal_resyncs_total", 0) - before.get("shoal_resyncs_total", 0) < rounds:
            return False
        for kind in kinds:
            served = now.get(f'shoal_managed_objects{{kind="{kind}"}}', 0)
            if _passes(now, kind) - _passes(before, kind) < rounds * served:
                return False
        return True

    return wait_for(
        f"{rounds} resync rounds with their passes",
        lambda: operator_counters(metrics_url),
        done,
        timeout=timeout,
        interval=1.0,
    )
