"""What one replica sustains, measured from a real tritonserver's own counters.

The predictive scaler reads ``nv_inference_exec_count``, ``nv_inference_count`` and
``nv_inference_compute_infer_duration_us`` and fits the cost of a batch. Triton adds
compute time once per request, so a batch of eight counts its time eight times: read as
time per execution, the fit would make every item cost about a whole batch and plan a
fraction of the real throughput. Here the real server's counters, taken under closed-loop
load at several concurrencies, must give a cost line close to the model's own.
"""

from __future__ import annotations

import time
from pathlib import Path

from e2e.gateway import closed_loop
from e2e.linear_model import linear_model as linear_model_doc
from e2e.triton_repo import add_model

from e2e import triton
from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.inferencemodel import InferenceModel
from shoal.autoscale.predict import BatchCounters, BatchSettings, estimate_capacity
from shoal.render.batching import effective_batching
from shoal.render.model_config import render_config_pbtxt

BASE_MS, PER_ITEM_MS = 20.0, 1.0  # what linear_cost.py sleeps per batch
MAX_BATCH = 16
PHASE_S = 2.5
PATH = "/v2/models/linear/infer"
COUNTERS = (
    "nv_inference_exec_count",
    "nv_inference_count",
    "nv_inference_compute_infer_duration_us",
)


def _counters(server: triton.TritonServer) -> tuple[float, ...]:
    text = server.metrics()
    return tuple(triton.model_metric(text, name, "linear") for name in COUNTERS)


def _closed_loop(url: str, clients: int, seconds: float) -> int:
    """``clients`` callers back to back for ``seconds``; every answer must be a 200."""
    samples = closed_loop(url, PATH, {}, clients, seconds)
    failed = [s.status for s in samples if s.status != 200]
    assert not failed, f"{len(failed)} of {len(samples)} failed: {set(failed)}"
    return len(samples)


def test_the_capacity_fit_reads_the_cost_line_from_tritons_counters(
    tmp_path: Path,
) -> None:
    model = InferenceModel.model_validate(linear_model_doc(BASE_MS, PER_ITEM_MS))
    policy = BatchPolicySpec(max_batch_size=MAX_BATCH, max_queue_delay="2ms")
    repo = tmp_path / "repo"
    add_model(
        repo,
        render_config_pbtxt(model, effective_batching(model, policy)),
        model_py="linear_cost.py",
    )
    observations: list[BatchCounters] = []
    best_rps = 0.0
    with triton.running(repo, tmp_path / "work") as server:
        _closed_loop(server.http_url, 1, 0.5)  # the first requests warm the stub
        for clients in (1, 2, 4, 8, 16):
            before = _counters(server)
            started = time.monotonic()
            sent = _closed_loop(server.http_url, clients, PHASE_S)
            best_rps = max(best_rps, sent / (time.monotonic() - started))
            after = _counters(server)
            executions, inferences, compute_us = (a - b for a, b in zip(after, before, strict=True))
            observations.append(BatchCounters(executions, inferences, compute_us / 1e6))
    sizes = [round(o.inferences / o.executions, 1) for o in observations]
    settings = BatchSettings(MAX_BATCH, max_queue_delay_s=0.002, target_p95_s=1.0)
    estimate = estimate_capacity(observations, settings, previous=None)
    assert estimate is not None, observations
    figures = f"{estimate}, batch sizes {sizes}, best closed-loop {best_rps:.0f} req/s"
    assert estimate.source == "fit", figures
    # The model sleeps 20 ms + 1 ms per item, and the Python backend adds to each batch.
    # A phase's batches vary in size and the counters weight each by its requests, so
    # the slope reads high (1.5 to 1.7 ms in the runs so far). Counted per execution
    # instead, every point is size x time and no physical line fits.
    assert 0.015 <= estimate.base_s <= 0.030, figures
    assert 0.0005 <= estimate.per_item_s <= 0.003, figures
    assert estimate.batch_size == MAX_BATCH, figures
    # A full batch's throughput is at least what the closed loop achieved (its batches
    # were at most full). The clients' HTTP time on shared cores keeps the loop well
    # short of it (about 0.6 here), so the upper bound is loose.
    full = MAX_BATCH / (estimate.base_s + estimate.per_item_s * MAX_BATCH)
    assert best_rps * 0.9 <= full <= best_rps * 4, figures
