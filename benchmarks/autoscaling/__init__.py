"""Autoscaling replay: a discrete-event simulator of Triton replicas under autoscalers.

The simulator replays a production arrival trace (and synthetic bursts) against replicas
modelled on Triton's dynamic batcher, calibrated on the latency-vs-batch curve the
batching benchmark measured, and compares Shoal's rendered HorizontalPodAutoscaler with
an HPA on CPU, a KEDA-style queue scaler, a Knative-KPA-style scaler and a clairvoyant
oracle, each at the cheapest setting that keeps 99% of one-minute windows in SLO.

    python -m benchmarks.autoscaling [--quick]

Layout: ``calibration`` and ``workload`` read inputs; ``replica``, ``cluster``,
``pipeline``, ``hpa``, ``kpa`` and ``oracle`` are the model; ``scalers`` and
``experiment`` set up the comparison; ``simulate`` runs one scaler over one workload;
``slo`` scores a run; ``search`` finds each scaler's cheapest setting; ``signal`` shows
how Shoal's metric moves with load; ``report`` prints and writes the results. See
docs/benchmarks/autoscaling.md.
"""
