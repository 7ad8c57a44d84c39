"""Proving that nothing changed after the HPA controller has looked again, not after a
sleep: its reconciliations, counted by kube-controller-manager's own metrics."""

from __future__ import annotations

import ssl
import time

import httpx
from e2e.cluster.local import HPA_SYNC_PERIOD, LocalCluster
from e2e.cluster.target import Target
from kubernetes import client

from tests.support.wait import wait_for

RECONCILIATIONS = "horizontal_pod_autoscaler_controller_reconciliations_total"


def hpa_reconciliations(cluster: LocalCluster) -> float:
    """How many times the HPA controller has reconciled an HPA, all of them together."""
    state = cluster.read_state()
    assert state is not None, f"no local cluster runs in {cluster.root}"
    pki = cluster.pki
    url = f"https://127.0.0.1:{state.ports['controller_manager']}/metrics"
    # The controller-manager serves a self-signed certificate; the admin's client
    # certificate is what it authorizes.
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.load_cert_chain(str(pki.cert("admin")), str(pki.key("admin")))
    reply = httpx.get(url, verify=context, timeout=10)
    reply.raise_for_status()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in reply.text.splitlines()
        if line.startswith(RECONCILIATIONS + "{") or line.startswith(RECONCILIATIONS + " ")
    )


def wait_for_hpa_syncs(target: Target, api: client.ApiClient, rounds: int = 2) -> None:
    """Return once the HPA controller has reconciled every HPA in the cluster ``rounds``
    more times (on average: it goes through all of them each sync period).

    Only the local cluster's controller-manager can be asked; on another cluster this
    waits ``rounds`` sync periods of the local cluster's setting, plus one."""
    if not target.local:
        time.sleep((rounds + 1) * float(HPA_SYNC_PERIOD.rstrip("s")))
        return
    cluster = LocalCluster(root=target.kubeconfig.parent)
    hpas = client.AutoscalingV2Api(api).list_horizontal_pod_autoscaler_for_all_namespaces()
    wanted = rounds * max(len(hpas.items), 1)
    before = hpa_reconciliations(cluster)
    wait_for(
        f"{rounds} HPA controller syncs of every HPA",
        lambda: hpa_reconciliations(cluster) - before,
        lambda done: done >= wanted,
        timeout=(rounds + 2) * float(HPA_SYNC_PERIOD.rstrip("s")) + 30,
    )
