"""A real node, ``real-0``, in the local cluster beside the simulated GPU nodes.

Opt-in (``python -m e2e.cluster up --real-node``, or :func:`up` on a running cluster):
containerd (its CRI plugin running pods with runc), a kubelet registered as ``real-0``
and kube-proxy in nftables mode, all plain processes like the control plane. The node's
address is a host bridge with a private address (a kubelet refuses a loopback node IP);
the CNI bridge plugin puts the pods on that same bridge, so pods, the host and the API
server reach each other with no NAT. The API server then listens on every address and
the ``kubernetes`` Service points at the bridge address, so pods reach it too.

``real-0`` carries the label and taint ``shoal.dev/real-node``: only pods that select
it and tolerate it run there, and it is not annotated ``kwok.x-k8s.io/node=fake``, so
KWOK leaves it alone.

What this machine kind needs (cgroup v1, no CAP_SYS_RESOURCE, no registry) and which
host paths a kubelet and containerd use whatever they are told are written up in
docs/real-node.md. :func:`down` stops every process, unmounts, and removes the network
namespaces, the bridge, kube-proxy's nftables tables and those fixed host paths.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import yaml

from e2e.cluster import images, netpol
from e2e.cluster import local as local_mod
from e2e.cluster import pki as pki_mod
from e2e.cluster.local import ClusterError, LocalCluster

HERE = Path(__file__).resolve().parent
NAME = "real-0"
# The label and the NoSchedule taint (value "true") that pods meant for real-0 select
# and tolerate.
LABEL = "shoal.dev/real-node"
BRIDGE = "shoal-real0"
NODE_IP = "10.200.0.1"
POD_SUBNET = "10.200.0.0/24"
CNI_BIN_DIR = Path("/usr/lib/cni")  # Debian's containernetworking-plugins
RUNC = Path("/usr/sbin/runc")  # Debian's runc
# Stop order: what uses the runtime first.
COMPONENTS = ("kube-proxy", "kubelet", "containerd")
# Host paths the kubelet, containerd and the CNI plugins use whatever their configured
# directories (one real node per machine, therefore); down() removes them.
FIXED_PATHS = (
    Path("/var/lib/kubelet/device-plugins"),
    Path("/var/lib/kubelet/plugins_registry"),
    Path("/var/lib/kubelet/plugins"),
    Path("/var/log/containers"),
    Path("/var/lib/cni/results"),
    Path("/run/containerd"),
)
NETNS_DIR = Path("/run/netns")
_SYSCTLS = {"net/ipv4/ip_forward": "1", "net/bridge/bridge-nf-call-iptables": "1"}


def root(cluster: LocalCluster) -> Path:
    return cluster.root / NAME


def _socket(cluster: LocalCluster) -> Path:
    return root(cluster) / "containerd" / "containerd.sock"


# ---------------------------------------------------------------------------------------
# building


def ensure_binaries() -> Path:
    """Build (or find in the cache) the node's binaries; return their directory."""
    out = subprocess.run(
        [str(HERE / "build_node.sh")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return Path(out.strip().splitlines()[-1])


def _require_host_tools() -> None:
    missing = [str(p) for p in (RUNC, CNI_BIN_DIR / "bridge", CNI_BIN_DIR / "host-local")]
    missing = [p for p in missing if not Path(p).exists()]
    if missing or not images.BUSYBOX.exists() or shutil.which("nft") is None:
        raise ClusterError(
            f"the real node needs Debian's runc, containernetworking-plugins, busybox-static "
            f"and nftables (make system-deps); missing: {missing or 'busybox or nft'}"
        )
    if os.geteuid() != 0:
        raise ClusterError("the real node needs root (a kubelet and containerd run as root)")


# ---------------------------------------------------------------------------------------
# configuration files


def _containerd_config(cluster: LocalCluster) -> str:
    r = root(cluster) / "containerd"
    socket = _socket(cluster)
    return f"""version = 3
root = "{r / "root"}"
state = "{r / "state"}"

[grpc]
  address = "{socket}"
[ttrpc]
  address = "{socket}.ttrpc"
[metrics]
  address = ""

[plugins."io.containerd.nri.v1.nri"]
  disable = true

[plugins."io.containerd.cri.v1.runtime"]
  # runc cannot lower oom_score_adj without CAP_SYS_RESOURCE, which root lacks on
  # these machines: clamp negative scores to containerd's own.
  restrict_oom_score_adj = true
  enable_selinux = false
  disable_apparmor = true
  [plugins."io.containerd.cri.v1.runtime".containerd]
    default_runtime_name = "runc"
    [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.cri.v1.runtime".containerd.runtimes.runc.options]
        BinaryName = "{RUNC}"
        Root = "{r / "runc"}"
        SystemdCgroup = false
  [plugins."io.containerd.cri.v1.runtime".cni]
    bin_dirs = ["{CNI_BIN_DIR}"]
    conf_dir = "{root(cluster) / "cni"}"

[plugins."io.containerd.cri.v1.images"]
  snapshotter = "overlayfs"
  [plugins."io.containerd.cri.v1.images".pinned_images]
    sandbox = "{images.PAUSE_IMAGE}"

[plugins."io.containerd.grpc.v1.cri"]
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
"""


def _cni_config(cluster: LocalCluster) -> dict[str, object]:
    return {
        "cniVersion": "1.0.0",
        "name": "shoal-real-node",
        "plugins": [
            {
                "type": "bridge",
                "bridge": BRIDGE,
                "isGateway": True,
                "ipMasq": False,
                # A pod reaching a Service may be sent back to itself.
                "hairpinMode": True,
                "ipam": {
                    "type": "host-local",
                    "ranges": [
                        [
                            {
                                "subnet": POD_SUBNET,
                                "rangeStart": "10.200.0.10",
                                "rangeEnd": "10.200.0.250",
                                "gateway": NODE_IP,
                            }
                        ]
                    ],
                    "routes": [{"dst": "0.0.0.0/0"}],
                    "dataDir": str(root(cluster) / "ipam"),
                },
            }
        ],
    }


def _kubelet_config(cluster: LocalCluster, ports: dict[str, int]) -> dict[str, object]:
    p = cluster.pki
    r = root(cluster)
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        # The host has cgroup v1, which a kubelet >= 1.35 refuses unless told.
        "failCgroupV1": False,
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        "containerRuntimeEndpoint": f"unix://{_socket(cluster)}",
        "address": NODE_IP,
        "port": ports["kubelet"],
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": ports["kubelet_healthz"],
        "tlsCertFile": str(p.cert("kubelet-serving")),
        "tlsPrivateKeyFile": str(p.key("kubelet-serving")),
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": True},
            "x509": {"clientCAFile": str(p.cert("ca"))},
        },
        "authorization": {"mode": "Webhook"},
        "podLogsDir": str(r / "pod-logs"),
        "registerWithTaints": [{"key": LABEL, "value": "true", "effect": "NoSchedule"}],
        "maxPods": 30,
        # A shared disk: evict only when it is really full.
        "evictionHard": {
            "memory.available": "100Mi",
            "nodefs.available": "1%",
            "imagefs.available": "1%",
        },
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "serializeImagePulls": False,
        "nodeStatusUpdateFrequency": "5s",
        # No iptables chains of the kubelet's own (a localnet firewall, canaries): kube-
        # proxy in nftables mode needs none, and the host's rules stay the host's.
        "makeIPTablesUtilChains": False,
    }


