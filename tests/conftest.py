"""Fixtures shared by every tier.

Tiers follow the directory a test lives in (tests/unit, tests/cluster, tests/e2e,
tests/realnode, tests/chaos) and are applied as markers, so ``pytest -m unit`` selects
the fast ones.
"""

from __future__ import annotations

import json
import os
import subprocess
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from e2e.cluster import local
from e2e.cluster import node as node_mod
from e2e.cluster.target import Target, resolve_target
from e2e.install import Kubectl, install_crds, kubectl_for
from e2e.install import operator_kubeconfig as operator_kubeconfig_for
from e2e.operator import OperatorProcess, running_operator
from hypothesis import HealthCheck, settings
from kubernetes import client

from tests.support.wait import wait_for
from tests.tiers import ON_CLUSTER_MARK

TIERS = ("unit", "cluster", "e2e", "realnode", "chaos")

# The property tests check what the generated inputs do, not how fast they are made:
# on two cores shared with a build or a cluster, generating from a long pattern can
# take over Hypothesis's one-second health check, and that is no failure of Shoal's.
settings.register_profile("shoal", suppress_health_check=[HealthCheck.too_slow], deadline=None)
settings.load_profile("shoal")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        tier = Path(str(item.fspath)).parent.name
        if tier not in TIERS:
            raise pytest.UsageError(f"{item.nodeid}: tests live in tests/<tier>/, tiers {TIERS}")
        item.add_marker(getattr(pytest.mark, tier))
        # Whatever reaches the cluster does so through this fixture.
        if "kube_target" in getattr(item, "fixturenames", ()):
            item.add_marker(getattr(pytest.mark, ON_CLUSTER_MARK))


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """With $SHOAL_TALLY (set by tests.tiers), add this session's counts to that file, so
    the tiers' runs can be totalled."""
    tally = os.environ.get("SHOAL_TALLY")
    if tally:
        stats = terminalreporter.stats
        counts = {k: len(stats.get(k, [])) for k in ("passed", "failed", "error", "skipped")}
        with open(tally, "a") as out:
            out.write(json.dumps(counts) + "\n")


@pytest.fixture(scope="session")
def kube_target() -> Iterator[Target]:
    """The cluster under test: $KUBECONFIG's, or the local one (started once, reused)."""
    target = resolve_target()
    yield target
    if target.started_here and not os.environ.get("SHOAL_KEEP_CLUSTER"):
        local.down()


@pytest.fixture(scope="session")
def api(kube_target: Target) -> client.ApiClient:
    return kube_target.api_client()


@pytest.fixture(scope="session")
def core(api: client.ApiClient) -> client.CoreV1Api:
    return client.CoreV1Api(api)


@pytest.fixture(scope="session")
def apps(api: client.ApiClient) -> client.AppsV1Api:
    return client.AppsV1Api(api)


@pytest.fixture(scope="session")
def kubectl(kube_target: Target) -> Kubectl:
    """Run the project's kubectl (same version as the local API server) on the target."""
    return kubectl_for(kube_target.kubeconfig)


@pytest.fixture(scope="session")
def crds(kubectl: Kubectl) -> list[str]:
    """The generated CRDs, installed and Established, then the admission policy."""
    return install_crds(kubectl)


@pytest.fixture(scope="session")
def operator_kubeconfig(
    kube_target: Target,
    crds: list[str],
    kubectl: Kubectl,
    tmp_path_factory: pytest.TempPathFactory,
) -> Path:
    """A kubeconfig holding only the shoal-operator ServiceAccount's token (from
    manifests/base): a rule the operator needs and the ClusterRole lacks fails the
    tests."""
    path = tmp_path_factory.mktemp("operator-sa") / "kubeconfig"
    return operator_kubeconfig_for(kube_target.kubeconfig, kubectl, path)


@pytest.fixture(scope="session")
def operator_env() -> dict[str, str]:
    """Settings (``SHOAL_*``) the session's operator runs with: none but the tests'
    own here; a tier may override this fixture."""
    return {}


