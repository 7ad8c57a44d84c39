"""``shoal doctor``'s checks (pure): a healthy installation gives only ok findings, and
each kind of fault gives its own finding, with a fix. The objects are what the API
server and Prometheus return, built from what Shoal generates (its CRDs, admission
policy, rendered HPAs, rule groups and scrape jobs) with the status a cluster adds."""

from __future__ import annotations

import copy
import datetime as dt
import json
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from shoal.api.admission_policy import NAME as ADMISSION_NAME
from shoal.api.admission_policy import admission_policy
from shoal.api.crd import all_crds
from shoal.cli import main
from shoal.doctor import checks, report
from shoal.doctor.findings import (
    AUTOSCALERS,
    CAPACITY,
    CRDS,
    GPUS,
    METRICS_API,
    PROMETHEUS,
    Finding,
    Status,
    failed,
)
from shoal.doctor.probe import Cluster, Options, diagnose
from shoal.leader import LEASE_NAME
from shoal.metrics.alerts import alerting_rules
from shoal.metrics.pipeline import adapter_rules, kubernetes_scrape_configs, recording_rules
from shoal.render.autoscaler import (
    P95_METRIC,
    PREDICTIVE_COOL_DOWN,
    QUEUE_METRIC,
    REQUIRED_REPLICAS_METRIC,
)
from shoal.render.documents import render_documents
from tests.support.resources import example_documents

Obj = dict[str, Any]
NOW = dt.datetime(2025, 6, 1, 12, 0, 0, tzinfo=dt.UTC)


def stamp(seconds_ago: float) -> str:
    return (NOW - dt.timedelta(seconds=seconds_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def cond(type_: str, status: str = "True", reason: str = "", message: str = "") -> Obj:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": stamp(3600),
    }


def only(findings: list[Finding], status: Status) -> list[Finding]:
    return [f for f in findings if f.status is status]


def not_ok(findings: list[Finding]) -> list[Finding]:
    return [f for f in findings if f.status is not Status.OK]


def the_one(findings: list[Finding]) -> Finding:
    """The single finding that is not ok; every such one carries a fix."""
    bad = not_ok(findings)
    assert len(bad) == 1, bad
    assert bad[0].fix, bad[0]
    return bad[0]


# ----------------------------------------------------------------------------- healthy


def live_crds() -> dict[str, Obj]:
    out = {}
    for crd in all_crds():
        live = copy.deepcopy(crd)
        live["status"] = {"conditions": [cond("NamesAccepted"), cond("Established")]}
        out[crd["metadata"]["name"]] = live
    return out


def expected_crds() -> dict[str, Obj]:
    return {crd["metadata"]["name"]: crd for crd in all_crds()}


def policy_and_binding() -> tuple[Obj, Obj]:
    policy, binding = copy.deepcopy(admission_policy())
    # Created after the TenantPool CRD was Established (cond() says an hour ago).
    policy["metadata"]["creationTimestamp"] = stamp(60)
    return policy, binding


def deployment(name: str = "shoal-operator", namespace: str = "shoal-system", **status: Any) -> Obj:
    return {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"replicas": 2},
        "status": {
            "replicas": 2,
            "availableReplicas": 2,
            "conditions": [cond("Available", reason="MinimumReplicasAvailable")],
            **status,
        },
    }


def lease(renewed_ago: float = 3, holder: str = "shoal-operator-abc") -> Obj:
    return {
        "metadata": {"name": LEASE_NAME, "namespace": "shoal-system"},
        "spec": {
            "holderIdentity": holder,
            "leaseDurationSeconds": 15,
            "renewTime": stamp(renewed_ago),
        },
    }


def api_service(available: bool = True, group: str = checks.CUSTOM_METRICS) -> Obj:
    state = (
        cond("Available", reason="Passed", message="all checks passed")
        if available
        else cond("Available", "False", "FailedDiscoveryCheck", "failing or missing response")
    )
    return {
        "metadata": {"name": f"v1beta2.{group}"},
        "spec": {
            "group": group,
            "version": "v1beta2",
            "versionPriority": 100,
            "service": {"namespace": "monitoring", "name": "prometheus-adapter"},
        },
        "status": {"conditions": [state]},
    }


