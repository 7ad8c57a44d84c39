"""NetworkPolicy enforcement on the local cluster's real node: kube-router's network
policy controller alone (no routing, no service proxy), built from its Go module.

It programs iptables (here Debian's iptables-nft) and ipsets for the policies that
select pods on real-0; bridged pod-to-pod traffic passes iptables through
br_netfilter. kube-network-policies, the other engine built from a Go module here,
needs nftables' queue statement, which this kernel lacks (CONFIG_NFT_QUEUE).

kube-router's own ``--cleanup-config`` leaves its chains and sets in place on
iptables-nft, so :func:`clean` removes them by name: the host is left as it was.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from e2e.cluster import local
from e2e.cluster.local import LocalCluster, ensure_tool, free_port
from e2e.process import wait_http

TOOL_DIR = "netpol"
PACKAGE = "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router"
NAME = "kube-router"
# The chains and sets kube-router makes: its hooks, one chain per policy and per pod,
# and the source and destination sets of the policies.
CHAINS = re.compile(r"^KUBE-(ROUTER-|NWPLCY-|POD-FW-)")
SETS = re.compile(r"^(KUBE-(SRC|DST)-|kube-router-)")


def pid_file(cluster: LocalCluster) -> Path:
    return cluster.root / "kube-router.pid"


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, capture_output=True, text=True, check=False)


@contextmanager
def enforcing(cluster: LocalCluster, node: str) -> Iterator[None]:
    """kube-router enforcing NetworkPolicies for the pods on ``node`` while the block
    runs; every rule and set it made is gone afterwards."""
    if shutil.which("ipset") is None:
        raise local.ClusterError("kube-router needs Debian's ipset (make system-deps)")
    binary = ensure_tool(TOOL_DIR, PACKAGE, NAME)
    health = free_port()
    log_path = cluster.logs / "kube-router.log"
    log = log_path.open("ab")
    offset = log.tell()
    proc = subprocess.Popen(
        [
            str(binary),
            f"--kubeconfig={cluster.kubeconfig}",
            f"--hostname-override={node}",
            "--run-firewall=true",
            "--run-router=false",
            "--run-service-proxy=false",
            "--enable-cni=false",
            "--enable-ipv6=false",
            f"--health-port={health}",
            "--metrics-port=0",
            # Its "sync iptables took" lines (verbosity 1) say when the rules are in.
            "-v=1",
        ],
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    log.close()
    pid_file(cluster).write_text(str(proc.pid))
    try:
        wait_http(f"http://127.0.0.1:{health}/healthz", NAME, proc, log_path)
        _wait_synced(log_path, offset)
        yield
    finally:
        clean(cluster)


def _wait_synced(log: Path, offset: int, timeout: float = 60) -> None:
    """Until kube-router has written the rules of every policy once (it reports healthy
    before its first full sync)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with log.open("rb") as f:
            f.seek(offset)
            if b"sync iptables took" in f.read():
                return
        time.sleep(0.2)
    raise local.ClusterError(f"kube-router did not sync its rules within {timeout:.0f} s")


def clean(cluster: LocalCluster) -> None:
    """Stop kube-router if it runs for ``cluster``, then remove its iptables hooks,
    chains and ipsets."""
    path = pid_file(cluster)
    if path.exists():
        local._stop_pid(int(path.read_text()), grace=10.0)
        path.unlink()
    if shutil.which("iptables") is None:
        return
    rules = _run("iptables", "-t", "filter", "-S").stdout.splitlines()
    chains = [line.split()[1] for line in rules if line.startswith("-N ")]
    ours = [c for c in chains if CHAINS.match(c)]
    for line in rules:
        parts = shlex.split(line)
        if parts[:1] == ["-A"] and parts[1] not in ours and any(p in ours for p in parts):
            _run("iptables", "-t", "filter", "-D", *parts[1:])
    for chain in ours:
        _run("iptables", "-t", "filter", "-F", chain)
    for chain in ours:
        _run("iptables", "-t", "filter", "-X", chain)
    if shutil.which("ipset") is not None:
        for name in _run("ipset", "list", "-n").stdout.split():
            if SETS.match(name):
                _run("ipset", "destroy", name)
