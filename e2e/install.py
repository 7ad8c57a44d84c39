"""Installing Shoal's cluster-wide pieces on a cluster, for the tests and benchmarks:
the CRDs and admission policy, and the operator's least-privilege identity."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import yaml

from e2e.cluster import local

REPO = Path(__file__).resolve().parent.parent

Kubectl = Callable[..., str]


def kubectl_for(kubeconfig: Path) -> Kubectl:
    """The project's kubectl (same version as the local API server) on one cluster."""
    binary = str(local.ensure_binaries() / "kubectl")

    def run(*args: str, check: bool = True) -> str:
        result = subprocess.run(
            [binary, f"--kubeconfig={kubeconfig}", *args], capture_output=True, text=True
        )
        if check and result.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed:\n{result.stderr}")
        return result.stdout + result.stderr

    return run


def install_crds(kubectl: Kubectl) -> list[str]:
    """The generated CRDs, applied and Established, then the admission policy that takes
    TenantPools as parameters; returns the CRDs' ``crd/<name>`` references.

    The order matters: a ValidatingAdmissionPolicy created before its paramKind's CRD
    is served stays broken ("failed to find resource referenced by paramKind") until it
    is recreated, so it is recreated once the CRDs are Established.
    """
    crd_files = sorted(str(p) for p in (REPO / "crds").glob("*.shoal.dev.yaml"))
    kubectl("apply", "--server-side", "--force-conflicts", *[f"--filename={f}" for f in crd_files])
    names = [f"crd/{Path(f).name.removesuffix('.yaml')}" for f in crd_files]
    kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    # Established is not served: the API server's cache of a new resource answers 429
    # "storage is (re)initializing" for a moment, which kubectl waits out on its own
    # (the operator would log it as an error on its first list).
    plurals = [n.removeprefix("crd/") for n in names]
    kubectl("get", "--all-namespaces", "--request-timeout=60s", ",".join(plurals))
    policy = str(REPO / "manifests" / "admission" / "admission-policy.yaml")
    kubectl("delete", "--ignore-not-found", f"--filename={policy}")
    kubectl("apply", "--server-side", "--force-conflicts", f"--filename={policy}")
    return names


def operator_kubeconfig(admin_kubeconfig: Path, kubectl: Kubectl, path: Path) -> Path:
    """Writes to ``path`` a kubeconfig holding only the shoal-operator ServiceAccount's
    token, after applying manifests/gateways and manifests/base (namespace,
    ServiceAccount, least-privilege ClusterRole, Deployment): whoever runs the operator
    with it has exactly the rights the shipped manifests grant."""
    for kustomization in ("gateways", "base"):
        kubectl(
            "apply",
            "--server-side",
            "--force-conflicts",
            "-k",
            str(REPO / "manifests" / kustomization),
        )
    token = kubectl(
        "create", "token", "shoal-operator", "--namespace=shoal-system", "--duration=6h"
    ).strip()
    admin = yaml.safe_load(admin_kubeconfig.read_text())
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
    cluster = next(c for c in admin["clusters"] if c["name"] == context["context"]["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [cluster],
        "users": [{"name": "shoal-operator", "user": {"token": token}}],
        "contexts": [
            {"name": "operator", "context": {"cluster": cluster["name"], "user": "shoal-operator"}}
        ],
        "current-context": "operator",
    }
    path.write_text(yaml.safe_dump(config))
    return path