def shoal_hpas(
    changes: dict[str, Obj] | None = None, documents: list[Obj] | None = None
) -> list[Obj]:
    """The HPAs Shoal renders for the examples (or ``documents``), as the HPA controller
    leaves them."""
    rendered = render_documents(example_documents() if documents is None else documents)
    hpas = [o for o in rendered if o["kind"] == "HorizontalPodAutoscaler"]
    for hpa in hpas:
        hpa["status"] = {
            "conditions": [
                cond("AbleToScale", reason="ReadyForNewScale"),
                cond("ScalingActive", reason="ValidMetricFound"),
            ]
        }
    for name, status in (changes or {}).items():
        next(h for h in hpas if h["metadata"]["name"] == name)["status"] = status
    return hpas


def served_resources() -> list[Obj]:
    """The custom metrics API's discovery, with every metric the adapter rules expose."""
    by = {"pod": "pods", "service": "services"}
    out = []
    for rule in adapter_rules()["rules"]:
        resource = next(k for k in rule["resources"]["overrides"] if k != "namespace")
        out.append({"name": f"{by[resource]}/{rule['name']['as']}", "namespaced": True})
    return out


def loaded_groups(*, alerts: bool = True) -> list[Obj]:
    """/api/v1/rules of a Prometheus with Shoal's rule files loaded."""
    groups = [
        {
            "name": g["name"],
            "rules": [
                {"name": r["record"], "type": "recording", "health": "ok"} for r in g["rules"]
            ],
        }
        for g in recording_rules()["groups"]
    ]
    if alerts:
        groups += [
            {
                "name": g["name"],
                "rules": [
                    {"name": r["alert"], "type": "alerting", "health": "ok"} for r in g["rules"]
                ],
            }
            for g in alerting_rules()["groups"]
        ]
    return groups


def target(job: str, health: str = "up", pool: str | None = None) -> Obj:
    return {
        "scrapePool": pool or job,
        "labels": {"job": job, "instance": f"10.0.0.1:{len(job)}"},
        "health": health,
        "lastError": "" if health == "up" else "connection refused",
    }


def scraped() -> list[Obj]:
    return [target(c["job_name"]) for c in kubernetes_scrape_configs()]


def test_a_healthy_installation_gives_only_ok_findings() -> None:
    policy, binding = policy_and_binding()
    crds = live_crds()
    hpas = shoal_hpas()
    findings = [
        *checks.check_crds(crds, expected_crds()),
        *checks.check_admission(policy, binding, crds[checks.PARAM_CRD]),
        *checks.check_operator([deployment()], {"shoal-system": lease()}, NOW),
        *checks.check_metrics_apis([api_service()], checks.metric_groups(hpas)),
        *checks.check_served_metrics(checks.served_metric_names(served_resources()), hpas),
        *checks.check_autoscalers(hpas),
        *checks.check_prometheus_rules(loaded_groups()),
        *checks.check_prometheus_targets(scraped(), models_expected=True),
    ]
    assert not_ok(findings) == []
    assert not failed(findings)
    # Every CRD, both admission objects, the Deployment and its Lease, the APIService,
    # each metric the examples' HPAs read, the HPAs, three rule groups, three scrape jobs.
    assert len([f for f in findings if f.check == CRDS]) == 3
    assert {f.name for f in findings if f.check == METRICS_API} >= {
        f"metric {QUEUE_METRIC}",
        f"metric {P95_METRIC}",
    }
    assert "3 of 3 HPAs" in next(f.message for f in findings if f.check == AUTOSCALERS)


# ----------------------------------------------------------------------------- CRDs


def test_a_missing_crd_is_a_failure_naming_it() -> None:
    crds = live_crds()
    del crds["tenantpools.shoal.dev"]
    found = the_one(checks.check_crds(crds, expected_crds()))
    assert (found.status, found.name) == (Status.FAIL, "CRD tenantpools.shoal.dev")
    assert "not installed" in found.message
    assert "kubectl apply --server-side -f crds/" in found.fix


