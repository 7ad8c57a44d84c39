"""The Helm chart: lint, schema, server-side validation, install, upgrade, uninstall
(Helm built from its Go module, against the real API server)."""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from e2e import chart_readme
from shoal.api.constants import KEPT_ON_UNINSTALL
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.doctor.checks import OPERATOR_SELECTOR
from shoal.render.gateway import (
    DEFAULT_GATEWAY_NAMESPACE,
    GATEWAY_SERVICE_ACCOUNT,
    gateway_labels,
)
from shoal.render.workload import deployment
from shoal.settings import Settings
from tests.support.resources import example
from tests.support.wait import wait_for

CHART = Path(__file__).resolve().parents[2] / "charts" / "shoal"
ADMISSION = CHART.parent.parent / "manifests" / "admission"
RELEASE, NAMESPACE = "shoal-it", "shoal-helm"
GATEWAYS = "shoal-helm-gateways"
ENTERPRISE = CHART.parents[1] / "tests" / "support" / "enterprise-values.yaml"


@pytest.fixture(scope="module")
def without_kustomized_admission(kubectl: Callable[..., str], crds: list[str]) -> Iterator[None]:
    """The chart owns the admission policy while it is installed; the kustomize copy
    steps aside and comes back afterwards."""
    kubectl("delete", "--ignore-not-found", "-k", str(ADMISSION))
    yield
    kubectl("apply", "--server-side", "--force-conflicts", "-k", str(ADMISSION))


def test_lint_and_schema(helm: Callable[..., subprocess.CompletedProcess[str]]) -> None:
    for values in ((), ("--values", str(ENTERPRISE))):
        lint = helm("lint", str(CHART), *values)
        assert lint.returncode == 0, lint.stdout + lint.stderr
    bad = helm("template", RELEASE, str(CHART), "--set", "resyncSeconds=0")
    assert bad.returncode != 0
    assert "resyncSeconds" in bad.stderr
    unknown = helm("template", RELEASE, str(CHART), "--set", "replicaCount=2")
    assert unknown.returncode != 0, "values.schema.json must refuse unknown values"


