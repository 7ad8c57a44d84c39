"""Kueue on a cluster under test: its real controller and webhooks, built from the
pinned Go module (e2e/cluster/tools/kueue), run as a local process.

Its CRDs, conversion webhooks and webhook configurations come from the same module's
manifests. The API server reaches the webhooks at 127.0.0.1 by URL (no Service: the
local cluster has no kube-proxy). Kueue's own certificate management stays on, as in a
real install; it adopts the Secret made here, whose certificate names both Kueue's
Service and 127.0.0.1, so there is nothing for it to rotate. Only the pod integration
is on, and its webhooks see only pods that name a queue: the rest of the cluster's pods
never wait on Kueue.

Leaving is the reverse, in an order that strands nothing: the webhooks go first (no
pod creation may fail for want of them), then the controller, then whatever still holds
Kueue's finalizers, then the CRDs. A cluster without Kueue is the other test's premise.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import yaml

from e2e.cluster import local, pki
from e2e.install import Kubectl
from e2e.process import stop, wait_http

MODULE = "sigs.k8s.io/kueue"
TOOLS = Path(__file__).resolve().parent / "cluster" / "tools" / "kueue"
HOST = "127.0.0.1"
WEBHOOK_NAME = "shoal-test-kueue"
FINALIZER_PREFIX = "kueue.x-k8s.io/"
NAMESPACE = "kueue-system"
# Kueue's defaults for its certificate management (config.kueue.x-k8s.io/v1beta2).
SERVICE_NAME = "kueue-webhook-service"
SECRET_NAME = "kueue-webhook-server-cert"
CA_NAME = "kueue-ca"
# Longer than the rotator's 90-day look-ahead, so it adopts rather than replaces.
CERT_VALIDITY = dt.timedelta(days=3650)


def _module(field: str) -> str:
    """One field of the pinned Kueue module, as ``go list -m`` reports it."""
    return subprocess.run(
        ["go", "list", "-m", "-f", f"{{{{.{field}}}}}", MODULE],
        cwd=TOOLS,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def module_dir() -> Path:
    """Where the Go module cache holds the pinned Kueue module's files (manifests)."""
    out = _module("Dir")
    if not out:  # not downloaded yet: building the tool fetches it
        local.ensure_tool("kueue", f"{MODULE}/cmd/kueue")
        return module_dir()
    return Path(out)


def version() -> str:
    """The pinned Kueue version (its module's, in tools/kueue/go.mod)."""
    return _module("Version")


def crd_files(root: Path) -> list[Path]:
    return sorted((root / "config" / "components" / "crd" / "bases").glob("*.yaml"))


def crds(root: Path, port: int, ca: bytes) -> list[dict[str, Any]]:
    """Kueue's CRDs with the conversion webhooks its own kustomization enables,
    pointed at the local process (pure apart from reading the manifests)."""

    component = root / "config" / "components" / "crd"
    kustomization = yaml.safe_load((component / "kustomization.yaml").read_text())
    conversions = {}
    for patch in kustomization.get("patches") or []:
        doc = yaml.safe_load((component / patch["path"]).read_text())
        if doc.get("spec", {}).get("conversion", {}).get("strategy") == "Webhook":
            conversions[doc["metadata"]["name"]] = doc["spec"]["conversion"]
    out = []
    for path in crd_files(root):
        crd = yaml.safe_load(path.read_text())
        conversion = conversions.get(crd["metadata"]["name"])
        if conversion is not None:
            webhook = dict(conversion["webhook"])
            webhook["clientConfig"] = {
                "url": f"https://{HOST}:{port}/convert",
                "caBundle": base64.b64encode(ca).decode(),
            }
            crd["spec"]["conversion"] = {"strategy": "Webhook", "webhook": webhook}
        out.append(crd)
    return out


def webhook_configurations(root: Path, port: int, ca: bytes) -> list[dict[str, Any]]:
    """Kueue's own webhook configurations, cut to what the pod integration and Kueue's
    kinds need, pointed at the local process (pure apart from reading the manifest)."""

    bundle = base64.b64encode(ca).decode()
    out = []
    manifest = root / "config" / "components" / "webhook" / "manifests.yaml"
    for doc in yaml.safe_load_all(manifest.read_text()):
        kept = []
        for hook in doc["webhooks"]:
            groups = {g for rule in hook["rules"] for g in rule["apiGroups"]}
            resources = {r for rule in hook["rules"] for r in rule["resources"]}
            if groups == {"kueue.x-k8s.io"}:
                pass
            elif groups == {""} and resources == {"pods"}:
                hook["objectSelector"] = {
                    "matchExpressions": [{"key": "kueue.x-k8s.io/queue-name", "operator": "Exists"}]
                }
            else:
                continue
            path = hook["clientConfig"]["service"]["path"]
            hook["clientConfig"] = {"url": f"https://{HOST}:{port}{path}", "caBundle": bundle}
            hook["timeoutSeconds"] = 10
            kept.append(hook)
        kind = doc["kind"]
        suffix = "mutating" if kind.startswith("Mutating") else "validating"
        doc["metadata"] = {"name": f"{WEBHOOK_NAME}-{suffix}"}
        doc["webhooks"] = kept
        out.append(doc)
    return out


