"""The doctor's reads: the cluster through the operator's own API edge, Prometheus
through its HTTP API; then the pure checks over what was read."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import httpx

from shoal.api.admission_policy import NAME as ADMISSION_NAME
from shoal.api.constants import API_VERSION, KUEUE_GROUP, KUEUE_VERSION
from shoal.api.crd import all_crds
from shoal.doctor import checks
from shoal.doctor.checks import CUSTOM_METRICS, Obj
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
from shoal.kube.client import ApiError, Kube, api_message
from shoal.leader import LEASE_NAME

ADMISSION_API = "/apis/admissionregistration.k8s.io/v1"


class UnreachableError(Exception):
    """The API server did not answer at all."""


class UnreadableError(Exception):
    """The API server refused or failed one read (its status and message)."""


def _message(exc: ApiError) -> str:
    return f"{exc.status} {api_message(exc) if exc.body else exc.reason}"


class Cluster:
    """What the doctor reads from the API server (admin's reads; none writes)."""

    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    def _get(self, path: str) -> Obj | None:
        """The object at ``path``; None when it does not exist."""
        try:
            return self.kube.get_path(path)
        except ApiError as exc:
            if exc.status == 404:
                return None
            if exc.status == 0:
                raise UnreachableError(exc.reason) from exc
            raise UnreadableError(_message(exc)) from exc

    def _list(self, api_version: str, kind: str, namespace: str | None, labels: str) -> list[Obj]:
        try:
            return self.kube.list(api_version, kind, namespace, labels=labels)
        except ApiError as exc:
            if exc.status == 0:
                raise UnreachableError(exc.reason) from exc
            raise UnreadableError(_message(exc)) from exc

    def crd(self, name: str) -> Obj | None:
        return self._get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")

    def admission_policy(self) -> Obj | None:
        return self._get(f"{ADMISSION_API}/validatingadmissionpolicies/{ADMISSION_NAME}")

    def admission_binding(self) -> Obj | None:
        return self._get(f"{ADMISSION_API}/validatingadmissionpolicybindings/{ADMISSION_NAME}")

    def operator_deployments(self) -> list[Obj]:
        return self._list("apps/v1", "Deployment", None, checks.OPERATOR_SELECTOR)

    def lease(self, namespace: str) -> Obj | None:
        return self._get(f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{LEASE_NAME}")

    def api_services(self) -> list[Obj]:
        found = self._get("/apis/apiregistration.k8s.io/v1/apiservices") or {}
        items: list[Obj] = found.get("items") or []
        return items

    def discovery(self, group: str, version: str) -> list[Obj]:
        """The resources (metric names) a metrics API lists."""
        found = self._get(f"/apis/{group}/{version}") or {}
        resources: list[Obj] = found.get("resources") or []
        return resources

    def nodes(self) -> list[Obj]:
        # Nodes are no kind the operator touches (shoal.api.kinds): read by path.
        found = self._get("/api/v1/nodes") or {}
        items: list[Obj] = found.get("items") or []
        return items

    def custom_resources(self, kind: str) -> list[Obj]:
        """Every object of one of Shoal's kinds, in every namespace."""
        return self._list(API_VERSION, kind, None, "")

    def serves(self, group: str, version: str) -> bool:
        """Whether the API server serves ``group/version`` (Kueue's, say)."""
        return self._get(f"/apis/{group}/{version}") is not None

    def hpas(self, namespaces: Collection[str]) -> list[Obj]:
        """The HPAs Shoal manages, in ``namespaces`` (every namespace when empty)."""
        scopes: list[str | None] = list(namespaces) or [None]
        return [
            hpa
            for scope in scopes
            for hpa in self._list(
                "autoscaling/v2", "HorizontalPodAutoscaler", scope, checks.MANAGED
            )
        ]


class Prometheus:
    """Prometheus' HTTP API: the loaded rules and the scrape targets."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self.url = url.rstrip("/")
        self.timeout = timeout

    def _data(self, path: str) -> Obj:
        # Redirects followed: httpx does not by default, and a proxy in front may send one.
        reply = httpx.get(f"{self.url}{path}", timeout=self.timeout, follow_redirects=True)
        reply.raise_for_status()
        body: Obj = reply.json()
        if body.get("status") != "success":
            raise ValueError(f"{path}: {body.get('error', body)}")
        data: Obj = body["data"]
        return data

    def rule_groups(self) -> list[Obj]:
        groups: list[Obj] = self._data("/api/v1/rules").get("groups") or []
        return groups

    def targets(self) -> list[Obj]:
        active: list[Obj] = self._data("/api/v1/targets?state=active").get("activeTargets") or []
        return active


@dataclass(frozen=True)
class Options:
    """``namespaces``: where to look at HPAs (empty: everywhere); ``skip``: check groups
    (``checks.CHECKS``) not to run."""

    namespaces: tuple[str, ...] = ()
    skip: frozenset[str] = field(default_factory=frozenset)


def diagnose(
    cluster: Cluster,
    prometheus: Prometheus | None,
    options: Options = Options(),
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
) -> list[Finding]:
    """Every check not skipped, in order; a read that fails is reported, not raised.
    An API server that does not answer ends the run with one finding."""
    out: list[Finding] = []
    hpas: list[Obj] | None = None

    def shoal_hpas() -> list[Obj]:
        nonlocal hpas
        if hpas is None:
            hpas = cluster.hpas(options.namespaces)
        return hpas

    def run(check: str, what: str, body: Callable[[], list[Finding]]) -> None:
        if check in options.skip:
            return
        try:
            out.extend(body())
        except UnreadableError as exc:
            out.append(checks.unreadable(check, what, str(exc)))

    try:
        run(CRDS, "CustomResourceDefinitions", lambda: _crds(cluster))
        run(
            ADMISSION,
            "ValidatingAdmissionPolicy",
            lambda: checks.check_admission(
                cluster.admission_policy(),
                cluster.admission_binding(),
                cluster.crd(checks.PARAM_CRD),
            ),
        )
        run(OPERATOR, "operator Deployments and Lease", lambda: _operator(cluster, now()))
        run(
            GPUS,
            "nodes, models and pools",
            lambda: checks.check_gpu_nodes(
                cluster.nodes(),
                cluster.custom_resources("InferenceModel"),
                cluster.custom_resources("TenantPool"),
            ),
        )
        run(
            CAPACITY,
            "pools and Kueue",
            lambda: checks.check_kueue(
                cluster.custom_resources("TenantPool"), cluster.serves(KUEUE_GROUP, KUEUE_VERSION)
            ),
        )
        run(METRICS_API, "metrics APIs", lambda: _metrics_api(cluster, shoal_hpas()))
        run(AUTOSCALERS, "HorizontalPodAutoscalers", lambda: checks.check_autoscalers(shoal_hpas()))
        run(
            PROMETHEUS,
            "Prometheus",
            lambda: (
                [checks.prometheus_not_given()]
                if prometheus is None
                else _prometheus(prometheus, bool(shoal_hpas()))
            ),
        )
    except UnreachableError as exc:
        out.append(
            Finding(
                "cluster",
                "API server",
                Status.FAIL,
                f"unreachable: {str(exc).removeprefix('API server unreachable: ')}",
                "check the kubeconfig (--kubeconfig, $KUBECONFIG) and that the cluster runs",
            )
        )
    return out


def _crds(cluster: Cluster) -> list[Finding]:
    expected = {crd["metadata"]["name"]: crd for crd in all_crds()}
    return checks.check_crds({name: cluster.crd(name) for name in checks.CRD_NAMES}, expected)


def _operator(cluster: Cluster, now: dt.datetime) -> list[Finding]:
    deployments = cluster.operator_deployments()
    namespaces = {d["metadata"]["namespace"] for d in deployments}
    return checks.check_operator(deployments, {ns: cluster.lease(ns) for ns in namespaces}, now)


def _metrics_api(cluster: Cluster, hpas: list[Obj]) -> list[Finding]:
    services = cluster.api_services()
    out = checks.check_metrics_apis(services, checks.metric_groups(hpas))
    available = [
        s
        for s in services
        if (s.get("spec") or {}).get("group") == CUSTOM_METRICS
        and checks.conditions(s).get("Available", {}).get("status") == "True"
    ]
    if not available:
        return out  # the APIService's own finding says why
    # The version the HPA controller prefers: the highest priority.
    preferred = max(available, key=lambda s: s["spec"].get("versionPriority", 0))
    version = preferred["spec"]["version"]
    try:
        resources = cluster.discovery(CUSTOM_METRICS, version)
    except UnreadableError as exc:
        return [*out, checks.unreadable(METRICS_API, f"/apis/{CUSTOM_METRICS}/{version}", str(exc))]
    return out + checks.check_served_metrics(checks.served_metric_names(resources), hpas)


def _prometheus(prometheus: Prometheus, models_expected: bool) -> list[Finding]:
    # A malformed URL too: httpx.InvalidURL is no HTTPError.
    try:
        groups, targets = prometheus.rule_groups(), prometheus.targets()
    except (httpx.HTTPError, httpx.InvalidURL, ValueError, KeyError) as exc:
        return [checks.prometheus_unreachable(prometheus.url, f"{type(exc).__name__}: {exc}")]
    return checks.check_prometheus_rules(groups) + checks.check_prometheus_targets(
        targets, models_expected
    )
