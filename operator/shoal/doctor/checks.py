"""The doctor's checks, as pure functions: API objects and Prometheus answers, already
fetched, in; findings out. Every finding that is not ok says how to fix it.

The names checked come from where Shoal defines them: the CRDs from the API's kinds,
the admission policy's from its generator, the HPAs' metrics from the renderer, the
rules and scrape jobs from the monitoring generators.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from shoal.api.admission_policy import NAME as ADMISSION_NAME
from shoal.api.admission_policy import admission_policy
from shoal.api.common import parse_duration
from shoal.api.constants import (
    KUEUE_GROUP,
    KUEUE_VERSION,
    MANAGED_BY,
    MANAGED_BY_LABEL,
    MODEL_LABEL,
    VERSION,
)
from shoal.api.crd import KINDS
from shoal.doctor.findings import (
    ADMISSION,
    AUTOSCALERS,
    CAPACITY,
    CRDS,
    GPUS,
    METRICS_API,
    OPERATOR,
    PROMETHEUS,
    Finding,
    Status,
)
from shoal.leader import LEASE_NAME, LEASE_SECONDS
from shoal.metrics.alerts import alerting_rules
from shoal.metrics.pipeline import adapter_rules, kubernetes_scrape_configs, recording_rules
from shoal.render.autoscaler import (
    GATEWAY_QUEUE_METRIC,
    PREDICTIVE_COOL_DOWN,
    REQUIRED_REPLICAS_METRIC,
)
from shoal.render.workload import GPU, GPU_PRODUCT_LABEL

Obj = dict[str, Any]

CRD_NAMES = tuple(kind.crd_name for kind in KINDS)
# The CRD of the kind the admission policy takes its parameters from (TenantPool).
_PARAM_KIND = admission_policy()[0]["spec"]["paramKind"]["kind"]
PARAM_CRD = next(kind.crd_name for kind in KINDS if kind.name == _PARAM_KIND)
MANAGED = f"{MANAGED_BY_LABEL}={MANAGED_BY}"
# The operator's Deployments, in the chart (whatever its nameOverride) and in
# manifests/base.
OPERATOR_SELECTOR = "app.kubernetes.io/part-of=shoal,app.kubernetes.io/component=operator"
# The metrics API each kind of HPA metric is read from.
METRIC_GROUPS = {
    "Pods": "custom.metrics.k8s.io",
    "Object": "custom.metrics.k8s.io",
    "External": "external.metrics.k8s.io",
    "Resource": "metrics.k8s.io",
    "ContainerResource": "metrics.k8s.io",
}
CUSTOM_METRICS = METRIC_GROUPS["Pods"]  # every Shoal HPA has a Pods metric (queue depth)
SHOWN = 5  # names listed in one message before "and N more"

APPLY_CRDS = (
    "kubectl apply --server-side -f crds/ (from the release you run; `helm upgrade` never "
    "updates CRDs, `helm install` only creates them)"
)
APPLY_ADMISSION = (
    "kubectl apply --server-side -k manifests/admission, after the CRDs are Established "
    "(Helm: admissionPolicy.enabled=true)"
)
INSTALL_GPU_PLUGIN = (
    "install the NVIDIA GPU Operator (or its device plugin alone) so that GPU nodes advertise "
    f"{GPU} (docs/installation.md); see it with kubectl get nodes -o "
    "custom-columns=NAME:.metadata.name,GPUS:.status.allocatable.nvidia\\.com/gpu"
)
INSTALL_GFD = (
    "install GPU Feature Discovery (part of the GPU Operator) so that GPU nodes carry "
    f"{GPU_PRODUCT_LABEL}, or correct the pool's placement.gpuProduct; see the labels with "
    f"kubectl get nodes -L {GPU_PRODUCT_LABEL}"
)
INSTALL_KUEUE = (
    f"install Kueue (it must serve {KUEUE_GROUP}/{KUEUE_VERSION}; docs/elastic-capacity.md), "
    "or unset spec.capacity on these pools"
)
INSTALL_ADAPTER = (
    "install prometheus-adapter pointed at your Prometheus with Shoal's rules: the "
    "prometheus-community chart with manifests/monitoring/prometheus-adapter-values.yaml, "
    "or the config manifests/monitoring/prometheus-adapter-config.yaml; it registers the "
    f"APIService v1beta2.{CUSTOM_METRICS} (docs/installation.md)"
)
SCRAPE_MODELS = (
    "Prometheus must scrape the models' pods on port metrics: monitoring.podMonitor.enabled=true "
    "(Prometheus Operator), or the shoal-triton job of "
    "manifests/monitoring/prometheus-scrape-config.yaml; the pool's NetworkPolicies let only "
    "spec.access.monitoringNamespaces reach that port"
)
SCRAPE_GATEWAYS = (
    "Prometheus must scrape the pools' gateways: monitoring.podMonitor.enabled=true, or the "
    "shoal-gateway job of manifests/monitoring/prometheus-scrape-config.yaml"
)
SCRAPE_OPERATOR = (
    "Prometheus must scrape the operator: monitoring.serviceMonitor.enabled=true, or the "
    "shoal-operator job of manifests/monitoring/prometheus-scrape-config.yaml"
)
RULES_FIX = {
    False: (
        "Prometheus Operator: monitoring.prometheusRule.enabled=true (with "
        "monitoring.additionalLabels matching your Prometheus' ruleSelector); plain "
        "Prometheus: add manifests/monitoring/prometheus-rules.yaml to rule_files"
    ),
    True: (
        "Prometheus Operator: monitoring.prometheusRule.enabled=true and "
        "monitoring.prometheusRule.alerts=true; plain Prometheus: add "
        "manifests/monitoring/prometheus-alerts.yaml to rule_files"
    ),
}


# ----------------------------------------------------------------------------- helpers


def conditions(obj: Obj | None) -> dict[str, Obj]:
    """An object's status conditions by type."""
    found = ((obj or {}).get("status") or {}).get("conditions") or []
    return {c["type"]: c for c in found if "type" in c}