@pytest.mark.parametrize(
    ("conditions", "said"),
    [
        (
            [
                cond("NamesAccepted", "False", "MultipleNamesNotAllowed", '"tp" is already in use'),
                cond("Established", "False", "NotAccepted", "not all names are accepted"),
            ],
            'its names are not accepted: MultipleNamesNotAllowed: "tp" is already in use',
        ),
        (
            [
                cond("NamesAccepted"),
                cond("Established", "False", "Installing", "the CRD is being installed"),
            ],
            "not Established: Installing: the CRD is being installed",
        ),
        ([cond("NamesAccepted")], "not Established: no Established condition yet"),
    ],
)
def test_a_crd_that_is_not_established_is_a_failure_with_the_servers_words(
    conditions: list[Obj], said: str
) -> None:
    crds = live_crds()
    crds["tenantpools.shoal.dev"]["status"]["conditions"] = conditions
    found = the_one(checks.check_crds(crds, expected_crds()))
    assert found.status is Status.FAIL
    assert found.message == said


def test_a_names_conflict_says_which_group_to_look_in() -> None:
    crds = live_crds()
    crds["tenantpools.shoal.dev"]["status"]["conditions"] = [
        cond("NamesAccepted", "False", "MultipleNamesNotAllowed", '"tp" is already in use')
    ]
    assert "grep shoal.dev" in the_one(checks.check_crds(crds, expected_crds())).fix


def test_a_crd_being_deleted_or_not_serving_the_version_fails() -> None:
    crds = live_crds()
    crds["batchpolicies.shoal.dev"]["metadata"]["deletionTimestamp"] = stamp(5)
    assert "being deleted" in the_one(checks.check_crds(crds, expected_crds())).message
    crds = live_crds()
    crds["batchpolicies.shoal.dev"]["spec"]["versions"][0]["served"] = False
    assert "does not serve v1alpha1" in the_one(checks.check_crds(crds, expected_crds())).message


def test_a_crd_from_another_release_is_a_warning() -> None:
    crds = live_crds()
    schema = crds["inferencemodels.shoal.dev"]["spec"]["versions"][0]["schema"]
    del schema["openAPIV3Schema"]["properties"]["spec"]["properties"]["scaling"]
    found = the_one(checks.check_crds(crds, expected_crds()))
    assert found.status is Status.WARN
    assert "helm upgrade" in found.fix


# ----------------------------------------------------------------------------- admission


def test_a_missing_binding_fails_the_admission_check() -> None:
    policy, _ = policy_and_binding()
    found = the_one(checks.check_admission(policy, None, live_crds()[checks.PARAM_CRD]))
    assert found.status is Status.FAIL
    assert found.name == f"ValidatingAdmissionPolicyBinding {ADMISSION_NAME}"
    assert "not enforced" in found.message
    assert "manifests/admission" in found.fix
    assert "admissionPolicy.enabled=true" in found.fix


def test_a_missing_policy_fails_too() -> None:
    _, binding = policy_and_binding()
    found = the_one(checks.check_admission(None, binding, live_crds()[checks.PARAM_CRD]))
    assert (found.status, found.name) == (
        Status.FAIL,
        f"ValidatingAdmissionPolicy {ADMISSION_NAME}",
    )


def test_a_binding_that_only_audits_or_binds_another_policy() -> None:
    policy, binding = policy_and_binding()
    params = live_crds()[checks.PARAM_CRD]
    binding["spec"]["validationActions"] = ["Audit"]
    found = the_one(checks.check_admission(policy, binding, params))
    assert found.status is Status.WARN
    assert "not enforced" in found.message
    binding["spec"]["policyName"] = "someone-elses"
    assert the_one(checks.check_admission(policy, binding, params)).status is Status.FAIL


def test_a_policy_older_than_its_parameter_kind_is_suspect() -> None:
    policy, binding = policy_and_binding()
    policy["metadata"]["creationTimestamp"] = stamp(7200)  # the CRD: an hour ago
    found = the_one(checks.check_admission(policy, binding, live_crds()[checks.PARAM_CRD]))
    assert found.status is Status.WARN
    assert "paramKind" in found.message
    assert found.fix.startswith("recreate it")


def test_type_checking_warnings_are_reported() -> None:
    policy, binding = policy_and_binding()
    policy["status"] = {
        "typeChecking": {
            "expressionWarnings": [
                {"fieldRef": "spec.validations[0].expression", "warning": "no such key: gpus"}
            ]
        }
    }
    found = the_one(checks.check_admission(policy, binding, live_crds()[checks.PARAM_CRD]))
    assert found.status is Status.WARN
    assert "no such key: gpus" in found.message


