"""The autoscaling/v2 HorizontalPodAutoscaler controller, driven by an HPA ``spec``.

Shoal's claim is about the HPA it renders, so the simulator runs that object through a
re-implementation of the upstream controller rather than through an idealised rule. The
algorithm follows kubernetes/kubernetes (read from master; these parts have been stable
since autoscaling/v2 went GA in v1.23, the per-HPA tolerance field is newer, v1.33):

- ``pkg/controller/podautoscaler/horizontal.go``: ``reconcileAutoscaler`` (min/max
  clamps before metrics), ``computeReplicasForMetrics`` (the largest proposal wins; a
  failed metric vetoes a scale-down), ``normalizeDesiredReplicas`` (no ``behavior``:
  scale-down stabilization and the 2x-or-4 scale-up cap),
  ``normalizeDesiredReplicasWithBehaviors``, ``stabilizeRecommendationWithBehaviors``,
  ``convertDesiredReplicasWithBehaviorRate``, ``calculateScaleUpLimitWithScalingRules``,
  ``calculateScaleDownLimitWithBehaviors``, ``getReplicasChangePerPeriod``,
  ``storeScaleEvent``.
- ``pkg/controller/podautoscaler/replica_calculator.go``: ``calcPlainMetricReplicas``
  (Pods metrics), ``GetResourceReplicas`` (CPU utilization), ``GetObjectMetricReplicas``
  and ``getUsageRatioReplicaCount`` (Object metrics, Value target),
  ``GetExternalPerPodMetricReplicas`` (External metrics, AverageValue target),
  ``groupPods`` (pending, unready, missing and deleted pods).
- ``pkg/apis/autoscaling/v2/defaults.go``: ``SetDefaults_HorizontalPodAutoscalerBehavior``
  with ``defaultHPAScaleUpRules`` / ``defaultHPAScaleDownRules``.
- ``pkg/controller/podautoscaler/config/v1alpha1/defaults.go``:
  ``RecommendedDefaultHPAControllerConfiguration`` (the kube-controller-manager flag
  defaults below).

The code is written from the algorithm, not translated line by line; upstream's integer
milli-unit arithmetic is kept where it changes results (CPU utilization is an integer
percentage) and ignored where it does not.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

# --horizontal-pod-autoscaler-sync-period: how often each HPA is reconciled.
# RecommendedDefaultHPAControllerConfiguration: HorizontalPodAutoscalerSyncPeriod = 15s.
SYNC_PERIOD_S = 15.0
# --horizontal-pod-autoscaler-tolerance: usage ratios within 1 +/- 0.1 change nothing.
# RecommendedDefaultHPAControllerConfiguration: HorizontalPodAutoscalerTolerance = 0.1.
TOLERANCE = 0.1
# --horizontal-pod-autoscaler-downscale-stabilization: the scale-down window when the HPA
# has no behavior, or its scaleDown rules leave stabilizationWindowSeconds unset.
# RecommendedDefaultHPAControllerConfiguration: DownscaleStabilizationWindow = 5m.
DOWNSCALE_STABILIZATION_S = 300.0
# --horizontal-pod-autoscaler-cpu-initialization-period: CPU samples of a pod younger than
# this are ignored unless taken a whole window after it became ready. Default 5m.
CPU_INITIALIZATION_PERIOD_S = 300.0
# --horizontal-pod-autoscaler-initial-readiness-delay: readiness changes this soon after
# start count as initial readiness. Default 30s.
INITIAL_READINESS_DELAY_S = 30.0
# horizontal.go scaleUpLimitFactor / scaleUpLimitMinimum: without behavior, one sync may
# at most double the replicas, or raise them to 4 (calculateScaleUpLimit).
SCALE_UP_LIMIT_FACTOR = 2.0
SCALE_UP_LIMIT_MINIMUM = 4.0
# pkg/apis/autoscaling/types.go DefaultCPUUtilization: the target of an HPA without metrics.
DEFAULT_CPU_UTILIZATION = 80


class MetricError(Exception):
    """A metric could not produce a proposal (no samples, no pods)."""


@dataclass(frozen=True)
class ControllerConfig:
    """kube-controller-manager's HPA flags."""

    sync_period_s: float = SYNC_PERIOD_S
    tolerance: float = TOLERANCE
    downscale_stabilization_s: float = DOWNSCALE_STABILIZATION_S
    cpu_initialization_period_s: float = CPU_INITIALIZATION_PERIOD_S
    initial_readiness_delay_s: float = INITIAL_READINESS_DELAY_S