def _kube_proxy_config(cluster: LocalCluster, ports: dict[str, int]) -> dict[str, object]:
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "mode": "nftables",
        "clientConnection": {"kubeconfig": str(cluster.root / "kube-proxy.kubeconfig")},
        "hostnameOverride": NAME,
        "clusterCIDR": POD_SUBNET,
        "healthzBindAddress": f"127.0.0.1:{ports['kube_proxy_healthz']}",
        "metricsBindAddress": f"127.0.0.1:{ports['kube_proxy_metrics']}",
        "nodePortAddresses": [f"{NODE_IP}/32"],
        # Leave the host's conntrack settings as they are.
        "conntrack": {
            "maxPerCore": 0,
            "min": 0,
            "tcpEstablishedTimeout": "0s",
            "tcpCloseWaitTimeout": "0s",
        },
    }


def _write_identities(cluster: LocalCluster, state: local_mod.ClusterState) -> None:
    """The node's certificates (signed by the cluster CA) and kubeconfigs."""
    pki = cluster.pki
    pki_mod.issue_client(pki, "kubelet-real-0", f"system:node:{NAME}", ["system:nodes"])
    pki_mod.issue_client(pki, "kube-proxy", "system:kube-proxy", [])
    pki_mod.issue_serving(pki, "kubelet-serving", [NAME, NODE_IP])
    for user in ("kubelet-real-0", "kube-proxy"):
        path = cluster.root / f"{user}.kubeconfig"
        config = local_mod._kubeconfig(cluster, state, user)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)


# ---------------------------------------------------------------------------------------
# host networking


def _run(*argv: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, check=check, capture_output=True, text=True)