# ----------------------------------------------------------------------------- operator


def test_no_operator_deployment_is_a_warning() -> None:
    found = the_one(checks.check_operator([], {}, NOW))
    assert found.status is Status.WARN
    assert "helm install" in found.fix


def test_an_unavailable_operator_fails_with_the_deployments_words() -> None:
    broken = deployment(
        availableReplicas=0,
        conditions=[cond("Available", "False", "MinimumReplicasUnavailable", "no minimum")],
    )
    found = the_one(checks.check_operator([broken], {"shoal-system": lease()}, NOW))
    assert found.status is Status.FAIL
    assert found.message == "0/2 replicas available (MinimumReplicasUnavailable: no minimum)"
    assert "logs deploy/shoal-operator --previous" in found.fix
    zero = deployment()
    zero["spec"]["replicas"] = 0
    assert "scaled to zero" in checks.check_operator([zero], {}, NOW)[0].message


def test_a_lease_nobody_renews_fails_and_a_missing_one_warns() -> None:
    found = the_one(checks.check_operator([deployment()], {"shoal-system": lease(60)}, NOW))
    assert found.status is Status.FAIL
    assert found.message.startswith("shoal-operator-abc last renewed it 60s ago")
    empty = lease(holder="")
    assert the_one(checks.check_operator([deployment()], {"shoal-system": empty}, NOW)).status == (
        Status.FAIL
    )
    assert the_one(checks.check_operator([deployment()], {}, NOW)).status is Status.WARN


# ----------------------------------------------------------------------------- metrics API


def test_no_custom_metrics_api_fails_and_points_at_the_adapter() -> None:
    found = the_one(checks.check_metrics_apis([], checks.metric_groups(shoal_hpas())))
    assert (found.status, found.name) == (Status.FAIL, "custom.metrics.k8s.io")
    assert "prometheus-adapter-config.yaml" in found.fix
    # Even with no HPA yet: every model's HPA will need it.
    assert checks.metric_groups([]) == [checks.CUSTOM_METRICS]


def test_an_unavailable_api_service_fails_with_its_condition() -> None:
    found = the_one(checks.check_metrics_apis([api_service(False)], [checks.CUSTOM_METRICS]))
    assert found.status is Status.FAIL
    assert "FailedDiscoveryCheck: failing or missing response" in found.message
    assert "monitoring/prometheus-adapter" in found.fix


def test_an_external_metric_needs_the_external_metrics_api() -> None:
    hpa = shoal_hpas()[0]
    hpa["spec"]["metrics"].append(
        {"type": "External", "external": {"metric": {"name": "queue_messages"}}}
    )
    groups = checks.metric_groups([hpa])
    assert groups == ["custom.metrics.k8s.io", "external.metrics.k8s.io"]
    found = the_one(checks.check_metrics_apis([api_service()], groups))
    assert found.name == "external.metrics.k8s.io"


def test_a_metric_the_adapter_does_not_serve_names_its_hpas_and_source() -> None:
    served = checks.served_metric_names(served_resources()) - {QUEUE_METRIC}
    found = the_one(checks.check_served_metrics(served, shoal_hpas()))
    assert (found.status, found.name) == (Status.FAIL, f"metric {QUEUE_METRIC}")
    assert "team-search/search-ranker" in found.message
    assert "shoal:queue_depth:pod" in found.fix
    assert "monitoring.podMonitor.enabled=true" in found.fix


def test_the_forecast_metric_comes_from_the_operators_scrape() -> None:
    hpas = shoal_hpas()
    hpas[0]["spec"]["metrics"].append(
        {"type": "Object", "object": {"metric": {"name": REQUIRED_REPLICAS_METRIC}}}
    )
    served = checks.served_metric_names(served_resources()) - {REQUIRED_REPLICAS_METRIC}
    found = the_one(checks.check_served_metrics(served, hpas))
    assert "monitoring.serviceMonitor.enabled=true" in found.fix


def test_no_hpa_needs_no_metric() -> None:
    assert not_ok(checks.check_served_metrics(set(), [])) == []


# ----------------------------------------------------------------------------- HPAs