@dataclass(frozen=True)
class Tolerances:
    """Scale-down and scale-up tolerance around a usage ratio of 1."""

    down: float
    up: float

    def within(self, ratio: float) -> bool:
        return (1.0 - self.down) <= ratio <= (1.0 + self.up)


@dataclass(frozen=True)
class ScalingPolicy:
    type: str  # Pods | Percent
    value: int
    period_s: int


@dataclass(frozen=True)
class ScalingRules:
    stabilization_s: float | None
    select: str  # Max | Min | Disabled
    policies: tuple[ScalingPolicy, ...]
    tolerance: float | None = None

    @property
    def longest_period_s(self) -> int:
        return max((p.period_s for p in self.policies), default=0)


# pkg/apis/autoscaling/v2/defaults.go: defaultHPAScaleUpRules (no stabilization, Max of
# +4 pods and +100% per 15 s) and defaultHPAScaleDownRules (100% per 15 s; the window is
# left to the controller's --horizontal-pod-autoscaler-downscale-stabilization).
DEFAULT_SCALE_UP = ScalingRules(
    stabilization_s=0.0,
    select="Max",
    policies=(ScalingPolicy("Pods", 4, 15), ScalingPolicy("Percent", 100, 15)),
)
DEFAULT_SCALE_DOWN = ScalingRules(
    stabilization_s=None, select="Max", policies=(ScalingPolicy("Percent", 100, 15),)
)

_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|Ki|Mi|Gi)?$")
_SUFFIX = {None: 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "Ki": 1024.0, "Mi": 1024.0**2}
_SUFFIX["Gi"] = 1024.0**3


def parse_quantity(value: str | float | int) -> float:
    """A Kubernetes quantity such as ``"16"``, ``"250m"`` or ``"2"`` as a float."""
    if isinstance(value, int | float):
        return float(value)
    match = _QUANTITY.match(value.strip())
    if not match:
        raise ValueError(f"unsupported quantity {value!r}")
    return float(match.group(1)) * _SUFFIX[match.group(2)]


def _rules(document: dict[str, Any] | None, default: ScalingRules) -> ScalingRules:
    """copyHPAScalingRules: the fields the spec sets, the defaults for the rest."""
    if document is None:
        return default
    policies = default.policies
    if document.get("policies") is not None:
        policies = tuple(
            ScalingPolicy(p["type"], int(p["value"]), int(p["periodSeconds"]))
            for p in document["policies"]
        )
    window = document.get("stabilizationWindowSeconds")
    tolerance = document.get("tolerance")
    return ScalingRules(
        stabilization_s=float(window) if window is not None else default.stabilization_s,
        select=document.get("selectPolicy") or default.select,
        policies=policies,
        tolerance=parse_quantity(tolerance) if tolerance is not None else default.tolerance,
    )


@dataclass(frozen=True)
class MetricSpec:
    """One entry of ``spec.metrics``, reduced to what the controller computes with."""

    source: str  # Pods | Object | External | Resource
    name: str
    target_type: str  # AverageValue | Value | Utilization
    target: float

    @staticmethod
    def parse(document: dict[str, Any]) -> MetricSpec:
        source = document["type"]
        body = document[source[0].lower() + source[1:]]
        target = body["target"]
        kind = target["type"]
        name = body["name"] if source == "Resource" else body["metric"]["name"]
        if kind == "Utilization":
            value = float(target["averageUtilization"])
        elif kind == "AverageValue":
            value = parse_quantity(target["averageValue"])
        else:
            value = parse_quantity(target["value"])
        return MetricSpec(source, name, kind, value)


@dataclass(frozen=True)
class HpaSpec:
    """The parts of an autoscaling/v2 HPA spec the controller reads."""

    min_replicas: int
    max_replicas: int
    metrics: tuple[MetricSpec, ...]
    scale_up: ScalingRules | None  # None: spec.behavior absent
    scale_down: ScalingRules | None

    @staticmethod
    def parse(spec: dict[str, Any]) -> HpaSpec:
        behavior = spec.get("behavior")
        up = down = None
        if behavior is not None:
            # SetDefaults_HorizontalPodAutoscalerBehavior: any behavior, even {}, is defaulted.
            up = _rules(behavior.get("scaleUp"), DEFAULT_SCALE_UP)
            down = _rules(behavior.get("scaleDown"), DEFAULT_SCALE_DOWN)
        return HpaSpec(
            min_replicas=int(spec.get("minReplicas", 1)),
            max_replicas=int(spec["maxReplicas"]),
            metrics=tuple(MetricSpec.parse(m) for m in spec["metrics"]),
            scale_up=up,
            scale_down=down,
        )