def _bridge_up() -> None:
    if _run("ip", "link", "show", BRIDGE, check=False).returncode != 0:
        _run("ip", "link", "add", BRIDGE, "type", "bridge")
    _run("ip", "addr", "replace", f"{NODE_IP}/24", "dev", BRIDGE)
    _run("ip", "link", "set", BRIDGE, "up")


# Chains a kubelet creates in the iptables tables (per family), and the built-in chains
# that jump to them.
_KUBELET_CHAINS = {
    "filter": ("KUBE-FIREWALL", "KUBE-KUBELET-CANARY"),
    "nat": ("KUBE-KUBELET-CANARY",),
    "mangle": ("KUBE-IPTABLES-HINT", "KUBE-KUBELET-CANARY"),
}
_JUMPS = (("filter", "INPUT", "KUBE-FIREWALL"), ("filter", "OUTPUT", "KUBE-FIREWALL"))


def _remove_iptables_chains() -> None:
    """Remove the kubelet's iptables chains (if it made any), then the iptables tables
    left holding nothing but empty built-in chains that accept everything."""
    for tool, family in (("iptables", "ip"), ("ip6tables", "ip6")):
        if shutil.which(tool) is None:
            continue
        for table, chain, target in _JUMPS:
            while _run(tool, "-t", table, "-D", chain, "-j", target, check=False).returncode == 0:
                pass
        for table, chains in _KUBELET_CHAINS.items():
            for chain in chains:
                _run(tool, "-t", table, "-F", chain, check=False)
                _run(tool, "-t", table, "-X", chain, check=False)
            listed = _run("nft", "-j", "list", "table", family, table, check=False)
            if listed.returncode != 0:
                continue
            items = json.loads(listed.stdout).get("nftables", [])
            chains_ = [i["chain"] for i in items if "chain" in i]
            empty = not any("rule" in i or "set" in i or "map" in i for i in items) and all(
                c.get("hook") and c.get("policy", "accept") == "accept" for c in chains_
            )
            if empty:
                _run("nft", "delete", "table", family, table, check=False)


def _set_sysctls(cluster: LocalCluster) -> None:
    """Routing between pods (through a Service) and bridged replies through conntrack;
    the previous values are kept for down()."""
    saved_file = root(cluster) / "sysctls.json"
    saved = json.loads(saved_file.read_text()) if saved_file.exists() else {}
    for key, value in _SYSCTLS.items():
        path = Path("/proc/sys") / key
        if not path.exists() and key.startswith("net/bridge"):
            _run("modprobe", "br_netfilter", check=False)
        saved.setdefault(key, path.read_text().strip())
        path.write_text(value)
    saved_file.write_text(json.dumps(saved))


def _restore_sysctls(cluster: LocalCluster) -> None:
    saved_file = root(cluster) / "sysctls.json"
    if not saved_file.exists():
        return
    for key, value in json.loads(saved_file.read_text()).items():
        with contextlib.suppress(OSError):
            (Path("/proc/sys") / key).write_text(value)


# ---------------------------------------------------------------------------------------
# lifecycle


def ready(cluster: LocalCluster) -> bool:
    """True when the node's processes live and real-0 is Ready."""
    state = cluster.read_state()
    if state is None or set(state.node_pids) != set(COMPONENTS):
        return False
    if not all(local_mod._alive(pid) for pid in state.node_pids.values()):
        return False
    try:
        with local_mod._admin_client(cluster, state) as client:
            node = client.get(f"/api/v1/nodes/{NAME}")
    except (httpx.HTTPError, OSError):
        return False
    if node.status_code != 200:
        return False
    conditions = node.json().get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


def _spawn(
    cluster: LocalCluster, state: local_mod.ClusterState, name: str, argv: list[str], bin_dir: Path
) -> None:
    log = (cluster.logs / f"{name}.log").open("ab")
    env = dict(os.environ, PATH=f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin")
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=root(cluster),
        env=env,
        start_new_session=True,
    )
    log.close()
    state.node_pids[name] = proc.pid
    cluster.write_state(state)


def _restart_apiserver_for_node(cluster: LocalCluster, state: local_mod.ClusterState) -> None:
    """The API server listens on every address (pods reach it on the bridge) and reaches
    kubelets with its own client certificate; a cluster started without the real node
    gets its API server restarted once with those flags."""
    if state.real_node:
        return
    state.real_node = True
    cluster.write_state(state)
    local_mod._stop_pid(state.pids["kube-apiserver"], grace=10.0)
    local_mod.start(cluster, "kube-apiserver")