def test_an_hpa_that_cannot_read_its_metric_is_listed_with_its_own_message() -> None:
    message = (
        "unable to get metric shoal_queue_depth: unable to fetch metrics from custom metrics API: "
        "the server could not find the metric shoal_queue_depth for pods"
    )
    status = {
        "conditions": [
            cond("AbleToScale", reason="SucceededGetScale"),
            cond("ScalingActive", "False", "FailedGetPodsMetric", message),
        ]
    }
    findings = checks.check_autoscalers(shoal_hpas({"search-ranker": status}))
    found = the_one(findings)
    assert (found.status, found.name) == (Status.FAIL, "HPA team-search/search-ranker")
    assert found.message == f"ScalingActive=False FailedGetPodsMetric: {message}"
    assert "kubectl -n team-search describe hpa search-ranker" in found.fix
    assert (
        only(findings, Status.OK)[0].message
        == "2 of 3 HPAs read their metrics (ScalingActive=True)"
    )


def test_an_hpa_without_its_deployment_or_not_yet_evaluated() -> None:
    gone = {
        "conditions": [cond("AbleToScale", "False", "FailedGetScale", "deployments/x not found")]
    }
    found = the_one(checks.check_autoscalers(shoal_hpas({"search-ranker": gone})))
    assert found.message == "AbleToScale=False FailedGetScale: deployments/x not found"
    fresh = the_one(checks.check_autoscalers(shoal_hpas({"search-ranker": {}})))
    assert fresh.status is Status.WARN
    zero = {"conditions": [cond("ScalingActive", "False", "ScalingDisabled", "replicas 0")]}
    assert the_one(checks.check_autoscalers(shoal_hpas({"search-ranker": zero}))).status is (
        Status.WARN
    )


def predictive_hpas(scale_down: Obj | None = None) -> list[Obj]:
    """The examples' HPAs with search-ranker scaled on the forecast too."""
    documents = example_documents()
    model = next(
        d
        for d in documents
        if d["kind"] == "InferenceModel" and d["metadata"]["name"] == "search-ranker"
    )
    scaling = model["spec"].setdefault("scaling", {})
    scaling["predictive"] = {"enabled": True}
    if scale_down is not None:
        scaling["scaleDown"] = scale_down
    return shoal_hpas(documents=documents)


def test_a_predictive_model_on_a_long_cool_down_is_a_warning_naming_the_fix() -> None:
    # The example sets a 10-minute cool-down.
    findings = checks.check_autoscalers(predictive_hpas())
    found = the_one(findings)
    assert (found.status, found.name) == (Status.WARN, "HPA team-search/search-ranker")
    assert f"({REQUIRED_REPLICAS_METRIC}) with a 600s scale-down window" in found.message
    assert found.fix.startswith(
        f"set spec.scaling.scaleDown.stabilizationWindow: {PREDICTIVE_COOL_DOWN} on "
        "InferenceModel team-search/search-ranker"
    )
    # The HPA's own health is still counted as before.
    assert "3 of 3 HPAs" in only(findings, Status.OK)[0].message


def test_a_predictive_model_with_the_short_cool_down_and_a_reactive_one_pass() -> None:
    short = predictive_hpas({"stabilizationWindow": PREDICTIVE_COOL_DOWN})
    assert not_ok(checks.check_autoscalers(short)) == []
    # The same long windows on reactive models are no finding: they hold no forecast.
    reactive = shoal_hpas()
    assert sorted(
        h["spec"]["behavior"]["scaleDown"]["stabilizationWindowSeconds"] for h in reactive
    ) == [300, 300, 600]
    assert not_ok(checks.check_autoscalers(reactive)) == []
    # Without a behavior the controller's own 5 minutes apply.
    bare = predictive_hpas()
    for hpa in bare:
        hpa["spec"].pop("behavior")
    assert "with a 300s scale-down window" in the_one(checks.check_autoscalers(bare)).message


# ----------------------------------------------------------------------------- Prometheus