@dataclass(frozen=True)
class PodInfo:
    """What the controller's pod lister shows of one pod."""

    name: str
    phase: str  # Pending | Running
    ready: bool
    start_time: float
    ready_transition: float  # lastTransitionTime of the Ready condition
    deleting: bool
    cpu_request: float = 0.0  # cores


@dataclass(frozen=True)
class ResourceSample:
    """A metrics-server sample: usage averaged over ``window`` ending at ``timestamp``."""

    value: float
    timestamp: float
    window: float


@dataclass
class MetricSnapshot:
    """The metric APIs' answers at one sync; a missing entry is a failed query."""

    pods: dict[str, dict[str, float]] = field(default_factory=dict)
    objects: dict[str, float] = field(default_factory=dict)
    external: dict[str, float] = field(default_factory=dict)
    resources: dict[str, dict[str, ResourceSample]] = field(default_factory=dict)


@dataclass(frozen=True)
class PodGroups:
    ready_count: int
    unready: frozenset[str]
    missing: frozenset[str]
    ignored: frozenset[str]


def group_pods(
    pods: list[PodInfo],
    names_with_metrics: set[str] | dict[str, Any],
    samples: dict[str, ResourceSample] | None,
    now: float,
    config: ControllerConfig,
) -> PodGroups:
    """replica_calculator.go groupPods. ``samples`` is given for the CPU resource only."""
    ready_count = 0
    unready: set[str] = set()
    missing: set[str] = set()
    ignored: set[str] = set()
    for pod in pods:
        if pod.deleting:
            ignored.add(pod.name)
            continue
        if pod.phase == "Pending":
            unready.add(pod.name)
            continue
        if pod.name not in names_with_metrics:
            missing.add(pod.name)
            continue
        if samples is not None:
            sample = samples[pod.name]
            if pod.start_time + config.cpu_initialization_period_s > now:
                # Still initialising: ignore the sample unless the pod is ready and the
                # sample's whole window came after it became ready.
                bad = (not pod.ready) or sample.timestamp < pod.ready_transition + sample.window
            else:
                # Ignore it only if the pod never became ready after its start.
                bad = (not pod.ready) and (
                    pod.start_time + config.initial_readiness_delay_s > pod.ready_transition
                )
            if bad:
                unready.add(pod.name)
                continue
        ready_count += 1
    return PodGroups(ready_count, frozenset(unready), frozenset(missing), frozenset(ignored))


def _recount(
    ratio: float,
    new_ratio: float,
    count: int,
    current: int,
    tolerances: Tolerances,
) -> int:
    """The second pass shared by Pods and Resource metrics once missing/unready pods got
    their assumed values: no change within tolerance or if the direction flipped."""
    if tolerances.within(new_ratio) or (ratio < 1.0 < new_ratio) or (ratio > 1.0 > new_ratio):
        return current
    replicas = math.ceil(new_ratio * count)
    if (new_ratio < 1.0 and replicas > current) or (new_ratio > 1.0 and replicas < current):
        return current
    return replicas


def plain_metric_replicas(
    values: dict[str, float],
    target: float,
    current: int,
    pods: list[PodInfo],
    tolerances: Tolerances,
    now: float,
    config: ControllerConfig,
) -> int:
    """calcPlainMetricReplicas: a Pods metric with an AverageValue target.

    Pods without a sample are assumed at the target on a scale-down and at 0 on a
    scale-up; pending pods count as 0 on a scale-up, so replicas already starting are
    not asked for twice.
    """
    groups = group_pods(pods, values, None, now, config)
    metrics = {
        k: v for k, v in values.items() if k not in groups.ignored and k not in groups.unready
    }
    if not metrics:
        raise MetricError("no samples for the targeted pods")
    ratio = (sum(metrics.values()) / len(metrics)) / target
    up_with_unready = bool(groups.unready) and ratio > 1.0
    if not up_with_unready and not groups.missing:
        if tolerances.within(ratio):
            return current
        return math.ceil(ratio * groups.ready_count)
    if groups.missing:
        if ratio < 1.0:
            metrics.update(dict.fromkeys(groups.missing, target))
        elif ratio > 1.0:
            metrics.update(dict.fromkeys(groups.missing, 0.0))
    if up_with_unready:
        metrics.update(dict.fromkeys(groups.unready, 0.0))
    new_ratio = (sum(metrics.values()) / len(metrics)) / target
    return _recount(ratio, new_ratio, len(metrics), current, tolerances)


