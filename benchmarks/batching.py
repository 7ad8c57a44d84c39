"""Batching on the real Triton server: throughput at a P95 target, side by side.

A Python-backend model whose execution costs a fixed 20 ms plus 1 ms per item (the
shape of a GPU kernel: launch cost, then cheap extra rows) is served by the real
tritonserver with configs Shoal renders for: no batching, the default BatchPolicy, the
interactive and offline example presets, and a sweep of maxBatchSize x maxQueueDelay.
For each, closed-loop clients at rising concurrency measure throughput and P95; the
figure of merit is the best throughput whose P95 stays under the target. All configs run
in one process, one after another, on the same machine, and are reported as ratios to
no batching.

    python -m benchmarks.batching [--quick]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
from e2e.linear_model import BODY, linear_model
from google.protobuf import text_format

from e2e import triton
from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.inferencemodel import InferenceModel
from shoal.render.batching import effective_batching
from shoal.render.model_config import model_config, render_config_pbtxt

RESULTS = Path(__file__).resolve().parent / "results"
MODELS = Path(__file__).resolve().parent.parent / "e2e" / "models"
P95_TARGET_S = 0.25
BASE_MS, PER_ITEM_MS = 20.0, 1.0


def model() -> InferenceModel:
    return InferenceModel.model_validate(linear_model(BASE_MS, PER_ITEM_MS))


def no_batching_config() -> str:
    """The same model with max_batch_size 1 and no dynamic batcher."""
    config = model_config(model(), BatchPolicySpec(max_batch_size=1))
    config.ClearField("dynamic_batching")
    text: str = text_format.MessageToString(config)
    return text


@dataclass
class Point:
    concurrency: int
    throughput: float
    p95: float
    requests: int


def measure(url: str, concurrency: int, seconds: float) -> Point:
    latencies: list[float] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client() -> None:
        local: list[float] = []
        with httpx.Client(base_url=url, timeout=60) as http:
            while time.monotonic() < stop:
                started = time.monotonic()
                http.post("/v2/models/linear/infer", json=BODY).raise_for_status()
                local.append(time.monotonic() - started)
        with lock:
            latencies.extend(local)

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    began = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - began
    p95 = statistics.quantiles(latencies, n=20)[-1] if len(latencies) >= 20 else max(latencies)
    return Point(concurrency, len(latencies) / elapsed, p95, len(latencies))


def run_config(name: str, config: str, levels: list[int], seconds: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        repo = Path(tmp) / "repo" / "linear"
        (repo / "1").mkdir(parents=True)
        (repo / "1" / "model.py").write_text((MODELS / "linear_cost.py").read_text())
        (repo / "config.pbtxt").write_text(config)
        with triton.running(repo.parent, Path(tmp) / "work") as server:
            measure(server.http_url, 4, 1.0)  # warm-up
            points = [measure(server.http_url, c, seconds) for c in levels]
    within = [p for p in points if p.p95 <= P95_TARGET_S]
    best = max(within, key=lambda p: p.throughput) if within else None
    result = {
        "name": name,
        "throughput_at_target": round(best.throughput, 1) if best else 0.0,
        "p95_at_best_ms": round(best.p95 * 1000, 1) if best else None,
        "points": [asdict(p) for p in points],
    }
    print(
        f"{name:32s} {result['throughput_at_target']:8.1f} req/s at P95 "
        f"{result['p95_at_best_ms']} ms",
        flush=True,
    )
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer points, shorter runs")
    args = parser.parse_args()
    levels = [4, 16, 48] if args.quick else [4, 16, 48, 96]
    seconds = 2.0 if args.quick else 3.0
    im = model()
    presets = {
        "default BatchPolicy": BatchPolicySpec(),
        "interactive preset": BatchPolicySpec(
            max_batch_size=8, max_queue_delay="500us", preferred_batch_sizes=[4, 8]
        ),
        "offline preset": BatchPolicySpec(
            max_batch_size=64, max_queue_delay="20ms", preferred_batch_sizes=[32, 64]
        ),
    }
    results = [run_config("no batching", no_batching_config(), levels, seconds)]
    for name, spec in presets.items():
        results.append(
            run_config(name, render_config_pbtxt(im, effective_batching(im, spec)), levels, seconds)
        )
    sweep = []
    sizes = [8, 32] if args.quick else [8, 16, 32, 64]
    delays = ["1ms", "5ms"] if args.quick else ["1ms", "5ms", "20ms"]
    for size in sizes:
        for delay in delays:
            spec = BatchPolicySpec(max_batch_size=size, max_queue_delay=delay)
            sweep.append(
                run_config(
                    f"sweep max={size} delay={delay}",
                    render_config_pbtxt(im, effective_batching(im, spec)),
                    levels,
                    seconds,
                )
            )
    best = max(sweep, key=lambda r: r["throughput_at_target"])
    baseline = results[0]["throughput_at_target"] or 1.0
    summary = {
        "model": f"{BASE_MS:g} ms + {PER_ITEM_MS:g} ms/item, Python backend on CPU",
        "p95_target_ms": P95_TARGET_S * 1000,
        "concurrency_levels": levels,
        "seconds_per_point": seconds,
        "results": results,
        "sweep": sweep,
        "sweep_best": best["name"],
        "ratios_to_no_batching": {
            r["name"]: round(r["throughput_at_target"] / baseline, 2) for r in [*results, best]
        },
        "default_vs_sweep_best": round(
            results[1]["throughput_at_target"] / max(best["throughput_at_target"], 1e-9), 2
        ),
    }
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "batching.json").write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary["ratios_to_no_batching"], indent=2))
    print(f"default / sweep best: {summary['default_vs_sweep_best']}")


if __name__ == "__main__":
    main()