def test_a_prometheus_without_shoals_rules_fails_on_the_recording_rules() -> None:
    findings = checks.check_prometheus_rules([{"name": "node.rules", "rules": []}])
    by_name = {f.name: f for f in findings}
    for group in recording_rules()["groups"]:
        found = by_name[f"rule group {group['name']}"]
        assert found.status is Status.FAIL
        assert "monitoring.prometheusRule.enabled=true" in found.fix
        assert "prometheus-rules.yaml" in found.fix
    alerts = by_name["rule group shoal.alerts"]
    assert alerts.status is Status.WARN
    assert "monitoring.prometheusRule.alerts=true" in alerts.fix


def test_rules_under_another_group_name_still_count() -> None:
    """A PrometheusRule's groups reach Prometheus from another file; the rule names
    are what is compared."""
    merged = [{"name": "anything", "rules": [r for g in loaded_groups() for r in g["rules"]]}]
    assert not_ok(checks.check_prometheus_rules(merged)) == []


def test_missing_alerts_only_warn_and_failing_rules_fail() -> None:
    findings = checks.check_prometheus_rules(loaded_groups(alerts=False))
    assert the_one(findings).name == "rule group shoal.alerts"
    groups = loaded_groups()
    groups[0]["rules"][0].update(health="err", lastError="many-to-many matching not allowed")
    found = the_one(checks.check_prometheus_rules(groups))
    assert found.status is Status.FAIL
    assert "many-to-many" in found.message


def test_targets_down_are_listed_with_the_scrape_error() -> None:
    targets = [*scraped(), target("shoal-triton", "down")]
    found = the_one(checks.check_prometheus_targets(targets, models_expected=True))
    assert (found.status, found.name) == (Status.FAIL, "scrape job shoal-triton")
    assert found.message.startswith("1 of 2 targets down")
    assert "connection refused" in found.message
    assert "monitoringNamespaces" in found.fix


def test_prometheus_operator_scrape_pools_are_recognised() -> None:
    pools = {
        "shoal-triton": "podMonitor/shoal-system/shoal-triton/0",
        "shoal-gateway": "podMonitor/shoal-system/shoal-gateway/0",
        "shoal-operator": "serviceMonitor/shoal-system/shoal-operator/0",
    }
    targets = [target(f"x-{job}", pool=pool) for job, pool in pools.items()]
    assert not_ok(checks.check_prometheus_targets(targets, models_expected=True)) == []


def test_unscraped_models_fail_and_an_unscraped_operator_warns() -> None:
    findings = checks.check_prometheus_targets([], models_expected=True)
    assert [(f.name, f.status) for f in not_ok(findings)] == [
        ("scrape job shoal-triton", Status.FAIL),
        ("scrape job shoal-operator", Status.WARN),
    ]
    # Without models, nothing needs scraping but the operator.
    assert [f.name for f in not_ok(checks.check_prometheus_targets([], False))] == [
        "scrape job shoal-operator"
    ]


# ----------------------------------------------------------------------------- the run


class FakeKube:
    """The two reads the probe makes, answered from dictionaries as the API server
    would (404 for what is absent; ``refuse``: paths answered 403)."""

    def __init__(self, objects: dict[str, Obj], lists: dict[str, list[Obj]]) -> None:
        self.objects, self.lists = objects, lists
        self.refuse: set[str] = set()
        self.down = False

    def get_path(self, path: str, accept: str = "application/json") -> Obj:
        if self.down:
            raise ApiException(status=0, reason="API server unreachable: refused")
        if path in self.refuse:
            raise ApiException(status=403, reason="Forbidden")
        if path not in self.objects:
            raise ApiException(status=404, reason="Not Found")
        return self.objects[path]

    def list(
        self, api_version: str, kind: str, namespace: str | None = None, labels: str = ""
    ) -> list[Obj]:
        return self.lists.get(f"{kind}/{namespace}", [])


def gpu_node(name: str, gpus: int, product: str | None = None) -> Obj:
    labels = {"nvidia.com/gpu.product": product} if product else {}
    return {
        "metadata": {"name": name, "labels": labels},
        "status": {"allocatable": {"cpu": "64", "nvidia.com/gpu": str(gpus)}},
    }


def cpu_node(name: str) -> Obj:
    return {"metadata": {"name": name, "labels": {}}, "status": {"allocatable": {"cpu": "8"}}}


def pool(name: str, product: str | None = None, capacity: bool = False) -> Obj:
    spec: Obj = {"placement": {"gpuProduct": product} if product else {}}
    if capacity:
        spec["capacity"] = {"gpus": 4}
    return {"metadata": {"name": name}, "spec": spec}