def _kubernetes_endpoints(cluster: LocalCluster, state: local_mod.ClusterState) -> None:
    """Point the ``kubernetes`` Service at the API server's bridge address (the API
    server's own endpoint reconciler is off: with no real node, it would advertise
    127.0.0.1)."""
    slice_ = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": "kubernetes",
            "namespace": "default",
            "labels": {
                "kubernetes.io/service-name": "kubernetes",
                "endpointslice.kubernetes.io/managed-by": "real-node.shoal.dev",
            },
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": [NODE_IP], "conditions": {"ready": True}}],
        "ports": [{"name": "https", "port": state.ports["apiserver"], "protocol": "TCP"}],
    }
    path = "/apis/discovery.k8s.io/v1/namespaces/default/endpointslices/kubernetes"
    with local_mod._admin_client(cluster, state) as client:
        r = client.patch(
            f"{path}?fieldManager=shoal-real-node&force=true",
            content=json.dumps(slice_),
            headers={"Content-Type": "application/apply-patch+yaml"},
        )
        if r.status_code >= 400:
            raise ClusterError(f"endpoints of the kubernetes Service: {r.status_code} {r.text}")


def import_archives(
    cluster: LocalCluster, archives: list[Path], bin_dir: Path | None = None
) -> None:
    """Import image archives (OCI layouts or docker-archives, named inside) into the
    node's containerd, where the kubelet finds them by name."""
    ctr = (bin_dir or ensure_binaries()) / "ctr"
    for archive in archives:
        _run(
            str(ctr),
            f"--address={_socket(cluster)}",
            "--namespace=k8s.io",
            "images",
            "import",
            "--platform=linux/amd64",
            str(archive),
        )


def _import_images(cluster: LocalCluster, bin_dir: Path) -> list[str]:
    name, busybox = images.busybox_image()
    import_archives(cluster, [images.pause_image(), busybox], bin_dir)
    return [images.PAUSE_IMAGE, name]


def up(cluster: LocalCluster, *, timeout: float = 120.0) -> str:
    """Start real-0 on the running cluster (or find it Ready); return the test image's
    name (imported into the node's containerd)."""
    if ready(cluster):
        # Idempotent, and an image rebuilt since the node started replaces the old one.
        return _import_images(cluster, ensure_binaries())[1]
    state = cluster.read_state()
    if state is None or not local_mod.healthy(cluster):
        raise ClusterError(f"no healthy cluster is running in {cluster.root}: start it first")
    _require_host_tools()
    stop(cluster)
    state = cluster.read_state()
    assert state is not None
    bin_dir = ensure_binaries()
    r = root(cluster)
    for d in ("containerd", "cni", "ipam", "kubelet", "pod-logs"):
        (r / d).mkdir(parents=True, exist_ok=True)
    ports = {
        n: local_mod.free_port()
        for n in ("kubelet", "kubelet_healthz", "kube_proxy_healthz", "kube_proxy_metrics")
    }
    state.node_ports = ports
    cluster.write_state(state)
    _write_identities(cluster, state)
    (r / "containerd" / "config.toml").write_text(_containerd_config(cluster))
    (r / "cni" / "10-shoal-real-node.conflist").write_text(json.dumps(_cni_config(cluster)))
    (r / "kubelet-config.yaml").write_text(yaml.safe_dump(_kubelet_config(cluster, ports)))
    (r / "kube-proxy-config.yaml").write_text(yaml.safe_dump(_kube_proxy_config(cluster, ports)))

    try:
        _bridge_up()
        _set_sysctls(cluster)
        _restart_apiserver_for_node(cluster, state)
        state = cluster.read_state()
        assert state is not None
        _kubernetes_endpoints(cluster, state)
        _spawn(
            cluster,
            state,
            "containerd",
            [str(bin_dir / "containerd"), f"--config={r / 'containerd' / 'config.toml'}"],
            bin_dir,
        )
        local_mod._wait(
            "containerd",
            lambda: (
                _run(
                    str(bin_dir / "ctr"), f"--address={_socket(cluster)}", "version", check=False
                ).returncode
                == 0
            ),
            timeout,
            cluster.logs / "containerd.log",
        )
        image = _import_images(cluster, bin_dir)[1]
        _spawn(
            cluster,
            state,
            "kubelet",
            [
                str(bin_dir / "kubelet"),
                f"--config={r / 'kubelet-config.yaml'}",
                f"--kubeconfig={cluster.root / 'kubelet-real-0.kubeconfig'}",
                f"--root-dir={r / 'kubelet'}",
                f"--cert-dir={r / 'kubelet' / 'pki'}",
                f"--hostname-override={NAME}",
                f"--node-ip={NODE_IP}",
                f"--node-labels={LABEL}=true",
                "--v=1",
            ],
            bin_dir,
        )
        _spawn(
            cluster,
            state,
            "kube-proxy",
            [str(bin_dir / "kube-proxy"), f"--config={r / 'kube-proxy-config.yaml'}", "--v=1"],
            bin_dir,
        )
        local_mod._wait(
            f"{NAME} Ready", lambda: ready(cluster), timeout, cluster.logs / "kubelet.log"
        )
        local_mod._wait(
            "kube-proxy healthy",
            lambda: (
                httpx.get(
                    f"http://127.0.0.1:{ports['kube_proxy_healthz']}/healthz", timeout=2
                ).status_code
                == 200
            ),
            timeout,
            cluster.logs / "kube-proxy.log",
        )
    except BaseException:
        stop(cluster)
        raise
    return image