def _utilization_ratio(
    usage_milli: dict[str, int], requests_milli: dict[str, int], target_pct: float
) -> float:
    """metrics/utilization.go GetResourceUtilizationRatio: an integer percentage."""
    total = sum(usage_milli.values())
    requested = sum(requests_milli[name] for name in usage_milli)
    if requested == 0:
        raise MetricError("no CPU requests on the targeted pods")
    utilization = (total * 100) // requested
    return utilization / target_pct


def resource_utilization_replicas(
    samples: dict[str, ResourceSample],
    target_pct: float,
    current: int,
    pods: list[PodInfo],
    tolerances: Tolerances,
    now: float,
    config: ControllerConfig,
) -> int:
    """GetResourceReplicas: a Resource metric (CPU) with a Utilization target.

    Unready and initialising pods are left out; on a scale-up they count as idle, and
    pods without a sample count as idle too; on a scale-down pods without a sample count
    as using their whole request.
    """
    groups = group_pods(pods, samples, samples, now, config)
    usage = {
        k: round(s.value * 1000)
        for k, s in samples.items()
        if k not in groups.ignored and k not in groups.unready
    }
    if not usage:
        raise MetricError("no CPU samples for the targeted pods (pods might be unready)")
    requests = {p.name: round(p.cpu_request * 1000) for p in pods}
    ratio = _utilization_ratio(usage, requests, target_pct)
    up_with_unready = bool(groups.unready) and ratio > 1.0
    if not up_with_unready and not groups.missing:
        if tolerances.within(ratio):
            return current
        return math.ceil(ratio * groups.ready_count)
    if groups.missing:
        if ratio < 1.0:
            fallback = max(100, int(target_pct))
            usage.update({name: requests[name] * fallback // 100 for name in groups.missing})
        elif ratio > 1.0:
            usage.update(dict.fromkeys(groups.missing, 0))
    if up_with_unready:
        usage.update(dict.fromkeys(groups.unready, 0))
    new_ratio = _utilization_ratio(usage, requests, target_pct)
    return _recount(ratio, new_ratio, len(usage), current, tolerances)


def object_value_replicas(
    usage: float, target: float, current: int, ready_pods: int, tolerances: Tolerances
) -> int:
    """GetObjectMetricReplicas / getUsageRatioReplicaCount: an Object metric, Value target.

    The proposal scales the ready pods by usage/target.
    """
    ratio = usage / target
    if current == 0:
        return math.ceil(ratio)
    if tolerances.within(ratio):
        return current
    if ready_pods == 0:
        raise MetricError("no ready pods")
    return math.ceil(ratio * ready_pods)


def per_pod_average_replicas(
    usage: float, target_per_pod: float, status_replicas: int, tolerances: Tolerances
) -> int:
    """GetExternalPerPodMetricReplicas and GetObjectPerPodMetricReplicas (the same
    computation): an External or Object metric with an AverageValue target."""
    ratio = usage / (target_per_pod * status_replicas) if status_replicas else math.inf
    if tolerances.within(ratio):
        return status_replicas
    return math.ceil(usage / target_per_pod)


def _change_in_period(events: list[tuple[float, int]], period_s: int, now: float) -> int:
    """getReplicasChangePerPeriod: replicas added (or removed) in the last period."""
    cutoff = now - period_s
    return sum(change for when, change in events if when > cutoff)


def scale_up_limit(
    current: int,
    up_events: list[tuple[float, int]],
    down_events: list[tuple[float, int]],
    rules: ScalingRules,
    now: float,
) -> int:
    """calculateScaleUpLimitWithScalingRules: the most replicas the policies allow.

    Each policy is measured from the replica count at the start of its period, so
    changes already made in the period use up its allowance.
    """
    if rules.select == "Disabled":
        return current
    pick = min if rules.select == "Min" else max
    result: int | None = None
    for policy in rules.policies:
        added = _change_in_period(up_events, policy.period_s, now)
        removed = _change_in_period(down_events, policy.period_s, now)
        start = current - added + removed
        if policy.type == "Pods":
            proposed = start + policy.value
        else:
            proposed = math.ceil(start * (1 + policy.value / 100))
        result = proposed if result is None else pick(result, proposed)
    return current if result is None else result


def scale_down_limit(
    current: int,
    up_events: list[tuple[float, int]],
    down_events: list[tuple[float, int]],
    rules: ScalingRules,
    now: float,
) -> int:
    """calculateScaleDownLimitWithBehaviors: the fewest replicas the policies allow."""
    if rules.select == "Disabled":
        return current
    pick = max if rules.select == "Min" else min
    result: int | None = None
    for policy in rules.policies:
        added = _change_in_period(up_events, policy.period_s, now)
        removed = _change_in_period(down_events, policy.period_s, now)
        start = current - added + removed
        if policy.type == "Pods":
            proposed = start - policy.value
        else:
            proposed = int(start * (1 - policy.value / 100))
        result = proposed if result is None else pick(result, proposed)
    return current if result is None else result


class HorizontalPodAutoscaler:
    """One HPA's controller state: recommendations and scale events over time."""

    def __init__(self, spec: dict[str, Any], config: ControllerConfig | None = None) -> None:
        self.raw = spec
        self.spec = HpaSpec.parse(spec)
        self.config = config or ControllerConfig()
        self.recommendations: list[tuple[float, int]] = []
        self.up_events: list[tuple[float, int]] = []
        self.down_events: list[tuple[float, int]] = []

    def tolerances(self) -> Tolerances:
        default = self.config.tolerance
        up = self.spec.scale_up.tolerance if self.spec.scale_up else None
        down = self.spec.scale_down.tolerance if self.spec.scale_down else None
        return Tolerances(down if down is not None else default, up if up is not None else default)

    def sync(
        self,
        now: float,
        spec_replicas: int,
        status_replicas: int,
        pods: list[PodInfo],
        metrics: MetricSnapshot,
    ) -> int:
        """reconcileAutoscaler: the replica count to set (``spec_replicas`` if unchanged)."""
        spec = self.spec
        current = spec_replicas
        if not self.recommendations:
            self.recommendations.append((now, current))  # recordInitialRecommendation
        if current == 0 and spec.min_replicas != 0:
            return current  # scaling disabled
        if current > spec.max_replicas:
            desired = spec.max_replicas
        elif current < spec.min_replicas:
            desired = spec.min_replicas
        else:
            proposal = self.replicas_for_metrics(now, current, status_replicas, pods, metrics)
            if proposal is None:
                return current
            desired = max(proposal, 0)
            if spec.scale_up is None or spec.scale_down is None:
                desired = self._normalize(now, current, desired)
            else:
                desired = self._normalize_with_behaviors(now, current, desired)
        if desired != current:
            self._store_scale_event(now, current, desired)
        return desired

    def replicas_for_metrics(
        self,
        now: float,
        spec_replicas: int,
        status_replicas: int,
        pods: list[PodInfo],
        metrics: MetricSnapshot,
    ) -> int | None:
        """computeReplicasForMetrics: the largest proposal; None when the HPA must hold
        (every metric failed, or one failed and the rest would scale down)."""
        tolerances = self.tolerances()
        replicas = 0
        invalid = 0
        for metric in self.spec.metrics:
            try:
                proposal = self._metric_proposal(
                    metric, now, spec_replicas, status_replicas, pods, metrics, tolerances
                )
            except MetricError:
                invalid += 1
                continue
            if replicas == 0 or proposal > replicas:
                replicas = proposal
        if invalid >= len(self.spec.metrics) or (invalid > 0 and replicas < spec_replicas):
            return None
        return replicas

    def _metric_proposal(
        self,
        metric: MetricSpec,
        now: float,
        spec_replicas: int,
        status_replicas: int,
        pods: list[PodInfo],
        metrics: MetricSnapshot,
        tolerances: Tolerances,
    ) -> int:
        if metric.source == "Pods":
            values = metrics.pods.get(metric.name)
            if values is None:
                raise MetricError(f"no series for {metric.name}")
            return plain_metric_replicas(
                values, metric.target, spec_replicas, pods, tolerances, now, self.config
            )
        if metric.source == "Resource" and metric.target_type == "Utilization":
            samples = metrics.resources.get(metric.name)
            if samples is None:
                raise MetricError(f"no {metric.name} samples")
            return resource_utilization_replicas(
                samples, metric.target, spec_replicas, pods, tolerances, now, self.config
            )
        if metric.source == "Object" and metric.target_type == "Value":
            value = metrics.objects.get(metric.name)
            if value is None:
                raise MetricError(f"no value for {metric.name}")
            ready = sum(1 for p in pods if p.phase == "Running" and p.ready and not p.deleting)
            return object_value_replicas(value, metric.target, spec_replicas, ready, tolerances)
        if metric.source == "External" and metric.target_type == "AverageValue":
            value = metrics.external.get(metric.name)
            if value is None:
                raise MetricError(f"no value for {metric.name}")
            return per_pod_average_replicas(value, metric.target, status_replicas, tolerances)
        if metric.source == "Object" and metric.target_type == "AverageValue":
            value = metrics.objects.get(metric.name)
            if value is None:
                raise MetricError(f"no value for {metric.name}")
            return per_pod_average_replicas(value, metric.target, status_replicas, tolerances)
        raise NotImplementedError(f"{metric.source} metric with a {metric.target_type} target")

    def _normalize(self, now: float, current: int, desired: int) -> int:
        """normalizeDesiredReplicas (no behavior): the highest recommendation of the
        downscale window, then min/max and the 2x-or-4 scale-up cap."""
        cutoff = now - self.config.downscale_stabilization_s
        stabilized = desired
        for when, recommendation in self.recommendations:
            if not when < cutoff and recommendation > stabilized:
                stabilized = recommendation
        self.recommendations = [(w, r) for w, r in self.recommendations if not w < cutoff]
        self.recommendations.append((now, desired))
        limit = int(max(SCALE_UP_LIMIT_FACTOR * current, SCALE_UP_LIMIT_MINIMUM))
        highest = min(self.spec.max_replicas, limit)
        if stabilized < self.spec.min_replicas:
            return self.spec.min_replicas
        return min(stabilized, highest)

    def _stabilize(self, now: float, current: int, desired: int) -> int:
        """stabilizeRecommendationWithBehaviors: never above the lowest recommendation of
        the scale-up window nor below the highest of the scale-down window."""
        assert self.spec.scale_up is not None
        assert self.spec.scale_down is not None
        up_window = self.spec.scale_up.stabilization_s or 0.0
        down_window = self.spec.scale_down.stabilization_s
        if down_window is None:  # maybeInitScaleDownStabilizationWindow
            down_window = self.config.downscale_stabilization_s
        up_cutoff, down_cutoff = now - up_window, now - down_window
        up, down = desired, desired
        for when, recommendation in self.recommendations:
            if when > up_cutoff:
                up = min(up, recommendation)
            if when > down_cutoff:
                down = max(down, recommendation)
        self.recommendations = [
            (w, r) for w, r in self.recommendations if not (w < up_cutoff and w < down_cutoff)
        ]
        self.recommendations.append((now, desired))
        return min(max(current, up), down)

    def _normalize_with_behaviors(self, now: float, current: int, desired: int) -> int:
        """normalizeDesiredReplicasWithBehaviors: stabilize, then apply the rate policies
        (convertDesiredReplicasWithBehaviorRate)."""
        assert self.spec.scale_up is not None
        assert self.spec.scale_down is not None
        stabilized = self._stabilize(now, current, desired)
        if stabilized > current:
            limit = max(
                scale_up_limit(current, self.up_events, self.down_events, self.spec.scale_up, now),
                current,
            )
            return min(stabilized, self.spec.max_replicas, limit)
        if stabilized < current:
            limit = min(
                scale_down_limit(
                    current, self.up_events, self.down_events, self.spec.scale_down, now
                ),
                current,
            )
            return max(stabilized, self.spec.min_replicas, limit)
        return stabilized

    def _store_scale_event(self, now: float, before: int, after: int) -> None:
        """storeScaleEvent: kept only with a behavior, for its longest policy period."""
        if self.spec.scale_up is None or self.spec.scale_down is None:
            return
        if after > before:
            cutoff = now - self.spec.scale_up.longest_period_s
            self.up_events = [e for e in self.up_events if not e[0] < cutoff]
            self.up_events.append((now, after - before))
        else:
            cutoff = now - self.spec.scale_down.longest_period_s
            self.down_events = [e for e in self.down_events if not e[0] < cutoff]
            self.down_events.append((now, before - after))