def model(namespace: str, name: str, gpus: int | None = None) -> Obj:
    runtime = {} if gpus is None else {"gpus": gpus}
    return {"metadata": {"namespace": namespace, "name": name}, "spec": {"runtime": runtime}}


def healthy_cluster() -> FakeKube:
    crds = live_crds()
    policy, binding = policy_and_binding()
    apis = "/apis/admissionregistration.k8s.io/v1"
    objects = {
        f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{n}": c for n, c in crds.items()
    }
    objects |= {
        f"{apis}/validatingadmissionpolicies/{ADMISSION_NAME}": policy,
        f"{apis}/validatingadmissionpolicybindings/{ADMISSION_NAME}": binding,
        f"/apis/coordination.k8s.io/v1/namespaces/shoal-system/leases/{LEASE_NAME}": lease(),
        "/apis/apiregistration.k8s.io/v1/apiservices": {"items": [api_service()]},
        "/apis/custom.metrics.k8s.io/v1beta2": {"resources": served_resources()},
        "/api/v1/nodes": {
            "items": [gpu_node("gpu-0", 8, "NVIDIA-H100-80GB-HBM3"), cpu_node("cpu-0")]
        },
    }
    lists = {
        "TenantPool/None": [pool("critical", "NVIDIA-H100-80GB-HBM3")],
        "InferenceModel/None": [model("team-search", "ranker", gpus=1)],
        "Deployment/None": [deployment()],
        "HorizontalPodAutoscaler/None": shoal_hpas(),
        "HorizontalPodAutoscaler/team-search": shoal_hpas()[:1],
    }
    return FakeKube(objects, lists)


def run(fake: FakeKube, options: Options | None = None) -> list[Finding]:
    return diagnose(Cluster(fake), None, options or Options(), now=lambda: NOW)  # type: ignore[arg-type]


def test_diagnose_runs_every_check_and_skips_what_it_is_told() -> None:
    findings = run(healthy_cluster())
    assert [f.status for f in not_ok(findings)] == [Status.SKIP]  # no Prometheus URL
    assert [f.check for f in findings].count(CRDS) == 3
    skipped = run(healthy_cluster(), Options(skip=frozenset({CRDS, PROMETHEUS})))
    assert CRDS not in {f.check for f in skipped}
    assert not_ok(skipped) == []


def test_diagnose_looks_only_at_the_namespaces_given() -> None:
    findings = run(healthy_cluster(), Options(namespaces=("team-search",)))
    hpas = next(f for f in findings if f.check == AUTOSCALERS)
    assert hpas.message == "1 of 1 HPAs read their metrics (ScalingActive=True)"


def test_a_deleted_binding_on_the_cluster_fails_the_run() -> None:
    fake = healthy_cluster()
    del fake.objects[
        f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/{ADMISSION_NAME}"
    ]
    findings = run(fake)
    assert failed(findings)
    assert [f.name for f in only(findings, Status.FAIL)] == [
        f"ValidatingAdmissionPolicyBinding {ADMISSION_NAME}"
    ]


def test_a_read_that_is_refused_is_reported_and_the_rest_still_run() -> None:
    fake = healthy_cluster()
    fake.refuse.add("/apis/apiregistration.k8s.io/v1/apiservices")
    findings = run(fake)
    refused = next(f for f in findings if f.check == METRICS_API)
    assert refused.status is Status.SKIP
    assert "403" in refused.message
    assert any(f.check == AUTOSCALERS for f in findings)


def test_an_unreachable_api_server_is_one_failure() -> None:
    fake = healthy_cluster()
    fake.down = True
    findings = run(fake)
    assert [(f.name, f.status) for f in findings] == [("API server", Status.FAIL)]
    assert "kubeconfig" in findings[0].fix