def said(condition: Obj) -> str:
    """A condition's reason and message, as one phrase."""
    parts = [condition.get("reason") or "", condition.get("message") or ""]
    return ": ".join(p for p in parts if p) or "no reason given"


def listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:SHOWN])
    more = len(names) - SHOWN
    return f"{shown} and {more} more" if more > 0 else shown


def ref(obj: Obj) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta.get('name')}" if namespace else str(meta.get("name"))


def timestamp(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(text)
    except ValueError:
        return None


# ----------------------------------------------------------------------------- CRDs


def check_crd(name: str, live: Obj | None, expected: Obj | None = None) -> Finding:
    """One CRD: installed, its names accepted, Established, serving Shoal's version, and
    (given the CRD this release generates) with this release's schema."""

    def fail(message: str, fix: str = APPLY_CRDS) -> Finding:
        return Finding(CRDS, f"CRD {name}", Status.FAIL, message, fix)

    if live is None:
        return fail("not installed: the API server does not serve this kind")
    if (live.get("metadata") or {}).get("deletionTimestamp"):
        return fail(
            "being deleted (its objects are being removed first)",
            f"wait for the deletion to finish, then {APPLY_CRDS}",
        )
    state = conditions(live)
    names = state.get("NamesAccepted")
    if names is not None and names.get("status") != "True":
        group = (live.get("spec") or {}).get("group", "")
        return fail(
            f"its names are not accepted: {said(names)}",
            f"another CRD of group {group} claims the same names (`kubectl get crd -o name "
            f"| grep {group}`): delete it, then {APPLY_CRDS}",
        )
    established = state.get("Established")
    if established is None or established.get("status") != "True":
        reason = said(established) if established else "no Established condition yet"
        return fail(
            f"not Established: {reason}",
            f"`kubectl describe crd {name}` says why; then {APPLY_CRDS}",
        )
    versions = {v.get("name"): v for v in (live.get("spec") or {}).get("versions") or []}
    version = versions.get(VERSION)
    if version is None or not version.get("served"):
        return fail(f"does not serve {VERSION} (serves {listed(sorted(map(str, versions)))})")
    if expected is not None:
        wanted = next(v for v in expected["spec"]["versions"] if v["name"] == VERSION)
        if version.get("schema") != wanted["schema"]:
            return Finding(
                CRDS,
                f"CRD {name}",
                Status.WARN,
                f"its {VERSION} schema differs from this shoal's: fields this release knows "
                "may be pruned or refused",
                APPLY_CRDS,
            )
    return Finding(CRDS, f"CRD {name}", Status.OK, f"Established, serves {VERSION}")


def check_crds(live: Mapping[str, Obj | None], expected: Mapping[str, Obj]) -> list[Finding]:
    """Shoal's three CRDs, by name (``live``: the API server's, None where missing;
    ``expected``: the ones this release generates)."""
    return [check_crd(name, live.get(name), expected.get(name)) for name in CRD_NAMES]


# ----------------------------------------------------------------------------- admission


def check_admission(policy: Obj | None, binding: Obj | None, params: Obj | None) -> list[Finding]:
    """The ValidatingAdmissionPolicy and its binding; ``params``: the TenantPool CRD,
    the policy's parameter kind (a policy created before it was served stays broken)."""
    policy_name = f"ValidatingAdmissionPolicy {ADMISSION_NAME}"
    binding_name = f"ValidatingAdmissionPolicyBinding {ADMISSION_NAME}"
    out: list[Finding] = []
    if policy is None:
        out.append(
            Finding(
                ADMISSION,
                policy_name,
                Status.FAIL,
                "missing: the API server admits models their pool does not admit (the "
                "operator reports them NamespaceNotAdmitted or QuotaExceeded later)",
                APPLY_ADMISSION,
            )
        )
    else:
        out.append(_policy(policy_name, policy, params))
    if binding is None:
        out.append(
            Finding(
                ADMISSION,
                binding_name,
                Status.FAIL,
                "missing: the policy is not enforced, models their pool does not admit are "
                "accepted",
                APPLY_ADMISSION,
            )
        )
        return out
    spec = binding.get("spec") or {}
    actions = spec.get("validationActions") or []
    if spec.get("policyName") != ADMISSION_NAME:
        out.append(
            Finding(
                ADMISSION,
                binding_name,
                Status.FAIL,
                f"binds policy {spec.get('policyName')!r}, not {ADMISSION_NAME!r}",
                APPLY_ADMISSION,
            )
        )
    elif "Deny" not in actions:
        out.append(
            Finding(
                ADMISSION,
                binding_name,
                Status.WARN,
                f"validationActions {actions}: refusals are only reported, not enforced",
                f"set validationActions to [Deny]: {APPLY_ADMISSION}",
            )
        )
    else:
        out.append(Finding(ADMISSION, binding_name, Status.OK, "binds the policy with Deny"))
    return out


def _policy(name: str, policy: Obj, params: Obj | None) -> Finding:
    warnings = ((policy.get("status") or {}).get("typeChecking") or {}).get(
        "expressionWarnings"
    ) or []
    if warnings:
        fields = [str(w.get("fieldRef")) for w in warnings]
        return Finding(
            ADMISSION,
            name,
            Status.WARN,
            f"the API server's type check warns about {listed(fields)}: "
            f"{warnings[0].get('warning', '')}".strip(),
            f"re-apply the policy of the release you run: {APPLY_ADMISSION}",
        )
    created = timestamp((policy.get("metadata") or {}).get("creationTimestamp"))
    served = timestamp(conditions(params).get("Established", {}).get("lastTransitionTime"))
    if created and served and created < served:
        return Finding(
            ADMISSION,
            name,
            Status.WARN,
            f"created before its parameter kind ({PARAM_CRD}) was served: if models are "
            "refused with 'failed to find resource referenced by paramKind', it is broken",
            "recreate it: kubectl delete -k manifests/admission && " + APPLY_ADMISSION,
        )
    return Finding(ADMISSION, name, Status.OK, "present")


# ----------------------------------------------------------------------------- operator


def check_operator(
    deployments: list[Obj], leases: Mapping[str, Obj | None], now: dt.datetime
) -> list[Finding]:
    """The operator's Deployments (``OPERATOR_SELECTOR``) are available, and in each
    one's namespace a replica holds the leader Lease (``leases``: by namespace)."""
    if not deployments:
        return [
            Finding(
                OPERATOR,
                "operator Deployment",
                Status.WARN,
                f"no Deployment labelled {OPERATOR_SELECTOR} in any namespace: nothing "
                "reconciles unless you run `shoal run` yourself",
                "helm install shoal charts/shoal --namespace shoal-system --create-namespace, "
                "or kubectl apply --server-side -k manifests/default",
            )
        ]
    out: list[Finding] = []
    for deployment in deployments:
        namespace = deployment["metadata"].get("namespace", "")
        name = deployment["metadata"]["name"]
        look = (
            f"kubectl -n {namespace} describe deployment {name}; "
            f"kubectl -n {namespace} logs deploy/{name} --previous"
        )
        status = deployment.get("status") or {}
        wanted = (deployment.get("spec") or {}).get("replicas", 1)
        available = status.get("availableReplicas") or 0
        condition = conditions(deployment).get("Available")
        if not wanted:
            out.append(
                Finding(
                    OPERATOR,
                    f"Deployment {namespace}/{name}",
                    Status.FAIL,
                    "scaled to zero replicas: nothing reconciles",
                    f"kubectl -n {namespace} scale deployment {name} --replicas=2 (Helm: replicas)",
                )
            )
            continue
        if not available or (condition is not None and condition.get("status") != "True"):
            why = said(condition) if condition else "no replica available"
            out.append(
                Finding(
                    OPERATOR,
                    f"Deployment {namespace}/{name}",
                    Status.FAIL,
                    f"{available}/{wanted} replicas available ({why})",
                    look,
                )
            )
        else:
            out.append(
                Finding(
                    OPERATOR,
                    f"Deployment {namespace}/{name}",
                    Status.OK,
                    f"{available}/{wanted} replicas available",
                )
            )
        out.append(_lease(namespace, leases.get(namespace), now, look))
    return out


def _lease(namespace: str, lease: Obj | None, now: dt.datetime, look: str) -> Finding:
    name = f"Lease {namespace}/{LEASE_NAME}"
    if lease is None:
        return Finding(
            OPERATOR,
            name,
            Status.WARN,
            "no replica has ever led here (the Deployment does not elect a leader, or no "
            "replica got that far)",
            look,
        )
    spec = lease.get("spec") or {}
    holder = spec.get("holderIdentity") or ""
    renewed = timestamp(spec.get("renewTime"))
    duration = spec.get("leaseDurationSeconds") or LEASE_SECONDS
    if not holder or renewed is None:
        return Finding(OPERATOR, name, Status.FAIL, "no replica holds it: nothing reconciles", look)
    age = (now - renewed).total_seconds()
    if age > duration:
        return Finding(
            OPERATOR,
            name,
            Status.FAIL,
            f"{holder} last renewed it {age:.0f}s ago (it expires after {duration}s): no "
            "replica leads, nothing reconciles",
            look,
        )
    return Finding(OPERATOR, name, Status.OK, f"held by {holder}, renewed {age:.0f}s ago")


# ----------------------------------------------------------------------------- metrics API


def hpa_metrics(hpa: Obj) -> list[tuple[str, str]]:
    """The (metrics API group, metric name) of each metric an HPA reads."""
    out: list[tuple[str, str]] = []
    for metric in (hpa.get("spec") or {}).get("metrics") or []:
        kind = metric.get("type", "")
        group = METRIC_GROUPS.get(kind)
        body = metric.get(kind[:1].lower() + kind[1:]) or {}
        name = (body.get("metric") or {}).get("name") or body.get("name")
        if group and name:
            out.append((group, str(name)))
    return out


def metric_groups(hpas: Iterable[Obj]) -> list[str]:
    """The metrics APIs Shoal's HPAs read: the custom metrics API always."""
    groups = {CUSTOM_METRICS} | {group for hpa in hpas for group, _ in hpa_metrics(hpa)}
    return sorted(groups)


def check_metrics_apis(api_services: list[Obj], groups: list[str]) -> list[Finding]:
    """Each metrics API in ``groups`` has an APIService, and it is Available."""
    out: list[Finding] = []
    for group in groups:
        services = [s for s in api_services if (s.get("spec") or {}).get("group") == group]
        if not services:
            fix = INSTALL_ADAPTER if group == CUSTOM_METRICS else f"install a server for {group}"
            out.append(
                Finding(
                    METRICS_API,
                    group,
                    Status.FAIL,
                    "no APIService serves it: the HPAs cannot read Shoal's metrics",
                    fix,
                )
            )
            continue
        for service in services:
            name = service["metadata"]["name"]
            available = conditions(service).get("Available")
            backend = (service.get("spec") or {}).get("service") or {}
            where = f"{backend.get('namespace')}/{backend.get('name')}" if backend else "local"
            if available is None or available.get("status") != "True":
                why = said(available) if available else "no Available condition"
                out.append(
                    Finding(
                        METRICS_API,
                        f"APIService {name}",
                        Status.FAIL,
                        f"not Available: {why}",
                        f"kubectl describe apiservice {name}; the adapter behind Service "
                        f"{where} must run and answer",
                    )
                )
            else:
                out.append(
                    Finding(
                        METRICS_API, f"APIService {name}", Status.OK, f"Available (service {where})"
                    )
                )
    return out


def _series_of_metric() -> dict[str, str]:
    """The recording rule (or series) prometheus-adapter serves each HPA metric from."""
    out: dict[str, str] = {}
    for rule in adapter_rules()["rules"]:
        out[rule["name"]["as"]] = rule["name"]["matches"].strip("^$")
    return out


def served_metric_names(resources: list[Obj]) -> set[str]:
    """Metric names in a custom metrics API's discovery document (``pods/<metric>``,
    ``services/<metric>``, ...)."""
    return {str(r.get("name", "")).split("/", 1)[-1] for r in resources}


def check_served_metrics(served: set[str], hpas: list[Obj]) -> list[Finding]:
    """The custom metrics API serves every metric Shoal's HPAs read (``served``: the
    names in its discovery document). prometheus-adapter lists a metric only once
    Prometheus holds series for it."""
    users: dict[str, list[str]] = {}
    for hpa in hpas:
        for group, metric in hpa_metrics(hpa):
            if group == CUSTOM_METRICS:
                users.setdefault(metric, []).append(ref(hpa))
    if not users:
        return [
            Finding(
                METRICS_API,
                "Shoal's metrics",
                Status.OK,
                "no Shoal HPA yet, so no metric is needed"
                + (f" (served now: {listed(sorted(served))})" if served else ""),
            )
        ]
    series = _series_of_metric()
    scraped = {GATEWAY_QUEUE_METRIC: SCRAPE_GATEWAYS, REQUIRED_REPLICAS_METRIC: SCRAPE_OPERATOR}
    out: list[Finding] = []
    for metric, hpa_names in sorted(users.items()):
        if metric in served:
            out.append(Finding(METRICS_API, f"metric {metric}", Status.OK, "served"))
            continue
        source = series.get(metric)
        fix = (
            f"prometheus-adapter serves it once Prometheus has series of {source}: check that "
            f"`{source}` returns series in Prometheus (`shoal doctor --prometheus-url ...` "
            f"checks the rules and targets); {scraped.get(metric, SCRAPE_MODELS)}"
            if source
            else "it is not one prometheus-adapter's Shoal rules expose: "
            + "manifests/monitoring/prometheus-adapter-config.yaml"
        )
        out.append(
            Finding(
                METRICS_API,
                f"metric {metric}",
                Status.FAIL,
                f"not served by {CUSTOM_METRICS}; HPAs reading it: {listed(hpa_names)}",
                fix,
            )
        )
    return out


# ----------------------------------------------------------------------------- HPAs


def check_autoscalers(hpas: list[Obj]) -> list[Finding]:
    """Every HPA Shoal manages can read its metrics (ScalingActive=True) and reach its
    Deployment (AbleToScale=True); the healthy ones share one line."""
    out: list[Finding] = []
    healthy = 0
    for hpa in hpas:
        namespace, name = hpa["metadata"].get("namespace", ""), hpa["metadata"]["name"]
        state = conditions(hpa)
        look = f"kubectl -n {namespace} describe hpa {name}"
        able, active = state.get("AbleToScale"), state.get("ScalingActive")
        if able is not None and able.get("status") == "False":
            out.append(
                Finding(
                    AUTOSCALERS,
                    f"HPA {namespace}/{name}",
                    Status.FAIL,
                    f"AbleToScale=False {said(able)}",
                    f"{look}; its Deployment {namespace}/{name} must exist (the operator "
                    "creates it with the HPA)",
                )
            )
        elif active is None:
            out.append(
                Finding(
                    AUTOSCALERS,
                    f"HPA {namespace}/{name}",
                    Status.WARN,
                    "not evaluated yet by the HPA controller",
                    f"wait a sync period; if it stays so, kube-controller-manager's log; {look}",
                )
            )
        elif active.get("status") == "False" and active.get("reason") == "ScalingDisabled":
            out.append(
                Finding(
                    AUTOSCALERS,
                    f"HPA {namespace}/{name}",
                    Status.WARN,
                    f"ScalingActive=False {said(active)}",
                    f"the Deployment was scaled to zero by hand: kubectl -n {namespace} scale "
                    f"deployment {name} --replicas=1",
                )
            )
        elif active.get("status") != "True":
            out.append(
                Finding(
                    AUTOSCALERS,
                    f"HPA {namespace}/{name}",
                    Status.FAIL,
                    f"ScalingActive={active.get('status')} {said(active)}",
                    f"{look}; the metrics API must serve the metric (see the {METRICS_API} "
                    f"findings and, with --prometheus-url, the {PROMETHEUS} ones)",
                )
            )
        else:
            healthy += 1
    if healthy or not hpas:
        message = (
            f"{healthy} of {len(hpas)} HPAs read their metrics (ScalingActive=True)"
            if hpas
            else f"no HPA labelled {MANAGED}"
        )
        out.insert(0, Finding(AUTOSCALERS, "Shoal's HPAs", Status.OK, message))
    out.extend(check_predictive_cool_downs(hpas))
    return out


# The HPA controller's scale-down window when an HPA's behavior sets none
# (--horizontal-pod-autoscaler-downscale-stabilization).
CONTROLLER_SCALE_DOWN_WINDOW_S = 300


def check_predictive_cool_downs(hpas: list[Obj]) -> list[Finding]:
    """An HPA that scales on the operator's forecast with a cool-down longer than a
    predictive model wants works, but holds each forecast's peak for that long, which
    in the autoscaling replay costs more than the short window at the same share of
    windows in SLO."""
    out: list[Finding] = []
    wanted = round(parse_duration(PREDICTIVE_COOL_DOWN))
    for hpa in hpas:
        if REQUIRED_REPLICAS_METRIC not in {name for _, name in hpa_metrics(hpa)}:
            continue
        behavior = (hpa.get("spec") or {}).get("behavior") or {}
        window = (behavior.get("scaleDown") or {}).get("stabilizationWindowSeconds")
        seconds = CONTROLLER_SCALE_DOWN_WINDOW_S if window is None else int(window)
        if seconds <= wanted:
            continue
        namespace, name = hpa["metadata"].get("namespace", ""), hpa["metadata"]["name"]
        model = (hpa["metadata"].get("labels") or {}).get(MODEL_LABEL, name)
        out.append(
            Finding(
                AUTOSCALERS,
                f"HPA {namespace}/{name}",
                Status.WARN,
                f"scales on the forecast ({REQUIRED_REPLICAS_METRIC}) with a {seconds}s "
                "scale-down window: it holds each forecast's peak that long",
                f"set spec.scaling.scaleDown.stabilizationWindow: {PREDICTIVE_COOL_DOWN} on "
                f"InferenceModel {namespace}/{model} (docs/autoscaling.md, predictive "
                "scaling)",
            )
        )
    return out


# ----------------------------------------------------------------------------- Prometheus


def check_prometheus_rules(groups: list[Obj]) -> list[Finding]:
    """Prometheus has loaded each of Shoal's rule groups (compared by rule name, so a
    PrometheusRule's renamed file still counts) and none of their rules fails."""
    loaded: dict[str, Obj] = {}
    for group in groups:
        for rule in group.get("rules") or []:
            loaded.setdefault(str(rule.get("name")), rule)
    out: list[Finding] = []
    shipped = [(g, False) for g in recording_rules()["groups"]] + [
        (g, True) for g in alerting_rules()["groups"]
    ]
    for group, alerts in shipped:
        names = [r.get("alert") or r["record"] for r in group["rules"]]
        missing = [n for n in names if n not in loaded]
        broken = [n for n in names if (loaded.get(n) or {}).get("health") == "err"]
        label = f"rule group {group['name']}"
        if missing:
            out.append(
                Finding(
                    PROMETHEUS,
                    label,
                    # The recording rules feed the HPAs; the alerts are advice.
                    Status.WARN if alerts else Status.FAIL,
                    f"{len(missing)} of {len(names)} rules not loaded ({listed(missing)})",
                    RULES_FIX[alerts],
                )
            )
        elif broken:
            error = loaded[broken[0]].get("lastError", "")
            out.append(
                Finding(
                    PROMETHEUS,
                    label,
                    Status.FAIL,
                    f"rules failing to evaluate: {listed(broken)} ({error})",
                    "re-apply the rules of the release you run: " + RULES_FIX[alerts],
                )
            )
        else:
            out.append(Finding(PROMETHEUS, label, Status.OK, f"all {len(names)} rules loaded"))
    return out


def job_of(target: Obj) -> str | None:
    """Which of Shoal's scrape jobs a target belongs to: the job's name appears in its
    scrape pool (``shoal-triton``, or a PodMonitor's ``podMonitor/<ns>/shoal-triton/0``)."""
    pool = str(target.get("scrapePool") or (target.get("labels") or {}).get("job") or "")
    for config in kubernetes_scrape_configs():
        if config["job_name"] in pool:
            return str(config["job_name"])
    return None


def check_prometheus_targets(targets: list[Obj], models_expected: bool) -> list[Finding]:
    """Prometheus scrapes Shoal's pods and operator (active targets), and they are up.
    ``models_expected``: Shoal's HPAs exist, so model pods should be scraped."""
    fixes = {"shoal-triton": SCRAPE_MODELS, "shoal-gateway": SCRAPE_GATEWAYS}
    out: list[Finding] = []
    for config in kubernetes_scrape_configs():
        job = config["job_name"]
        mine = [t for t in targets if job_of(t) == job]
        down = [t for t in mine if t.get("health") != "up"]
        fix = fixes.get(job, SCRAPE_OPERATOR)
        label = f"scrape job {job}"
        if down:
            where = [str((t.get("labels") or {}).get("instance", "?")) for t in down]
            out.append(
                Finding(
                    PROMETHEUS,
                    label,
                    Status.FAIL,
                    f"{len(down)} of {len(mine)} targets down ({listed(where)}): "
                    f"{down[0].get('lastError') or 'not scraped yet'}",
                    fix,
                )
            )
        elif mine:
            out.append(Finding(PROMETHEUS, label, Status.OK, f"{len(mine)} targets up"))
        elif job == "shoal-triton" and models_expected:
            out.append(
                Finding(
                    PROMETHEUS,
                    label,
                    Status.FAIL,
                    "no target, though Shoal's HPAs exist: their metrics have no source",
                    fix,
                )
            )
        elif job == "shoal-operator":
            out.append(
                Finding(
                    PROMETHEUS,
                    label,
                    Status.WARN,
                    "no target: ShoalOperatorDown fires, and predictive scaling has no signal",
                    fix,
                )
            )
        else:
            out.append(Finding(PROMETHEUS, label, Status.OK, "no target (nothing to scrape yet)"))
    return out


def prometheus_unreachable(url: str, error: str) -> Finding:
    return Finding(
        PROMETHEUS,
        f"Prometheus {url}",
        Status.FAIL,
        f"cannot be queried: {error}",
        "check --prometheus-url (the operator's SHOAL_PROMETHEUS_URL, chart value prometheusUrl)",
    )


def prometheus_not_given() -> Finding:
    return Finding(
        PROMETHEUS,
        "Prometheus",
        Status.SKIP,
        "no URL: rules and targets not checked",
        "pass --prometheus-url http://<prometheus>:9090 (or set SHOAL_PROMETHEUS_URL)",
    )


def unreadable(check: str, what: str, error: str) -> Finding:
    """A read the doctor's credentials may not make (403) or the server failed."""
    return Finding(
        check,
        what,
        Status.SKIP,
        f"could not be read: {error}",
        "run the doctor with credentials that may read it (cluster-admin, or view plus "
        "the cluster-scoped reads)",
    )


def _gpus(node: Obj) -> int:
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    try:
        return int(str(allocatable.get(GPU, "0")))
    except ValueError:
        return 0


def _wants_gpus(model: Obj) -> bool:
    runtime = (model.get("spec") or {}).get("runtime") or {}
    return int(runtime.get("gpus", 1)) > 0  # the API's default is one GPU


def check_gpu_nodes(nodes: list[Obj], models: list[Obj], pools: list[Obj]) -> list[Finding]:
    """Some node advertises GPUs (a device plugin runs), and every GPU product a pool
    places its models on is a label GPU Feature Discovery put on a GPU node."""
    gpu_nodes = [n for n in nodes if _gpus(n) > 0]
    wanting = [ref(m) for m in models if _wants_gpus(m)]
    out: list[Finding] = []
    if not gpu_nodes:
        out.append(
            Finding(
                GPUS,
                f"{GPU} on nodes",
                Status.FAIL if wanting else Status.WARN,
                f"no node advertises {GPU}"
                + (
                    f": {len(wanting)} models ask for GPUs and stay Pending ({listed(wanting)})"
                    if wanting
                    else ": models that ask for GPUs would stay Pending"
                ),
                INSTALL_GPU_PLUGIN,
            )
        )
    else:
        total = sum(_gpus(n) for n in gpu_nodes)
        out.append(
            Finding(
                GPUS, f"{GPU} on nodes", Status.OK, f"{len(gpu_nodes)} nodes advertise {total} GPUs"
            )
        )
    products = {
        str(((n.get("metadata") or {}).get("labels") or {}).get(GPU_PRODUCT_LABEL))
        for n in gpu_nodes
        if GPU_PRODUCT_LABEL in ((n.get("metadata") or {}).get("labels") or {})
    }
    asked: dict[str, list[str]] = {}
    for pool in pools:
        product = ((pool.get("spec") or {}).get("placement") or {}).get("gpuProduct")
        if product:
            asked.setdefault(str(product), []).append(pool["metadata"]["name"])
    for product, names in sorted(asked.items()):
        if product in products:
            out.append(Finding(GPUS, f"{GPU_PRODUCT_LABEL}={product}", Status.OK, "on GPU nodes"))
            continue
        seen = f"products labelled: {listed(sorted(products))}" if products else "none labelled"
        out.append(
            Finding(
                GPUS,
                f"{GPU_PRODUCT_LABEL}={product}",
                Status.FAIL,
                f"pools {listed(names)} place their models on it, and no GPU node carries it "
                f"({seen}): their models stay Pending",
                INSTALL_GFD,
            )
        )
    return out


def check_kueue(pools: list[Obj], kueue_served: bool) -> list[Finding]:
    """Kueue runs where a pool asks for elastic capacity (``spec.capacity``)."""
    elastic = [p["metadata"]["name"] for p in pools if (p.get("spec") or {}).get("capacity")]
    if not elastic:
        return [Finding(CAPACITY, "Kueue", Status.OK, "no pool asks for elastic capacity")]
    if kueue_served:
        return [
            Finding(
                CAPACITY,
                "Kueue",
                Status.OK,
                f"{KUEUE_GROUP}/{KUEUE_VERSION} served for {len(elastic)} elastic pools",
            )
        ]
    return [
        Finding(
            CAPACITY,
            "Kueue",
            Status.WARN,
            f"pools {listed(elastic)} ask for elastic capacity and the API server does not "
            f"serve {KUEUE_GROUP}/{KUEUE_VERSION}: they keep their hard quota "
            "(status.capacity.mode HardQuota) and lend or borrow nothing",
            INSTALL_KUEUE,
        )
    ]
