"""``make demo``: Shoal running against a cluster, from nothing.

Uses the cluster $KUBECONFIG points at when it is reachable; otherwise starts (or
reuses) the local one. Installs the CRDs with server-side apply, then runs the operator
in the foreground until Ctrl-C. The local cluster keeps running afterwards; stop it
with ``make cluster-down``.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from e2e.cluster import local
from e2e.cluster.target import resolve_target

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    target = resolve_target()
    kubeconfig = str(target.kubeconfig)
    where = "local cluster" if target.local else "cluster from $KUBECONFIG"
    print(f"shoal demo: using the {where} ({kubeconfig})", flush=True)
    kubectl = str(local.ensure_binaries() / "kubectl")
    base = [kubectl, f"--kubeconfig={kubeconfig}"]
    crds = sorted((REPO / "crds").glob("*.shoal.dev.yaml"))
    subprocess.run(
        [*base, "apply", "--server-side", *[f"--filename={c}" for c in crds]], check=True
    )
    names = [f"crd/{c.name.removesuffix('.yaml')}" for c in crds]
    subprocess.run(
        [*base, "wait", "--for=condition=Established", "--timeout=60s", *names], check=True
    )
    # The admission policy takes TenantPools as parameters: only once their CRD is served.
    policy = REPO / "manifests" / "admission" / "admission-policy.yaml"
    subprocess.run([*base, "apply", "--server-side", f"--filename={policy}"], check=True)
    print(
        f"shoal demo: starting the operator; in another shell: export KUBECONFIG={kubeconfig}",
        flush=True,
    )
    env = dict(os.environ, KUBECONFIG=kubeconfig)
    env.setdefault("SHOAL_LIVENESS_ENDPOINT", "http://127.0.0.1:8080/healthz")
    shoal = Path(sys.executable).parent / "shoal"
    os.execve(str(shoal), [str(shoal), "run"], env)


if __name__ == "__main__":
    sys.exit(main())