# ---------------------------------------------------------------------------------------
# teardown


def _mounts_under(prefixes: list[Path]) -> list[str]:
    points = []
    for line in Path("/proc/self/mountinfo").read_text().splitlines():
        point = line.split()[4].replace("\\040", " ")
        if any(point == str(p) or point.startswith(f"{p}/") for p in prefixes):
            points.append(point)
    return points


def _pids_of(cluster: LocalCluster) -> Iterator[int]:
    """Processes of this node that are not its three daemons: containerd's shims (they
    name our containerd's socket) and everything in the kubelet's pod cgroups."""
    socket = str(_socket(cluster))
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            if "containerd-shim" in cmdline and socket in cmdline:
                yield int(entry.name)
    for kubepods in pod_cgroups()[:1]:
        for procs in kubepods.rglob("cgroup.procs"):
            with contextlib.suppress(OSError):
                yield from (int(p) for p in procs.read_text().split())


def pod_cgroups() -> list[Path]:
    """The kubelet's cgroupfs hierarchies (``kubepods``): on cgroup v1 one per
    controller, the pids controller's first (it holds every pod process); on v2 one."""
    base = Path("/sys/fs/cgroup")
    candidates = [base / "pids" / "kubepods", base / "kubepods"]
    if base.exists():
        candidates += sorted(c / "kubepods" for c in base.iterdir() if c.name != "pids")
    return [c for c in dict.fromkeys(candidates) if c.is_dir()]


def _remove_pod_cgroups() -> None:
    """The kubelet's cgroup hierarchies, deepest first, once empty."""
    for top in pod_cgroups():
        for d in sorted((p for p in top.rglob("*") if p.is_dir()), key=lambda p: -len(p.parts)):
            with contextlib.suppress(OSError):
                d.rmdir()
        with contextlib.suppress(OSError):
            top.rmdir()


def stop(cluster: LocalCluster) -> None:
    """Stop real-0 and undo everything it did to the host; the cluster keeps running.
    A cluster that never had one is left alone (the host paths may be another's)."""
    state = cluster.read_state()
    r = root(cluster)
    if not r.exists() and not (state and state.node_pids):
        return
    netpol.clean(cluster)
    if state is not None:
        for name in COMPONENTS:
            pid = state.node_pids.get(name)
            if pid:
                local_mod._stop_pid(pid, grace=10.0)
        state.node_pids = {}
        cluster.write_state(state)
        # A Node left behind would read Ready until the controller-manager's grace
        # period runs out, and a next start could take it for the new kubelet's.
        with (
            contextlib.suppress(httpx.HTTPError, OSError),
            local_mod._admin_client(cluster, state) as client,
        ):
            client.delete(f"/api/v1/nodes/{NAME}")
    for _ in range(3):
        pids = set(_pids_of(cluster))
        if not pids:
            break
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(0.2)
    netns = sorted(NETNS_DIR.glob("cni-*")) if NETNS_DIR.exists() else []
    for point in reversed(_mounts_under([r, *FIXED_PATHS, *netns])):
        _run("umount", "--lazy", point, check=False)
    for ns in netns:
        with contextlib.suppress(OSError):
            ns.unlink()
    with contextlib.suppress(OSError):
        NETNS_DIR.rmdir()  # only when empty (containerd creates it)
    _remove_pod_cgroups()
    _run("ip", "link", "delete", BRIDGE, check=False)
    for family in ("ip", "ip6"):
        _run("nft", "delete", "table", family, "kube-proxy", check=False)
    _remove_iptables_chains()
    if r.exists():
        _restore_sysctls(cluster)
    for path in FIXED_PATHS:
        shutil.rmtree(path, ignore_errors=True)
    for parent in (Path("/var/lib/kubelet"), Path("/var/lib/cni")):
        with contextlib.suppress(OSError):
            parent.rmdir()  # only when we left it empty
    shutil.rmtree(r, ignore_errors=True)