def certificate_secret(cert_dir: Path) -> dict[str, Any]:
    """The Secret Kueue's certificate management adopts: the files the webhook server
    also reads, so the rotator finds them valid and leaves them be."""

    files = ("ca.crt", "ca.key", "tls.crt", "tls.key")
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": SECRET_NAME, "namespace": NAMESPACE},
        "type": "kubernetes.io/tls",
        "data": {name: base64.b64encode((cert_dir / name).read_bytes()).decode() for name in files},
    }


def configuration(webhook_port: int, health_port: int, cert_dir: Path) -> dict[str, Any]:
    """Kueue's configuration: the pod integration, fair sharing, no leader election."""
    return {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "health": {"healthProbeBindAddress": f"{HOST}:{health_port}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": webhook_port, "host": HOST, "certDir": str(cert_dir)},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": SERVICE_NAME,
            "webhookSecretName": SECRET_NAME,
        },
        "manageJobsWithoutQueueName": False,
        "managedJobsNamespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": ["kube-system", NAMESPACE],
                }
            ]
        },
        "integrations": {"frameworks": ["pod"]},
        "fairSharing": {
            "preemptionStrategies": ["LessThanOrEqualToFinalShare", "LessThanInitialShare"]
        },
        "clientConnection": {"qps": 100, "burst": 200},
    }


def _strip_finalizers(kubectl: Kubectl, resource: str) -> None:
    listing = json.loads(kubectl("get", resource, "--all-namespaces", "-o", "json", check=False))
    for item in listing.get("items", []):
        meta = item["metadata"]
        finalizers = meta.get("finalizers") or []
        kept = [f for f in finalizers if not f.startswith(FINALIZER_PREFIX)]
        if kept == finalizers:
            continue
        where = ["--namespace", meta["namespace"]] if meta.get("namespace") else []
        patch = json.dumps({"metadata": {"finalizers": kept}})
        kubectl("patch", resource, meta["name"], *where, "--type=merge", "-p", patch, check=False)


@contextmanager
def running_kueue(kubectl: Kubectl, kubeconfig: Path, workdir: Path) -> Iterator[None]:
    """Kueue installed and running for the duration; gone, CRDs included, afterwards."""
    binary = local.ensure_tool("kueue", f"{MODULE}/cmd/kueue")
    root = module_dir()
    workdir.mkdir(parents=True, exist_ok=True)
    cert_dir = workdir / "certs"
    service = f"{SERVICE_NAME}.{NAMESPACE}.svc"
    ca = pki.webhook_serving(cert_dir, [HOST, service], CA_NAME, CERT_VALIDITY)
    webhook_port, health_port, visibility_port = (local.free_port() for _ in range(3))
    config = workdir / "config.yaml"
    config.write_text(yaml.safe_dump(configuration(webhook_port, health_port, cert_dir)))
    kubectl("create", "namespace", NAMESPACE, check=False)
    secret = workdir / "secret.yaml"
    secret.write_text(yaml.safe_dump(certificate_secret(cert_dir)))
    kubectl("apply", "--server-side", "--force-conflicts", f"--filename={secret}")
    definitions = workdir / "crds.yaml"
    rendered = crds(root, webhook_port, ca)
    definitions.write_text(yaml.safe_dump_all(rendered))
    kubectl("apply", "--server-side", "--force-conflicts", f"--filename={definitions}")
    names = [f"crd/{crd['metadata']['name']}" for crd in rendered]
    kubectl("wait", "--for=condition=Established", "--timeout=60s", *names)
    log = workdir / "kueue.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [
                str(binary),
                f"--config={config}",
                f"--kubeconfig={kubeconfig}",
                f"--visibility-server-port={visibility_port}",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    hooks = workdir / "webhooks.yaml"
    try:
        wait_http(f"http://{HOST}:{health_port}/readyz", "kueue", proc, log, timeout=120)
        hooks.write_text(yaml.safe_dump_all(webhook_configurations(root, webhook_port, ca)))
        kubectl("apply", "--server-side", "--force-conflicts", f"--filename={hooks}")
        _wait_webhooks(kubectl, workdir)
        yield
    finally:
        kubectl("delete", "--ignore-not-found", f"--filename={hooks}", check=False)
        for kind in ("localqueues", "clusterqueues", "resourceflavors"):
            kubectl("delete", kind, "--all", "--all-namespaces", "--wait=false", check=False)
        time.sleep(1)  # let the controller release what it can before it goes
        stop(proc)
        for resource in ("pods", "workloads", "localqueues", "clusterqueues", "resourceflavors"):
            _strip_finalizers(kubectl, resource)
        kubectl("delete", "--ignore-not-found", "--timeout=120s", *names, check=False)
        kubectl(
            "delete", "namespace", NAMESPACE, "--ignore-not-found", "--timeout=120s", check=False
        )


def _wait_webhooks(kubectl: Kubectl, workdir: Path) -> None:
    """Until the API server reaches the webhooks (a dry-run ResourceFlavor passes its
    defaulting and validation)."""
    probe = workdir / "probe.yaml"
    probe.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "kueue.x-k8s.io/v1beta2",
                "kind": "ResourceFlavor",
                "metadata": {"name": "shoal-webhook-probe"},
            }
        )
    )
    deadline = time.monotonic() + 60
    while True:
        out = kubectl("apply", "--dry-run=server", f"--filename={probe}", check=False)
        if "error" not in out.lower():
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"Kueue's webhooks did not answer: {out}")
        time.sleep(0.5)