def test_extra_env_may_not_repeat_a_variable_the_chart_sets(
    helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """A second entry of the same name is refused by server-side apply ("duplicate
    entries for key") and silently dropped by a later Helm upgrade: the schema refuses
    it at install, for every variable the Deployment template sets."""
    template = (CHART / "templates" / "deployment.yaml").read_text()
    chart_sets = set(re.findall(r"- name: ((?:SHOAL|POD)_[A-Z_]+)", template))
    schema = json.loads((CHART / "values.schema.json").read_text())
    refused = set(schema["properties"]["extraEnv"]["items"]["properties"]["name"]["not"]["enum"])
    assert chart_sets == refused
    repeated = helm(
        "template", RELEASE, str(CHART),
        "--set", "extraEnv[0].name=SHOAL_LOG_FORMAT", "--set", "extraEnv[0].value=json",
    )  # fmt: skip
    assert repeated.returncode != 0
    assert "extraEnv" in repeated.stderr, repeated.stderr
    own = helm(
        "template", RELEASE, str(CHART),
        "--set", "extraEnv[0].name=HTTPS_PROXY", "--set", "extraEnv[0].value=http://proxy:3128",
    )  # fmt: skip
    assert own.returncode == 0, own.stderr


def test_rendered_templates_pass_the_api_servers_validation(
    helm: Callable[..., subprocess.CompletedProcess[str]],
    kubectl: Callable[..., str],
    crds: list[str],
    tmp_path: Path,
) -> None:
    out = helm("template", RELEASE, str(CHART), "--namespace", "default")
    assert out.returncode == 0, out.stderr
    manifest = tmp_path / "chart.yaml"
    manifest.write_text(out.stdout)
    # A dry run creates nothing: the chart's objects in the gateway namespace need it.
    kubectl("create", "namespace", DEFAULT_GATEWAY_NAMESPACE, check=False)
    result = kubectl(
        "apply",
        "--dry-run=server",
        "--server-side",
        "--validate=strict",
        f"--filename={manifest}",
    )
    for kind in ("serviceaccount", "clusterrole", "deployment", "validatingadmissionpolicy"):
        assert kind in result, result


def test_pod_monitors_select_the_pods_the_operator_renders(
    helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """The PodMonitors' selectors and relabellings name the labels Shoal puts on a
    model's pods and a gateway's pods, and nothing else: each scrape gets its own; the
    operator's own is scraped with its labels kept."""
    out = helm(
        "template",
        RELEASE,
        str(CHART),
        "--set",
        "monitoring.podMonitor.enabled=true",
        "--show-only",
        "templates/pod-monitor.yaml",
    )
    assert out.returncode == 0, out.stderr
    monitors = {m["metadata"]["name"]: m["spec"] for m in yaml.safe_load_all(out.stdout)}
    triton, gateway = monitors[f"{RELEASE}-triton"], monitors[f"{RELEASE}-gateway"]
    model = InferenceModel.model_validate(example("InferenceModel", "search-ranker"))
    pool = TenantPool.model_validate(example("TenantPool", "critical"))
    rendered = deployment(model, pool.spec, "")
    model_pod = rendered["spec"]["template"]["metadata"]["labels"]
    gateway_pod = gateway_labels("shared")

    def selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
        exists = all(e["key"] in labels for e in selector.get("matchExpressions", []))
        return exists and all(labels.get(k) == v for k, v in selector["matchLabels"].items())

    assert selects(triton["selector"], model_pod)
    assert not selects(triton["selector"], gateway_pod)
    assert selects(gateway["selector"], gateway_pod)
    assert not selects(gateway["selector"], model_pod)
    assert gateway["namespaceSelector"] == {"matchNames": [DEFAULT_GATEWAY_NAMESPACE]}
    assert gateway["podMetricsEndpoints"][0]["relabelings"][0]["targetLabel"] == "pool"
    assert set(monitors) == {f"{RELEASE}-triton", f"{RELEASE}-gateway"}


def test_the_operator_is_scraped_through_its_metrics_service(
    helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """Every operator replica behind one metrics Service; the ServiceMonitor keeps the
    labels the operator's own series carry (required replicas per model) and carries
    the label a Prometheus selects monitors by."""
    out = helm(
        "template",
        RELEASE,
        str(CHART),
        "--set",
        "monitoring.serviceMonitor.enabled=true",
        "--set",
        "monitoring.additionalLabels.release=kps",
        "--show-only",
        "templates/metrics-service.yaml",
        "--show-only",
        "templates/deployment.yaml",
    )
    assert out.returncode == 0, out.stderr
    docs = {d["kind"]: d for d in yaml.safe_load_all(out.stdout) if d}
    service, monitor, operator = docs["Service"], docs["ServiceMonitor"], docs["Deployment"]
    pod_labels = operator["spec"]["template"]["metadata"]["labels"]
    ports = {
        p["name"] for c in operator["spec"]["template"]["spec"]["containers"] for p in c["ports"]
    }
    assert all(pod_labels.get(k) == v for k, v in service["spec"]["selector"].items())
    assert service["spec"]["ports"][0]["targetPort"] in ports
    assert (
        monitor["spec"]["selector"]["matchLabels"].items() <= service["metadata"]["labels"].items()
    )
    assert monitor["spec"]["endpoints"] == [{"port": "metrics", "honorLabels": True}]
    assert monitor["metadata"]["labels"]["release"] == "kps"


RBAC_KINDS = {"ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"}
# What the chart names without the fullname: the gateways' namespace and their agent's
# identity (the operator's gateway pods name it), and the admission policy.
FIXED_NAMES = {"Namespace", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}


def _render(
    helm: Callable[..., subprocess.CompletedProcess[str]], *args: str
) -> list[dict[str, Any]]:
    out = helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args)
    assert out.returncode == 0, out.stderr
    return [d for d in yaml.safe_load_all(out.stdout) if d]


def _one(docs: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    [doc] = [d for d in docs if d["kind"] == kind]
    return doc


def _is_agent_identity(doc: dict[str, Any]) -> bool:
    return doc["kind"] in {"ServiceAccount", "Role", "RoleBinding"} and (
        doc["metadata"]["name"] == GATEWAY_SERVICE_ACCOUNT
    )


def _operator_subjects(docs: list[dict[str, Any]]) -> list[tuple[str, str]]:
    """(name, namespace) of each subject bound to the operator's rights: every binding's
    but the gateways' agent's."""
    return sorted(
        (subject["name"], subject["namespace"])
        for d in docs
        if d["kind"] in {"ClusterRoleBinding", "RoleBinding"} and not _is_agent_identity(d)
        for subject in d["subjects"]
    )


def _named_from_the_fullname(docs: list[dict[str, Any]], account: str = "") -> set[str]:
    """The fullnames the release's objects are named from (a name less its -metrics,
    -leader-election... suffix), leaving out the names the chart fixes and the
    ServiceAccount named ``account``."""
    suffix = r"-(metrics|leader-election|dashboard|operator|triton|gateway)$"
    return {
        re.sub(suffix, "", d["metadata"]["name"])
        for d in docs
        if d["kind"] not in FIXED_NAMES
        and not _is_agent_identity(d)
        and not (d["kind"] == "ServiceAccount" and d["metadata"]["name"] == account)
    }


def _selects(match_labels: dict[str, str], labels: dict[str, str]) -> bool:
    return bool(match_labels) and match_labels.items() <= labels.items()


def _merged(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """Values as Helm merges a values file over values.yaml."""
    out = dict(base)
    for key, value in over.items():
        both = isinstance(value, dict) and isinstance(base.get(key), dict)
        out[key] = _merged(base[key], value) if both else value
    return out


def _network_policy(
    docs: list[dict[str, Any]], pod_template: dict[str, Any], values: dict[str, Any]
) -> dict[str, Any]:
    """The operator's NetworkPolicy, checked against the values it was rendered with
    (over values.yaml's): it selects the operator's pods; lets in their health and
    metrics ports (every port the container names, nothing else) from
    networkPolicy.metricsFrom; lets out the API server's ports (to apiServer.cidrs),
    DNS where prometheusUrl is set, then networkPolicy.extraEgress."""
    settings = _merged(yaml.safe_load((CHART / "values.yaml").read_text()), values)
    wanted = settings["networkPolicy"]
    policy = _one(docs, "NetworkPolicy")
    spec = policy["spec"]
    assert _selects(spec["podSelector"]["matchLabels"], pod_template["metadata"]["labels"])
    assert spec["policyTypes"] == ["Ingress", "Egress"]
    [ingress] = spec["ingress"]
    container = pod_template["spec"]["containers"][0]
    assert sorted(p["port"] for p in ingress["ports"]) == sorted(
        p["name"] for p in container["ports"]
    )
    assert {p["protocol"] for p in ingress["ports"]} == {"TCP"}
    assert ingress.get("from", []) == wanted["metricsFrom"]
    api, *egress = spec["egress"]
    assert api["ports"] == [{"protocol": "TCP", "port": p} for p in wanted["apiServer"]["ports"]]
    assert api.get("to", []) == [{"ipBlock": {"cidr": c}} for c in wanted["apiServer"]["cidrs"]]
    if settings["prometheusUrl"]:
        dns, *egress = egress
        assert dns.get("to", []) == wanted["dns"]["to"]
        assert sorted((p["protocol"], p["port"]) for p in dns["ports"]) == sorted(
            (protocol, port) for port in wanted["dns"]["ports"] for protocol in ("TCP", "UDP")
        )
    assert egress == wanted["extraEgress"]
    return policy


def test_an_admins_service_account_is_the_one_bound_and_run_as(
    helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """serviceAccount.create=false: the chart creates no ServiceAccount of the
    operator's, and the Deployment and every binding of the operator's rights (the
    gateways' namespace's among them) name serviceAccount.name; created, the account
    bears that name; unnamed, the fullname."""
    name = "platform-shoal-operator"
    supplied = _render(
        helm,
        *("--set", "serviceAccount.create=false", "--set", f"serviceAccount.name={name}"),
        *("--set", "serviceAccount.annotations.a=b"),
    )
    accounts = [d for d in supplied if d["kind"] == "ServiceAccount"]
    assert [(a["metadata"]["name"], a["metadata"]["namespace"]) for a in accounts] == [
        (GATEWAY_SERVICE_ACCOUNT, DEFAULT_GATEWAY_NAMESPACE)
    ]
    pod = _one(supplied, "Deployment")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == name
    # The ClusterRoleBinding, leader election's and the gateways' namespace's.
    assert _operator_subjects(supplied) == [(name, NAMESPACE)] * 3

    created = _render(helm, "--set", f"serviceAccount.name={name}")
    account = next(
        d for d in created if d["kind"] == "ServiceAccount" and d["metadata"]["name"] == name
    )
    assert account["metadata"]["namespace"] == NAMESPACE
    assert _operator_subjects(created) == [(name, NAMESPACE)] * 3
    default = _render(helm)
    assert _one(default, "Deployment")["spec"]["template"]["spec"]["serviceAccountName"] == RELEASE
    assert _operator_subjects(default) == [(RELEASE, NAMESPACE)] * 3
    assert RELEASE in {d["metadata"]["name"] for d in default if d["kind"] == "ServiceAccount"}


def test_without_rbac_the_chart_renders_only_the_gateways_identity(
    helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """rbac.create=false: no ClusterRole, Role or binding of the operator's; the
    gateways' agent keeps its ServiceAccount, Role and RoleBinding (their pods run as
    it), still kept on uninstall; nothing else changes."""
    default = _render(helm)
    without = _render(helm, "--set", "rbac.create=false")
    rbac = [d for d in without if d["kind"] in RBAC_KINDS]
    assert {(d["kind"], d["metadata"]["name"]) for d in rbac} == {
        ("Role", GATEWAY_SERVICE_ACCOUNT),
        ("RoleBinding", GATEWAY_SERVICE_ACCOUNT),
    }
    for doc in rbac:
        assert doc["metadata"]["namespace"] == DEFAULT_GATEWAY_NAMESPACE
        assert KEPT_ON_UNINSTALL.items() <= doc["metadata"]["annotations"].items()
    assert _operator_subjects(without) == []
    dropped = [d for d in default if d not in without]
    assert sorted(d["kind"] for d in dropped) == sorted(
        ["ClusterRole", "ClusterRoleBinding"] + ["Role", "RoleBinding"] * 2
    )
    assert [d for d in without if d not in default] == []


def test_names_follow_the_overrides_and_selectors_the_pods(
    helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """nameOverride renames the objects (<release>-<name>) and the selector labels'
    app.kubernetes.io/name; fullnameOverride names every object of the release's own.
    Each selector of the operator's pods (its Deployment's, PodDisruptionBudget's,
    metrics Service's, NetworkPolicy's) matches the pods' labels, and the
    ServiceMonitor still selects the metrics Service; `shoal doctor` still finds the
    operator's Deployment."""
    everything = (
        *("--set", "monitoring.serviceMonitor.enabled=true"),
        *("--set", "monitoring.podMonitor.enabled=true"),
        *("--set", "monitoring.prometheusRule.enabled=true"),
        *("--set", "networkPolicy.enabled=true"),
    )
    for overrides, fullname, name in (
        ((), RELEASE, "shoal"),
        (("--set", "nameOverride=fish"), f"{RELEASE}-fish", "fish"),
        (
            ("--set", "nameOverride=fish", "--set", "fullnameOverride=platform-shoal"),
            "platform-shoal",
            "fish",
        ),
    ):
        docs = _render(helm, *everything, *overrides)
        assert _named_from_the_fullname(docs) == {fullname}, overrides
        operator = _one(docs, "Deployment")
        assert operator["metadata"]["name"] == fullname
        pods = operator["spec"]["template"]["metadata"]["labels"]
        assert pods["app.kubernetes.io/name"] == name
        selectors = {
            "Deployment": operator["spec"]["selector"]["matchLabels"],
            "PodDisruptionBudget": _one(docs, "PodDisruptionBudget")["spec"]["selector"][
                "matchLabels"
            ],
            "Service": _one(docs, "Service")["spec"]["selector"],
            "NetworkPolicy": _one(docs, "NetworkPolicy")["spec"]["podSelector"]["matchLabels"],
        }
        for kind, selector in selectors.items():
            assert _selects(selector, pods), (overrides, kind)
        # `shoal doctor` finds the operator whatever the name.
        doctor = dict(pair.split("=") for pair in OPERATOR_SELECTOR.split(","))
        assert _selects(doctor, operator["metadata"]["labels"]), overrides
        service = _one(docs, "Service")
        assert service["metadata"]["name"] == f"{fullname}-metrics"
        monitor = _one(docs, "ServiceMonitor")["spec"]
        assert _selects(monitor["selector"]["matchLabels"], service["metadata"]["labels"])
        assert monitor["endpoints"][0]["port"] in {p["name"] for p in service["spec"]["ports"]}
    # A Service's name is a DNS label: its suffix fits within 63 characters.
    longest = _render(helm, "--set", "fullnameOverride=" + "s" * 63)
    assert _one(longest, "Service")["metadata"]["name"] == "s" * 55 + "-metrics"
    assert _one(longest, "Deployment")["metadata"]["name"] == "s" * 63
    for bad in ("nameOverride=Fish", "fullnameOverride=" + "s" * 64):
        refused = helm("template", RELEASE, str(CHART), "--set", bad)
        assert refused.returncode != 0, f"values.schema.json must refuse {bad}"


def test_pod_labels_reach_the_pods_and_stay_out_of_the_selectors(
    helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """podLabels label the operator's pods, never a selector (a Deployment's cannot
    change); the selector's own keys are refused. A topology spread constraint without
    a labelSelector counts the operator's pods; one with its own keeps it."""
    docs = _render(
        helm,
        *("--set-string", "podLabels.team=ml-platform", "--set-string", "podLabels.tier=1"),
        *("--set", "topologySpreadConstraints[0].maxSkew=1"),
        *("--set", "topologySpreadConstraints[0].topologyKey=topology.kubernetes.io/zone"),
        *("--set", "topologySpreadConstraints[0].whenUnsatisfiable=ScheduleAnyway"),
        *("--set", "topologySpreadConstraints[1].maxSkew=2"),
        *("--set", "topologySpreadConstraints[1].topologyKey=kubernetes.io/hostname"),
        *("--set", "topologySpreadConstraints[1].whenUnsatisfiable=DoNotSchedule"),
        *("--set", "topologySpreadConstraints[1].labelSelector.matchLabels.team=ml-platform"),
    )
    operator = _one(docs, "Deployment")
    selector = operator["spec"]["selector"]["matchLabels"]
    template = operator["spec"]["template"]
    assert template["metadata"]["labels"] == selector | {"team": "ml-platform", "tier": "1"}
    for doc in docs:
        assert "team" not in json.dumps(doc.get("spec", {}).get("selector", {})), doc["kind"]
    assert "team" not in operator["metadata"]["labels"]
    assert template["spec"]["topologySpreadConstraints"] == [
        {
            "maxSkew": 1,
            "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": selector},
        },
        {
            "maxSkew": 2,
            "topologyKey": "kubernetes.io/hostname",
            "whenUnsatisfiable": "DoNotSchedule",
            "labelSelector": {"matchLabels": {"team": "ml-platform"}},
        },
    ]
    assert (
        "topologySpreadConstraints"
        not in _one(_render(helm), "Deployment")["spec"]["template"]["spec"]
    )
    for key in selector:
        escaped = key.replace(".", "\\.")
        refused = helm("template", RELEASE, str(CHART), "--set", f"podLabels.{escaped}=x")
        assert refused.returncode != 0, f"values.schema.json must refuse podLabels.{key}"


def test_the_network_policy_admits_scrapes_and_lets_out_the_api_server(
    helm: Callable[..., subprocess.CompletedProcess[str]],
    tmp_path: Path,
) -> None:
    """networkPolicy.enabled: one NetworkPolicy selecting the operator's pods. Its
    defaults: the health and metrics ports from anywhere, and out only to the API
    server's ports (any address) with no DNS, which it reaches the API server without;
    with prometheusUrl, DNS to kube-dns too. The values name the scrapers, the API
    server's addresses and more egress. Off by default."""
    assert not [d for d in _render(helm) if d["kind"] == "NetworkPolicy"]

    defaults = {"networkPolicy": {"enabled": True}}
    docs = _render(helm, "--set", "networkPolicy.enabled=true")
    template = _one(docs, "Deployment")["spec"]["template"]
    policy = _network_policy(docs, template, defaults)["spec"]
    assert "from" not in policy["ingress"][0]
    assert policy["egress"] == [
        {"ports": [{"protocol": "TCP", "port": 443}, {"protocol": "TCP", "port": 6443}]}
    ]

    named: dict[str, Any] = {
        "prometheusUrl": "http://prometheus.monitoring.svc:9090",
        "networkPolicy": {
            "enabled": True,
            "metricsFrom": [
                {
                    "namespaceSelector": {
                        "matchLabels": {"kubernetes.io/metadata.name": "monitoring"}
                    },
                    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
                }
            ],
            "apiServer": {"cidrs": ["172.18.0.2/32", "fd00::2/128"], "ports": [6443]},
            "extraEgress": [
                {
                    "to": [{"ipBlock": {"cidr": "10.96.0.0/12"}}],
                    "ports": [{"protocol": "TCP", "port": 9090}],
                }
            ],
        },
    }
    values = tmp_path / "values.yaml"
    values.write_text(yaml.safe_dump(named))
    docs = _render(helm, "--values", str(values))
    template = _one(docs, "Deployment")["spec"]["template"]
    policy = _network_policy(docs, template, named)["spec"]
    dns = policy["egress"][1]
    assert dns["to"] == [
        {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
        }
    ]
    assert {p["port"] for p in dns["ports"]} == {53}
    for bad in (
        "networkPolicy.apiServer.ports[0]=70000",
        "networkPolicy.apiServer.cidrs[0]=kubernetes.default",
        "networkPolicy.metricsFrom[0].namespace=monitoring",
        "networkPolicy.extraEgress[0].ports[0].protocol=HTTP",
        "networkPolicy.enabled=yes",
    ):
        refused = helm("template", RELEASE, str(CHART), "--set", bad)
        assert refused.returncode != 0, f"values.schema.json must refuse {bad}"


def test_install_upgrade_uninstall(
    helm: Callable[..., subprocess.CompletedProcess[str]],
    api: client.ApiClient,
    without_kustomized_admission: None,
) -> None:
    apps = client.AppsV1Api(api)
    rbac = client.RbacAuthorizationV1Api(api)
    install = helm(
        "install",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--create-namespace",
        # Other tests install manifests/base, whose gateway namespace Helm cannot adopt.
        "--set",
        f"gateway.namespace={GATEWAYS}",
        "--wait",
        "--timeout",
        "120s",
    )
    assert install.returncode == 0, install.stdout + install.stderr
    gateways = client.CoreV1Api(api).read_namespace(GATEWAYS)
    assert (gateways.metadata.labels or {}).get(
        "pod-security.kubernetes.io/enforce"
    ) == "restricted"
    assert "Shoal 0.1.0 is running" in install.stdout
    deployment = apps.read_namespaced_deployment(RELEASE, NAMESPACE)
    assert deployment.status.available_replicas == 2  # a leader and a follower
    assert rbac.read_cluster_role(RELEASE).rules
    client.AdmissionregistrationV1Api(api).read_validating_admission_policy(
        "shoal-tenant-pool-admission"
    )

    upgrade = helm(
        "upgrade",
        RELEASE,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--set",
        f"gateway.namespace={GATEWAYS}",
        "--set",
        "resyncSeconds=30",
        "--wait",
        "--timeout",
        "120s",
    )
    assert upgrade.returncode == 0, upgrade.stdout + upgrade.stderr
    env = {
        e.name: e.value
        for e in apps.read_namespaced_deployment(RELEASE, NAMESPACE)
        .spec.template.spec.containers[0]
        .env
    }
    assert env["SHOAL_RESYNC_SECONDS"] == "30"

    uninstall = helm("uninstall", RELEASE, "--namespace", NAMESPACE, "--wait")
    assert uninstall.returncode == 0, uninstall.stdout + uninstall.stderr

    def gone() -> bool:
        try:
            apps.read_namespaced_deployment(RELEASE, NAMESPACE)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    wait_for("the release's Deployment to go", gone, lambda g: g, timeout=60)
    # CRDs stay: Helm never deletes them (it would delete every custom resource).
    client.ApiextensionsV1Api(api).read_custom_resource_definition("inferencemodels.shoal.dev")


def test_enterprise_values_reach_the_operator_pod(
    helm: Callable[..., subprocess.CompletedProcess[str]],
) -> None:
    """A mirror's image by digest, a pull secret, cloud identity on the ServiceAccount,
    a priority class, extra environment, JSON logs, and OpenShift's restricted SCC
    (no fixed UID); the defaults keep the fixed non-root UID."""
    digest = "sha256:" + "a" * 64
    out = helm(
        "template",
        RELEASE,
        str(CHART),
        *("--set", "image.repository=mirror.internal/shoal-operator"),
        *("--set", f"image.digest={digest}"),
        *("--set", "imagePullSecrets[0].name=mirror"),
        *(
            "--set",
            "serviceAccount.annotations.eks\\.amazonaws\\.com/role-arn=arn:aws:iam::1:role/r",
        ),
        *("--set", "priorityClassName=system-cluster-critical"),
        *("--set", "extraEnv[0].name=HTTPS_PROXY", "--set", "extraEnv[0].value=http://proxy:3128"),
        *("--set", "logFormat=json"),
        *(
            "--set",
            "podSecurityContext.runAsUser=null",
            "--set",
            "podSecurityContext.runAsGroup=null",
        ),
        *(
            "--show-only",
            "templates/deployment.yaml",
            "--show-only",
            "templates/serviceaccount.yaml",
        ),
    )
    assert out.returncode == 0, out.stderr
    docs = {d["kind"]: d for d in yaml.safe_load_all(out.stdout) if d}
    pod = docs["Deployment"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    image = f"mirror.internal/shoal-operator@{digest}"
    assert container["image"] == image
    assert env["SHOAL_IMAGE"] == image  # the gateways' agent comes from the mirror too
    assert env["SHOAL_LOG_FORMAT"] == "json"
    assert env["HTTPS_PROXY"] == "http://proxy:3128"
    assert pod["imagePullSecrets"] == [{"name": "mirror"}]
    assert pod["priorityClassName"] == "system-cluster-critical"
    assert "runAsUser" not in pod["securityContext"]
    assert pod["securityContext"]["runAsNonRoot"]
    annotations = docs["ServiceAccount"]["metadata"]["annotations"]
    assert annotations == {"eks.amazonaws.com/role-arn": "arn:aws:iam::1:role/r"}
    default = helm("template", RELEASE, str(CHART), "--show-only", "templates/deployment.yaml")
    pod = yaml.safe_load(default.stdout)["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsUser"] == 65532
    assert "imagePullSecrets" not in pod
    assert "priorityClassName" not in pod
    # As a subchart it receives its parent's globals.
    assert helm("template", RELEASE, str(CHART), "--set", "global.registry=x").returncode == 0
    bad = helm("template", RELEASE, str(CHART), "--set", "image.digest=latest")
    assert bad.returncode != 0, "values.schema.json must refuse a digest that is not one"


PROMETHEUS_OPERATOR = "monitoring.coreos.com"
RESTRICTED = {
    f"pod-security.kubernetes.io/{mode}": "restricted" for mode in ("enforce", "warn", "audit")
} | {"pod-security.kubernetes.io/enforce-version": "latest"}


def _is_set(values: dict[str, Any], key: str) -> bool:
    node: Any = values
    for part in key.split("."):
        if not isinstance(node, dict) or part not in node:
            return False
        node = node[part]
    return True


def test_every_value_passes_the_api_servers_admission(
    helm: Callable[..., subprocess.CompletedProcess[str]],
    kubectl: Callable[..., str],
    api: client.ApiClient,
    crds: list[str],
    tmp_path: Path,
) -> None:
    """tests/support/enterprise-values.yaml sets every value the chart declares (the
    test fails on one it misses, so a new value must be exercised too). The chart
    rendered with it is applied with a server-side dry run, strict field validation,
    into a release namespace that enforces (and warns on) the restricted Pod Security
    profile: the real API server's schema validation and admission judge each object.
    A Deployment's pods are only admitted when its ReplicaSet creates them, which a dry
    run never does, so its pod template is also dry-run created as a Pod (its
    ServiceAccount really created first, which the ServiceAccount admission needs),
    next to a stripped copy that Pod Security must refuse, proving enforcement is on.

    The Prometheus Operator's kinds (PrometheusRule, PodMonitor, ServiceMonitor): the
    repository has no copy of their CRDs, so where the cluster does not serve
    monitoring.coreos.com (the local one does not) those objects are only rendered and
    checked here, not sent to the API server. Against a cluster that runs the
    Prometheus Operator they are dry-run applied like the rest.

    The namespaces get unique names (the gateway namespace by --set over the file's),
    so reruns and other tests never meet them."""
    enterprise = yaml.safe_load(ENTERPRISE.read_text())
    declared = [v.key for v in chart_readme.values() if v.leaf]
    unset = [key for key in declared if not _is_set(enterprise, key)]
    assert not unset, f"{ENTERPRISE} must set every value of the chart; it misses {unset}"

    suffix = uuid.uuid4().hex[:5]
    release, namespace = "shoal-ent", f"shoal-enterprise-{suffix}"
    gateways = f"{namespace}-gateways"
    out = helm(
        "template",
        release,
        str(CHART),
        *("--namespace", namespace, "--values", str(ENTERPRISE)),
        *("--set", f"gateway.namespace={gateways}"),
    )
    assert out.returncode == 0, out.stderr
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]

    # Each value reached its object.
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for doc in docs:
        by_kind.setdefault(doc["kind"], []).append(doc)
    fullname = enterprise["fullnameOverride"]
    operator = next(d for d in by_kind["Deployment"] if d["metadata"]["name"] == fullname)
    pod_template = operator["spec"]["template"]
    pod = pod_template["spec"]
    container = pod["containers"][0]
    env = {e["name"]: e for e in container["env"]}
    image = f"{enterprise['image']['repository']}@{enterprise['image']['digest']}"
    assert operator["spec"]["replicas"] == enterprise["replicas"]
    assert (container["image"], container["imagePullPolicy"]) == (image, "Always")
    assert container["resources"] == enterprise["resources"]
    assert pod["imagePullSecrets"] == enterprise["imagePullSecrets"]
    assert pod["priorityClassName"] == enterprise["priorityClassName"]
    assert pod["securityContext"] == {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    for key in ("nodeSelector", "tolerations", "affinity"):
        assert pod[key] == enterprise[key], key
    assert pod_template["metadata"]["annotations"] == enterprise["podAnnotations"]
    # Names, labels and the pods' placement.
    selector = operator["spec"]["selector"]["matchLabels"]
    assert selector["app.kubernetes.io/name"] == enterprise["nameOverride"]
    assert pod_template["metadata"]["labels"] == selector | enterprise["podLabels"]
    assert not selector.keys() & enterprise["podLabels"].keys()
    accounts = enterprise["serviceAccount"]
    assert _named_from_the_fullname(docs, accounts["name"]) == {fullname}
    zone, host = enterprise["topologySpreadConstraints"]
    assert pod["topologySpreadConstraints"] == [
        {**zone, "labelSelector": {"matchLabels": selector}},
        host,
    ]
    # The platform's ServiceAccount, bound to the operator's rights (rbac.create).
    assert pod["serviceAccountName"] == accounts["name"]
    assert _operator_subjects(docs) == [(accounts["name"], namespace)] * 3
    operator_rbac = [d for d in docs if d["kind"] in RBAC_KINDS and not _is_agent_identity(d)]
    assert sorted(d["kind"] for d in operator_rbac) == sorted(
        ["ClusterRole", "ClusterRoleBinding"] + ["Role", "RoleBinding"] * 2
    )
    policy = _network_policy(docs, pod_template, enterprise)
    assert policy["metadata"]["name"] == fullname
    assert [env[e["name"]] for e in enterprise["extraEnv"]] == enterprise["extraEnv"]
    assert {
        name: env[name].get("value")
        for name in (
            "SHOAL_IMAGE",
            "SHOAL_LOG_FORMAT",
            "SHOAL_NAMESPACES",
            "SHOAL_CLUSTER_CIDRS",
            "SHOAL_PROMETHEUS_URL",
            "SHOAL_RESYNC_SECONDS",
            "SHOAL_GATEWAY_NAMESPACE",
            "SHOAL_GATEWAY_IMAGE",
            "SHOAL_TRITON_IMAGE",
            "SHOAL_TRITON_VLLM_IMAGE",
            "SHOAL_FETCH_IMAGE",
        )
    } == {
        "SHOAL_IMAGE": image,
        "SHOAL_LOG_FORMAT": "json",
        "SHOAL_NAMESPACES": ",".join(enterprise["watchNamespaces"]),
        "SHOAL_CLUSTER_CIDRS": ",".join(enterprise["clusterCIDRs"]),
        "SHOAL_PROMETHEUS_URL": enterprise["prometheusUrl"],
        "SHOAL_RESYNC_SECONDS": str(enterprise["resyncSeconds"]),
        "SHOAL_GATEWAY_NAMESPACE": gateways,
        "SHOAL_GATEWAY_IMAGE": enterprise["gateway"]["image"],
        "SHOAL_TRITON_IMAGE": enterprise["modelImages"]["triton"],
        "SHOAL_TRITON_VLLM_IMAGE": enterprise["modelImages"]["vllm"],
        "SHOAL_FETCH_IMAGE": enterprise["modelImages"]["fetch"],
    }
    # The gateways' placement, as the operator reads it back.
    settings = Settings.from_env(
        {k: env[k]["value"] for k in ("SHOAL_GATEWAY_NODE_SELECTOR", "SHOAL_GATEWAY_TOLERATIONS")}
    )
    assert settings.gateway.placement() == {
        "nodeSelector": enterprise["gateway"]["nodeSelector"],
        "tolerations": enterprise["gateway"]["tolerations"],
    }
    account = next(
        d for d in by_kind["ServiceAccount"] if d["metadata"]["name"] == accounts["name"]
    )
    assert account["metadata"]["annotations"] == enterprise["serviceAccount"]["annotations"]
    assert [n["metadata"]["name"] for n in by_kind["Namespace"]] == [gateways]
    assert "ValidatingAdmissionPolicy" in by_kind
    assert f"{fullname}-dashboard" in {c["metadata"]["name"] for c in by_kind["ConfigMap"]}
    monitoring = [d for d in docs if d["apiVersion"].startswith(f"{PROMETHEUS_OPERATOR}/")]
    assert sorted(d["kind"] for d in monitoring) == [
        "PodMonitor",
        "PodMonitor",
        "PrometheusRule",
        "ServiceMonitor",
    ]
    for doc in monitoring:
        labels = doc["metadata"]["labels"]
        assert enterprise["monitoring"]["additionalLabels"].items() <= labels.items()
    rules = [r for g in by_kind["PrometheusRule"][0]["spec"]["groups"] for r in g["rules"]]
    assert any("alert" in r for r in rules)  # monitoring.prometheusRule.alerts
    assert any("record" in r for r in rules)

    served = {g.name for g in client.ApisApi(api).get_api_versions().groups}
    applied = [d for d in docs if PROMETHEUS_OPERATOR in served or d not in monitoring]
    manifest = tmp_path / "enterprise.yaml"
    manifest.write_text(yaml.safe_dump_all(applied, sort_keys=False))

    core = client.CoreV1Api(api)
    for name in (namespace, gateways):
        core.create_namespace(
            client.V1Namespace(
                metadata=client.V1ObjectMeta(
                    name=name, labels={"shoal.dev/test": "1", **RESTRICTED}
                )
            )
        )
    try:
        # The Pod's ServiceAccount must exist for the ServiceAccount admission plugin.
        account_file = tmp_path / "serviceaccount.yaml"
        account_file.write_text(yaml.safe_dump(account))
        kubectl("apply", "--server-side", f"--filename={account_file}")
        result = kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "--field-manager=shoal-enterprise-dry-run",
            "--dry-run=server",
            "--validate=strict",
            f"--filename={manifest}",
        )
        assert "Warning" not in result, result
        assert result.count("(server dry run)") == len(applied), result

        as_pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {**pod_template["metadata"], "name": release, "namespace": namespace},
            "spec": pod,
        }
        pod_file = tmp_path / "pod.yaml"
        pod_file.write_text(yaml.safe_dump(as_pod))
        admitted = kubectl(
            "create", "--dry-run=server", "--validate=strict", f"--filename={pod_file}"
        )
        assert "created (server dry run)" in admitted, admitted
        assert "Warning" not in admitted, admitted

        stripped = yaml.safe_load(yaml.safe_dump(as_pod))
        del stripped["spec"]["securityContext"]
        del stripped["spec"]["containers"][0]["securityContext"]
        pod_file.write_text(yaml.safe_dump(stripped))
        refused = kubectl("create", "--dry-run=server", f"--filename={pod_file}", check=False)
        assert 'violates PodSecurity "restricted:latest"' in refused, refused
    finally:
        for name in (namespace, gateways):
            core.delete_namespace(name, propagation_policy="Background")