@pytest.fixture(scope="session")
def operator(
    operator_kubeconfig: Path,
    operator_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[OperatorProcess]:
    """The real operator (``shoal run``), cluster-wide, as its ServiceAccount; yields
    the process (its log and endpoints). Tracebacks in the log (a 403 among them) fail
    the session."""
    log = tmp_path_factory.mktemp("operator") / "operator.log"
    with running_operator(operator_kubeconfig, log, env=operator_env) as process:
        yield process
    errors = [line for line in log.read_text().splitlines() if "Traceback" in line]
    assert not errors, f"the operator logged tracebacks; see {log}"
    assert " 403" not in log.read_text(), f"the operator was forbidden something; see {log}"


def fresh_namespace(core: client.CoreV1Api, node_name: str) -> str:
    """Create a namespace named after ``node_name``; return it once its default
    ServiceAccount exists (pods can be created in it)."""
    slug = "".join(c if c.isalnum() else "-" for c in node_name.lower())[:40].strip("-")
    name = f"t-{slug}-{uuid.uuid4().hex[:5]}"
    core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=name, labels={"shoal.dev/test": "1"}))
    )
    wait_for(
        f"ServiceAccount default in {name}",
        lambda: core.read_namespaced_service_account("default", name),
        lambda sa: sa is not None,
        timeout=30,
    )
    return name


@pytest.fixture
def namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test, ready for pods (its default ServiceAccount exists)."""
    name = fresh_namespace(core, request.node.name)
    yield name
    core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture(scope="module")
def module_namespace(core: client.CoreV1Api, request: pytest.FixtureRequest) -> Iterator[str]:
    """One namespace for all of a module's tests, for tests that store nothing in it or
    whose objects' names never clash (a corpus judged by dry-run requests): creating
    and deleting one per test cost more than the tests themselves."""
    name = fresh_namespace(core, Path(str(request.node.fspath)).stem.removeprefix("test_"))
    yield name
    core.delete_namespace(name, propagation_policy="Background")


@pytest.fixture
def gpu_nodes(core: client.CoreV1Api, kube_target: Target) -> list[client.V1Node]:
    """The cluster's GPU nodes; the local cluster always has simulated ones."""
    nodes = core.list_node(label_selector="nvidia.com/gpu.present=true").items
    if not nodes:
        message = f"the cluster behind {kube_target.kubeconfig} has no GPU nodes"
        if kube_target.local or os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message + " (apply e2e/cluster/nodes.yaml with KWOK installed)")
    return list(nodes)


@dataclass(frozen=True)
class RealNode:
    """The local cluster's real node: pods meant for it select ``label`` and tolerate
    the taint of the same key; ``image`` (busybox) is in its containerd already."""

    name: str
    label: str
    image: str
    cluster: local.LocalCluster

    def placement(self) -> dict[str, object]:
        """The pod spec fields that put a pod on this node and nowhere else."""
        return {
            "nodeSelector": {self.label: "true"},
            "tolerations": [
                {"key": self.label, "operator": "Equal", "value": "true", "effect": "NoSchedule"}
            ],
        }


@pytest.fixture(scope="session")
def real_node(kube_target: Target) -> Iterator[RealNode]:
    """real-0, started on the session's local cluster on first use (a few seconds with
    its binaries and images cached) and stopped again after the session when it was
    started here. Only the project's local cluster has one."""
    if not kube_target.local:
        message = f"the cluster behind {kube_target.kubeconfig} is not the local cluster"
        if os.environ.get("CI"):
            pytest.fail(message + ": real-node tests need it")
        pytest.skip(message + " (the real node runs only there)")
    cluster = local.LocalCluster()
    was_ready = node_mod.ready(cluster)
    image = node_mod.up(cluster)
    yield RealNode(node_mod.NAME, node_mod.LABEL, image, cluster)
    if not was_ready and not os.environ.get("SHOAL_KEEP_CLUSTER"):
        node_mod.stop(cluster)


@pytest.fixture(scope="session")
def helm(kube_target: Target) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Helm (built from its Go module) against the session's cluster."""
    binary = str(local.ensure_binaries() / "helm")

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [binary, f"--kubeconfig={kube_target.kubeconfig}", *args],
            capture_output=True,
            text=True,
            timeout=240,
        )

    return run
