"""A corpus of valid but unusual custom resources: the API server and the models must
both accept every one (the counterpart of tests/support/malformed.py).

Each case starts from an example and changes it within what Kubernetes, the stores and
Triton accept; where the models hold a value in another form than the one written (a
quantity in its canonical form), ``expect`` says what the parsed model must hold.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from tests.support.malformed import DELETE, _set
from tests.support.resources import example

BP, TP, IM = "BatchPolicy", "TenantPool", "InferenceModel"


@dataclass(frozen=True)
class Case:
    id: str
    kind: str
    example: str
    changes: tuple[tuple[str, Any], ...]
    # Attribute path on the parsed model (snake_case, dotted) -> value it must hold.
    expect: tuple[tuple[str, Any], ...] = ()

    def build(self) -> dict[str, Any]:
        obj = example(self.kind, self.example)
        for path, value in self.changes:
            _set(obj, path, value)
        return obj


def built(case: Case) -> dict[str, Any]:
    """The case's object under a fresh name; a model names a pool that does not exist,
    so the admission policy has nothing to judge."""
    obj = case.build()
    suffix = uuid.uuid4().hex[:6]
    obj["metadata"]["name"] = f"u-{suffix}"
    if case.kind == "InferenceModel":
        obj["spec"]["pool"] = f"no-pool-{suffix}"
    return obj


def _im(id_: str, *changes: tuple[str, Any], expect: tuple[tuple[str, Any], ...] = ()) -> Case:
    return Case(id_, IM, "search-ranker", changes, expect)


def _tp(id_: str, *changes: tuple[str, Any]) -> Case:
    return Case(id_, TP, "critical", changes)


def _bp(id_: str, *changes: tuple[str, Any]) -> Case:
    return Case(id_, BP, "offline", changes)


def _uri(id_: str, uri: str) -> Case:
    return _im(id_, ("spec.model.storageUri", uri))


def _cron(id_: str, start: str, zone: str = "UTC") -> Case:
    return _im(
        id_, ("spec.scaling.schedules.0.start", start), ("spec.scaling.schedules.0.timeZone", zone)
    )


CPU = "spec.runtime.cpu"
MEMORY = "spec.runtime.memory"

CASES: tuple[Case, ...] = (
    # Quantities: numbers as well as strings, as in a Pod; the models hold the canonical form.
    _im("cpu-number-half", (CPU, 0.5), expect=(("spec.runtime.cpu", "500m"),)),
    _im("cpu-number-whole", (CPU, 4), expect=(("spec.runtime.cpu", "4"),)),
    _im("cpu-number-whole-float", (CPU, 2.0), expect=(("spec.runtime.cpu", "2"),)),
    # A container's resources are rounded up to milli units, as the API server rounds them.
    _im("cpu-number-tiny", (CPU, 0.0001), expect=(("spec.runtime.cpu", "1m"),)),
    _im("cpu-string-decimal", (CPU, "0.25"), expect=(("spec.runtime.cpu", "250m"),)),
    _im("cpu-thousand-milli", (CPU, "1000m"), expect=(("spec.runtime.cpu", "1"),)),
    _im("cpu-exponent", (CPU, "1.5e3"), expect=(("spec.runtime.cpu", "1500"),)),
    _im("cpu-plus-sign", (CPU, "+2"), expect=(("spec.runtime.cpu", "+2"),)),
    _im(
        "memory-bytes-number", (MEMORY, 8589934592), expect=(("spec.runtime.memory", "8589934592"),)
    ),
    _im("memory-mebibytes", (MEMORY, "16384Mi"), expect=(("spec.runtime.memory", "16Gi"),)),
    _im("memory-fraction-gibi", (MEMORY, "0.5Gi"), expect=(("spec.runtime.memory", "512Mi"),)),
    _im("memory-decimal-si", (MEMORY, "12G"), expect=(("spec.runtime.memory", "12G"),)),
    _im(
        "shm-trailing-dot",
        ("spec.runtime.shmSize", "2."),
        expect=(("spec.runtime.shm_size", "2."),),
    ),
    # Durations: bounded by value, not by how many digits they are written with.
    _bp("timeout-microseconds-7-digits", ("spec.queuePolicy.timeout", "5000000us")),
    _bp("timeout-nanoseconds-12-digits", ("spec.queuePolicy.timeout", "900000000000ns")),
    _bp("delay-fraction-of-a-second", ("spec.maxQueueDelay", "0.0025s")),
    _bp("delay-at-its-bound", ("spec.maxQueueDelay", "10s")),
    _bp("delay-zero", ("spec.maxQueueDelay", "0s")),
    _bp("timeout-several-parts", ("spec.queuePolicy.timeout", "1m30s500ms")),
    _bp("timeout-at-its-bound-in-minutes", ("spec.queuePolicy.timeout", "60m")),
    _im(
        "window-an-hour-less-a-millisecond",
        ("spec.scaling.scaleDown.stabilizationWindow", "59m59.999s"),
    ),
    _im("window-an-hour", ("spec.scaling.scaleDown.stabilizationWindow", "1h")),
    _im("p95-one-millisecond", ("spec.scaling.targetP95Latency", "1ms")),
    _im("p95-fraction", ("spec.scaling.targetP95Latency", "0.25s")),
    _im("schedule-a-month-long", ("spec.scaling.schedules.0.duration", "744h")),
    # Buckets, claims and hosts as their stores accept them.
    _uri("gs-bucket-underscore", "gs://labs_models/embedder"),
    _uri("gs-bucket-dotted-long", f"gs://{'a' * 63}.{'b' * 63}.{'c' * 63}/m"),
    _uri("s3-bucket-dots", "s3://models.example.com/search/ranker"),
    _uri("s3-bucket-three-characters", "s3://abc/ranker"),
    _uri("s3-bucket-63-characters", f"s3://{'m' * 63}/ranker"),
    _uri("s3-no-path", "s3://models"),
    _uri("s3-path-with-dotted-names", "s3://models/ranker..v2/.hidden/v1.2/"),
    _uri("s3-path-with-percent", "s3://models/ranker%20v2"),
    _uri("pvc-dotted-claim", "pvc://models.v2/ranker"),
    _uri("pvc-longest-claim", f"pvc://{'c' * 253}/ranker"),
    _uri("https-port", "https://models.example.com:8443/ranker"),
    _uri("https-ip-address", "https://10.0.0.7/models/ranker"),
    _uri("https-host-only", "https://models.example.com"),
    # Tolerations and node selectors as a Pod accepts them.
    _tp(
        "toleration-exists-without-key",
        ("spec.placement.tolerations", [{"operator": "Exists"}]),
    ),
    _tp(
        "toleration-empty-key-exists",
        ("spec.placement.tolerations", [{"key": "", "operator": "Exists"}]),
    ),
    _tp(
        "toleration-no-execute-seconds",
        (
            "spec.placement.tolerations",
            [
                {
                    "key": "node.kubernetes.io/unreachable",
                    "operator": "Exists",
                    "effect": "NoExecute",
                    "tolerationSeconds": 300,
                }
            ],
        ),
    ),
    _tp(
        "toleration-equal-empty-value",
        ("spec.placement.tolerations", [{"key": "dedicated", "value": ""}]),
    ),
    _tp(
        "node-selector-longest-key-and-value",
        ("spec.placement.nodeSelector", {f"{'p' * 253}/{'n' * 63}": "V" * 63}),
    ),
    _tp("node-selector-empty-value", ("spec.placement.nodeSelector", {"shoal.dev/flag": ""})),
    _tp("gpu-product-with-dots", ("spec.placement.gpuProduct", "Tesla-T4.SHARED_v2")),
    _tp(
        "selector-does-not-exist",
        (
            "spec.tenants",
            {
                "selector": {
                    "matchExpressions": [{"key": "shoal.dev/opt-out", "operator": "DoesNotExist"}]
                }
            },
        ),
    ),
    _tp(
        "selector-match-labels-empty-value",
        ("spec.tenants", {"selector": {"matchLabels": {"shoal.dev/tenant": ""}}}),
    ),
    # Schedules: every field form croniter reads, and IANA zones old and new.
    _cron("cron-names-and-steps", "30 7 1-15/2 jan,JUL mon-FRI", "America/Argentina/Buenos_Aires"),
    _cron("cron-sunday-as-7", "0 0 * * 7", "Etc/GMT+5"),
    _cron("cron-lists-and-ranges", "0,15,30,45 8-18/2 * * 1-5", "US/Eastern"),
    _cron("cron-leading-zeros", "05 08 01 01 0", "Japan"),
    _cron("cron-every-minute-wide-spaces", "*  *  *  *  *", "Asia/Kolkata"),
    _cron("cron-last-of-each-range", "59 23 31 12 6", "Pacific/Chatham"),
    # Images, versions, warm-up, tensors and parameters at their edges.
    _im(
        "image-by-digest", ("spec.runtime.image", "nvcr.io/nvidia/tritonserver@sha256:" + "a" * 64)
    ),
    _im("image-local-registry-port", ("spec.runtime.image", "localhost:5000/triton:dev")),
    _im("image-docker-hub-short", ("spec.runtime.image", "tritonserver")),
    _im("version-all", ("spec.model.versionPolicy", {"policy": "All"})),
    _im("version-latest-three", ("spec.model.versionPolicy", {"policy": "Latest", "latest": 3})),
    _im(
        "version-specific", ("spec.model.versionPolicy", {"policy": "Specific", "versions": [3, 1]})
    ),
    # As stored under the former default of latest: still read.
    _im(
        "version-specific-with-former-default",
        ("spec.model.versionPolicy", {"policy": "Specific", "versions": [2], "latest": 1}),
    ),
    _im(
        "warmup-at-the-override",
        ("spec.batchPolicy.maxBatchSize", 8),
        ("spec.model.warmup.batchSizes", [8]),
    ),
    # The BatchPolicy decides the maximum here: the operator judges it, not admission.
    _im("warmup-the-policy-decides", ("spec.model.warmup.batchSizes", [64])),
    _im(
        "many-distinct-tensors",
        (
            "spec.model.inputs",
            [{"name": f"in_{i}", "dataType": "FP32", "dims": [-1, 4]} for i in range(64)],
        ),
        ("spec.model.warmup", DELETE),
    ),
    _im(
        "128-parameters",
        ("spec.model.parameters", {f"param.{i}-x_{i}": str(i) for i in range(128)}),
    ),
    _im("gpus-zero", ("spec.runtime.gpus", 0)),
    # An object given as null, or as {} (which a server-side apply sends as null): its
    # defaults, as if it were left out.
    _im("runtime-null", ("spec.runtime", None), expect=(("spec.runtime.cpu", "2"),)),
    _im(
        "scale-down-null",
        ("spec.scaling.scaleDown", None),
        expect=(("spec.scaling.scale_down.stabilization_window", "5m"),),
    ),
    _im("version-policy-empty", ("spec.model.versionPolicy", {})),
    _tp("access-null", ("spec.access", None)),
)
