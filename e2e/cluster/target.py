"""Which cluster the tests and the demo talk to: $KUBECONFIG's, or the local one."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kubernetes import client, config

from e2e.cluster import local


@dataclass(frozen=True)
class Target:
    """The cluster under test."""

    kubeconfig: Path
    local: bool  # the project's own local cluster (simulated GPU nodes are there)
    started_here: bool  # this test session started it, so it stops it too

    def api_client(self) -> client.ApiClient:
        return config.new_client_from_config(config_file=str(self.kubeconfig))


def reachable(kubeconfig: Path) -> bool:
    try:
        api = config.new_client_from_config(config_file=str(kubeconfig))
        client.VersionApi(api).get_code(_request_timeout=5)
        return True
    except Exception:
        return False


def resolve_target() -> Target:
    """Use ``$KUBECONFIG`` when it points at a reachable cluster; else the local cluster.

    Only an explicit KUBECONFIG counts: a default ~/.kube/config is never picked up, so
    running the tests cannot touch a cluster by accident.
    """
    explicit = os.environ.get("KUBECONFIG", "")
    cluster = local.LocalCluster()
    if explicit and Path(explicit).resolve() != cluster.kubeconfig.resolve():
        path = Path(explicit)
        if not reachable(path):
            raise RuntimeError(f"KUBECONFIG={explicit} is set but its cluster is not reachable")
        return Target(path, local=False, started_here=False)
    was_running = local.healthy(cluster)
    local.up(cluster)
    return Target(cluster.kubeconfig, local=True, started_here=not was_running)