def test_the_report_shows_each_fix_and_json_carries_the_same() -> None:
    fake = healthy_cluster()
    fake.objects.pop("/apis/apiregistration.k8s.io/v1/apiservices")
    findings = run(fake)
    text = report.table(findings, width=100)
    assert "FAIL  custom.metrics.k8s.io: no APIService serves it" in text
    assert "      fix: install prometheus-adapter" in text
    assert text.rstrip().endswith("shoal doctor: problems found (11 ok, 1 fail, 1 skip)")
    data = json.loads(report.as_json(findings))
    assert data["ok"] is False
    assert {"check", "name", "status", "message", "fix"} == set(data["findings"][0])
    assert [f["name"] for f in data["findings"] if f["status"] == "fail"] == [
        "custom.metrics.k8s.io"
    ]


def test_the_command_explains_missing_credentials(
    capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    assert main(["doctor", "--kubeconfig", str(tmp_path / "absent")]) == 1
    assert capsys.readouterr().err.startswith("shoal doctor: ")


def test_no_gpu_node_fails_while_models_ask_for_gpus_and_names_the_device_plugin() -> None:
    found = checks.check_gpu_nodes(
        [cpu_node("cpu-0")], [model("a", "m"), model("b", "cpu-only", gpus=0)], []
    )
    assert [(f.status, f.name) for f in found] == [(Status.FAIL, "nvidia.com/gpu on nodes")]
    assert "1 models ask for GPUs and stay Pending (a/m)" in found[0].message
    assert "device plugin" in found[0].fix
    # No model asks for one (yet): a warning, not a failure.
    quiet = checks.check_gpu_nodes([cpu_node("cpu-0")], [model("b", "cpu", gpus=0)], [])
    assert [f.status for f in quiet] == [Status.WARN]
    ok = checks.check_gpu_nodes([gpu_node("g", 8), gpu_node("h", 4)], [model("a", "m")], [])
    assert [(f.status, f.message) for f in ok] == [(Status.OK, "2 nodes advertise 12 GPUs")]


def test_a_gpu_product_no_node_is_labelled_with_fails_naming_its_pools() -> None:
    nodes = [gpu_node("g", 8, "NVIDIA-A100-SXM4-80GB"), gpu_node("h", 8)]
    pools = [pool("fast", "NVIDIA-H100-80GB-HBM3"), pool("slow", "NVIDIA-A100-SXM4-80GB")]
    found = checks.check_gpu_nodes(nodes, [], pools)
    by_name = {f.name: f for f in found}
    missing = by_name["nvidia.com/gpu.product=NVIDIA-H100-80GB-HBM3"]
    assert missing.status is Status.FAIL
    assert "pools fast place their models on it" in missing.message
    assert "products labelled: NVIDIA-A100-SXM4-80GB" in missing.message
    assert "GPU Feature Discovery" in missing.fix
    assert by_name["nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB"].status is Status.OK
    # A label on a node without GPUs does not count.
    unlabelled = checks.check_gpu_nodes(
        [gpu_node("cpu-labelled", 0, "NVIDIA-H100-80GB-HBM3")],
        [],
        [pool("fast", "NVIDIA-H100-80GB-HBM3")],
    )
    assert [f.status for f in unlabelled] == [Status.WARN, Status.FAIL]


def test_elastic_pools_without_kueue_warn_that_they_keep_their_hard_quota() -> None:
    pools = [pool("a", capacity=True), pool("b")]
    [without] = checks.check_kueue(pools, kueue_served=False)
    assert without.status is Status.WARN
    assert "pools a ask for elastic capacity" in without.message
    assert "HardQuota" in without.message
    assert "Kueue" in without.fix
    assert [f.status for f in checks.check_kueue(pools, kueue_served=True)] == [Status.OK]
    assert [f.status for f in checks.check_kueue([pool("b")], kueue_served=False)] == [Status.OK]


def test_the_cluster_checks_read_nodes_pools_models_and_kueues_api() -> None:
    fake = healthy_cluster()
    fake.objects["/api/v1/nodes"] = {"items": [cpu_node("cpu-0")]}
    fake.lists["TenantPool/None"] = [pool("elastic", capacity=True)]
    findings = run(fake)
    assert {(f.check, f.status) for f in findings if f.check in (GPUS, CAPACITY)} == {
        (GPUS, Status.FAIL),
        (CAPACITY, Status.WARN),
    }
    fake.objects["/apis/kueue.x-k8s.io/v1beta2"] = {"resources": []}
    capacity = [f for f in run(fake) if f.check == CAPACITY]
    assert [f.status for f in capacity] == [Status.OK]
