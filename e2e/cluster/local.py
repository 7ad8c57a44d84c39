"""A real Kubernetes control plane on 127.0.0.1, without containers.

etcd, kube-apiserver, kube-controller-manager and kube-scheduler run as plain processes
built from upstream Go modules (see build.sh); KWOK stands in for the kubelets, which
need a container runtime these machines do not have: it keeps simulated nodes (GPU
nodes among them) Ready and marks the pods the real scheduler binds to them Running.
Nothing else is faked: admission, RBAC, quota, garbage collection, Deployments and the
HPA controller are the real ones.

The cluster lives in one state directory (default ``.dev-cluster/``): certificates,
kubeconfigs, etcd data, logs and ``state.json`` with the ports and process ids, so a
later ``up`` can reuse a running cluster and ``down`` can stop every process it
started.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

import httpx
import yaml

from e2e.cluster import pki as pki_mod

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parent.parent
DEFAULT_STATE_DIR = REPO_ROOT / ".dev-cluster"
NODES_MANIFEST = HERE / "nodes.yaml"

# How often the HPA controller evaluates: 5s here so autoscaling tests take seconds,
# not minutes (upstream default 15s; override with SHOAL_HPA_SYNC_PERIOD).
HPA_SYNC_PERIOD = os.environ.get("SHOAL_HPA_SYNC_PERIOD", "5s")
CLIENT_RATE_FLAGS = ("--kube-api-qps=200", "--kube-api-burst=400")
# Stop order: dependents first, storage last.
_COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


class ClusterError(RuntimeError):
    """The local cluster could not be started, or a component died."""


@dataclass
class ClusterState:
    """What ``state.json`` records about a running local cluster."""

    bin_dir: str
    ports: dict[str, int]
    pids: dict[str, int] = field(default_factory=dict)
    started_at: float = 0.0
    # The real node (node.py): whether the API server runs with its flags, the node's
    # process ids and ports.
    real_node: bool = False
    node_pids: dict[str, int] = field(default_factory=dict)
    node_ports: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class LocalCluster:
    """Paths and state of one local cluster."""

    root: Path = DEFAULT_STATE_DIR
    # An API server audit policy: the control-plane benchmark counts the operator's
    # writes as the API server saw them, in logs/audit.log.
    audit_policy: Path | None = None
    # How often the HPA controller evaluates every HPA (see HPA_SYNC_PERIOD).
    hpa_sync_period: str = HPA_SYNC_PERIOD

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def state_file(self) -> Path:
        return self.root / "state.json"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def pki(self) -> pki_mod.Pki:
        return pki_mod.Pki(self.root / "pki")

    def read_state(self) -> ClusterState | None:
        try:
            return ClusterState(**json.loads(self.state_file.read_text()))
        except (FileNotFoundError, json.JSONDecodeError, TypeError):
            return None

    def write_state(self, state: ClusterState) -> None:
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(asdict(state), indent=2))
        tmp.replace(self.state_file)

    def api_url(self, state: ClusterState) -> str:
        return f"https://127.0.0.1:{state.ports['apiserver']}"


# ---------------------------------------------------------------------------------------
# small helpers


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours still answers kill(0); reap it if it is one.
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        # Another process's child (the API server the tier runner started, stopped by
        # a test session): a zombie its parent has yet to reap has exited all the same.
        return not _zombie(pid)
    return done == 0


def _zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # gone meanwhile
    return stat.rsplit(")", 1)[-1].split()[0] == "Z"


def _admin_client(cluster: LocalCluster, state: ClusterState, timeout: float = 5.0) -> httpx.Client:
    ctx = ssl.create_default_context(cafile=str(cluster.pki.cert("ca")))
    ctx.load_cert_chain(str(cluster.pki.cert("admin")), str(cluster.pki.key("admin")))
    return httpx.Client(base_url=cluster.api_url(state), verify=ctx, timeout=timeout)


def admin_client(cluster: LocalCluster, timeout: float = 30.0) -> httpx.Client:
    """An HTTP client on the running cluster's API server, as cluster-admin."""
    state = cluster.read_state()
    if state is None:
        raise ClusterError(f"no cluster is running in {cluster.root}")
    return _admin_client(cluster, state, timeout)


def _wait(what: str, check: Callable[[], bool], timeout: float, log: Path | None = None) -> None:
    """Poll ``check()`` until it is truthy; on timeout, show the component's log tail."""
    deadline = time.monotonic() + timeout
    last_error = ""
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except ClusterError:
            raise
        except Exception as exc:
            last_error = f"{type(exc).__name__}: {exc}"
        time.sleep(0.25)
    tail = ""
    if log and log.exists():
        tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
    raise ClusterError(f"timed out after {timeout:.0f}s waiting for {what}. {last_error}\n{tail}")


def _kubeconfig(cluster: LocalCluster, state: ClusterState, user: str) -> dict[str, object]:
    p = cluster.pki
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "shoal-local",
                "cluster": {
                    "server": cluster.api_url(state),
                    "certificate-authority": str(p.cert("ca")),
                },
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(p.cert(user)),
                    "client-key": str(p.key(user)),
                },
            }
        ],
        "contexts": [{"name": "shoal-local", "context": {"cluster": "shoal-local", "user": user}}],
        "current-context": "shoal-local",
    }


def _write_kubeconfigs(cluster: LocalCluster, state: ClusterState) -> None:
    for user in pki_mod.CLIENTS:
        path = cluster.kubeconfig if user == "admin" else cluster.root / f"{user}.kubeconfig"
        path.write_text(yaml.safe_dump(_kubeconfig(cluster, state, user), sort_keys=False))
        path.chmod(0o600)


# ---------------------------------------------------------------------------------------
# component command lines


def _audit_flags(cluster: LocalCluster) -> list[str]:
    if cluster.audit_policy is None:
        return []
    return [
        f"--audit-policy-file={cluster.audit_policy}",
        f"--audit-log-path={cluster.logs / 'audit.log'}",
        "--audit-log-format=json",
        "--audit-log-maxbackup=0",
    ]


def _real_node_flags(cluster: LocalCluster, state: ClusterState) -> list[str]:
    """The API server's flags once the cluster has a real node: listen where pods reach
    it (the node's bridge; 127.0.0.1 stays served) and reach the kubelet for logs and
    exec with a client certificate, checking the kubelet's serving certificate."""
    if not state.real_node:
        return []
    from e2e.cluster import node  # here: node.py imports this module

    p = cluster.pki
    return [
        "--bind-address=0.0.0.0",
        f"--advertise-address={node.NODE_IP}",
        f"--kubelet-client-certificate={p.cert('apiserver-kubelet-client')}",
        f"--kubelet-client-key={p.key('apiserver-kubelet-client')}",
        f"--kubelet-certificate-authority={p.cert('ca')}",
        "--kubelet-preferred-address-types=InternalIP,Hostname",
    ]


def _commands(cluster: LocalCluster, state: ClusterState) -> dict[str, list[str]]:
    b = Path(state.bin_dir)
    p = cluster.pki
    port = state.ports
    root = cluster.root
    etcd_url = f"http://127.0.0.1:{port['etcd']}"
    peer_url = f"http://127.0.0.1:{port['etcd_peer']}"
    cm_kubeconfig = str(root / "controller-manager.kubeconfig")
    sched_kubeconfig = str(root / "scheduler.kubeconfig")
    return {
        "etcd": [
            str(b / "etcd"),
            "--name=default",
            f"--data-dir={root / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls={peer_url}",
            f"--initial-advertise-peer-urls={peer_url}",
            f"--initial-cluster=default={peer_url}",
            "--listen-metrics-urls=",
            # A disposable test cluster: durability buys nothing, fsync costs seconds.
            "--unsafe-no-fsync",
            "--log-level=warn",
        ],
        "kube-apiserver": [
            str(b / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={port['apiserver']}",
            f"--cert-dir={root / 'apiserver-certs'}",
            f"--tls-cert-file={p.cert('apiserver')}",
            f"--tls-private-key-file={p.key('apiserver')}",
            f"--client-ca-file={p.cert('ca')}",
            f"--service-account-key-file={p.service_account_pub}",
            f"--service-account-signing-key-file={p.service_account_key}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            "--authorization-mode=Node,RBAC",
            f"--service-cluster-ip-range={pki_mod.SERVICE_CIDR}",
            # No kubelets: the `kubernetes` Service must not advertise 127.0.0.1.
            "--endpoint-reconciler-type=none",
            "--allow-privileged=false",
            # API aggregation, for metrics adapters registered as APIServices.
            f"--requestheader-client-ca-file={p.cert('front-proxy-ca')}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={p.cert('front-proxy-client')}",
            f"--proxy-client-key-file={p.key('front-proxy-client')}",
            "--profiling=false",
            "--v=1",
            *_audit_flags(cluster),
            # Later flags win: these replace the loopback bind and advertise addresses.
            *_real_node_flags(cluster, state),
        ],
        "kube-controller-manager": [
            str(b / "kube-controller-manager"),
            f"--kubeconfig={cm_kubeconfig}",
            f"--authentication-kubeconfig={cm_kubeconfig}",
            f"--authorization-kubeconfig={cm_kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port['controller_manager']}",
            f"--cert-dir={root / 'controller-manager-certs'}",
            "--leader-elect=false",
            f"--root-ca-file={p.cert('ca')}",
            f"--service-account-private-key-file={p.service_account_key}",
            # Each controller acts as its own service account, as on a kubeadm cluster.
            "--use-service-account-credentials=true",
            f"--cluster-signing-cert-file={p.cert('ca')}",
            f"--cluster-signing-key-file={p.key('ca')}",
            f"--service-cluster-ip-range={pki_mod.SERVICE_CIDR}",
            f"--horizontal-pod-autoscaler-sync-period={cluster.hpa_sync_period}",
            # Client rate limits as large clusters set them (upstream defaults 20/30):
            # at the defaults a thousand Deployments take minutes to get their pods, and
            # the controller-manager, not what is under test, sets the pace.
            *CLIENT_RATE_FLAGS,
            "--profiling=false",
            "--v=1",
        ],
        "kube-scheduler": [
            str(b / "kube-scheduler"),
            f"--kubeconfig={sched_kubeconfig}",
            f"--authentication-kubeconfig={sched_kubeconfig}",
            f"--authorization-kubeconfig={sched_kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={port['scheduler']}",
            f"--cert-dir={root / 'scheduler-certs'}",
            "--leader-elect=false",
            *CLIENT_RATE_FLAGS,
            "--profiling=false",
            "--v=1",
        ],
        # KWOK plays the kubelet of every node annotated kwok.x-k8s.io/node=fake. It has
        # the admin identity: the Node authorizer would otherwise need one certificate
        # per simulated node.
        "kwok": [
            str(b / "kwok"),
            f"--kubeconfig={cluster.kubeconfig}",
            f"--config={b / 'kwok-stages.yaml'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--node-lease-duration-seconds=40",
            "--cidr=10.244.0.0/16",
            "--node-ip=10.240.0.1",
            f"--server-address=127.0.0.1:{port['kwok']}",
        ],
    }


# ---------------------------------------------------------------------------------------
# lifecycle


def ensure_binaries() -> Path:
    """Build (or find in the cache) every binary; return their directory."""
    out = subprocess.run(
        [str(HERE / "build.sh")], check=True, stdout=subprocess.PIPE, text=True
    ).stdout
    return Path(out.strip().splitlines()[-1])


def ensure_tool(directory: str, package: str, name: str = "") -> Path:
    """Build (or find in the cache) one test tool from its module under tools/; return
    the binary's path."""
    out = subprocess.run(
        [str(HERE / "build_tool.sh"), directory, package, *([name] if name else [])],
        check=True,
        stdout=subprocess.PIPE,
        text=True,
    ).stdout
    return Path(out.strip().splitlines()[-1])


def healthy(cluster: LocalCluster) -> bool:
    """True when every recorded process lives and the API server is ready."""
    state = cluster.read_state()
    if state is None or set(state.pids) != set(_COMPONENTS):
        return False
    if not all(_alive(pid) for pid in state.pids.values()):
        return False
    try:
        with _admin_client(cluster, state) as client:
            return client.get("/readyz").status_code == 200
    except (httpx.HTTPError, OSError, ssl.SSLError):
        return False


def _spawn(cluster: LocalCluster, state: ClusterState, name: str, argv: Sequence[str]) -> None:
    log = (cluster.logs / f"{name}.log").open("ab")
    proc = subprocess.Popen(
        list(argv),
        stdin=subprocess.DEVNULL,
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=cluster.root,
        # Its own session: the cluster outlives the `up` command and is stopped by pid.
        start_new_session=True,
    )
    log.close()
    state.pids[name] = proc.pid
    cluster.write_state(state)


def _https_ok(url: str) -> bool:
    # Components' own serving certificates are self-signed; only liveness matters here.
    return httpx.get(url, verify=False, timeout=2).status_code == 200


def _kubectl(state: ClusterState, cluster: LocalCluster, *args: str) -> str:
    return subprocess.run(
        [str(Path(state.bin_dir) / "kubectl"), f"--kubeconfig={cluster.kubeconfig}", *args],
        check=True,
        capture_output=True,
        text=True,
    ).stdout


def _nodes_ready(cluster: LocalCluster, state: ClusterState) -> bool:
    with _admin_client(cluster, state) as client:
        items = client.get("/api/v1/nodes").json()["items"]
    expected = {d["metadata"]["name"] for d in yaml.safe_load_all(NODES_MANIFEST.read_text()) if d}
    ready = {
        n["metadata"]["name"]
        for n in items
        if any(
            c["type"] == "Ready" and c["status"] == "True"
            for c in n.get("status", {}).get("conditions", [])
        )
    }
    return expected <= ready


def _default_service_account(cluster: LocalCluster, state: ClusterState) -> bool:
    with _admin_client(cluster, state) as client:
        return client.get("/api/v1/namespaces/default/serviceaccounts/default").status_code == 200


def up(
    cluster: LocalCluster | None = None, *, timeout: float = 120.0, real_node: bool = False
) -> LocalCluster:
    """Start the cluster, or reuse it when one is already running in the state dir.

    ``real_node``: also start the real node ``real-0`` (node.py), on a reused cluster too.
    """
    cluster = cluster or LocalCluster()
    if healthy(cluster):
        if real_node:
            _real_node_up(cluster)
        return cluster
    down(cluster)  # clear whatever a crashed run left behind

    bin_dir = ensure_binaries()
    cluster.root.mkdir(parents=True, exist_ok=True)
    cluster.logs.mkdir(exist_ok=True)
    pki_mod.generate(cluster.pki.root)
    names = ("etcd", "etcd_peer", "apiserver", "controller_manager", "scheduler", "kwok")
    state = ClusterState(
        bin_dir=str(bin_dir),
        ports={name: free_port() for name in names},
        started_at=time.time(),
        # Started with the real node's API server flags, it needs no restart for it.
        real_node=real_node,
    )
    cluster.write_state(state)
    _write_kubeconfigs(cluster, state)
    commands = _commands(cluster, state)

    def check_alive() -> None:
        for name, pid in state.pids.items():
            if not _alive(pid):
                log = cluster.logs / f"{name}.log"
                tail = "\n".join(log.read_text(errors="replace").splitlines()[-30:])
                raise ClusterError(f"{name} exited during start-up:\n{tail}")

    def ready(check: Callable[[], bool]) -> Callable[[], bool]:
        def probe() -> bool:
            check_alive()
            return check()

        return probe

    try:
        _spawn(cluster, state, "etcd", commands["etcd"])
        _wait(
            "etcd",
            ready(
                lambda: (
                    httpx.get(f"http://127.0.0.1:{state.ports['etcd']}/health", timeout=2).json()[
                        "health"
                    ]
                    == "true"
                )
            ),
            timeout,
            cluster.logs / "etcd.log",
        )
        _spawn(cluster, state, "kube-apiserver", commands["kube-apiserver"])

        def apiserver_ready() -> bool:
            with _admin_client(cluster, state) as client:
                return client.get("/readyz").status_code == 200

        _wait(
            "kube-apiserver /readyz",
            ready(apiserver_ready),
            timeout,
            cluster.logs / "kube-apiserver.log",
        )
        for name in ("kube-controller-manager", "kube-scheduler"):
            _spawn(cluster, state, name, commands[name])
        for name, port_name in (
            ("kube-controller-manager", "controller_manager"),
            ("kube-scheduler", "scheduler"),
        ):
            url = f"https://127.0.0.1:{state.ports[port_name]}/healthz"
            _wait(
                f"{name} /healthz",
                ready(functools.partial(_https_ok, url)),
                timeout,
                cluster.logs / f"{name}.log",
            )
        _spawn(cluster, state, "kwok", commands["kwok"])
        _kubectl(state, cluster, "apply", "--server-side", "-f", str(NODES_MANIFEST))
        _wait(
            "simulated nodes Ready",
            ready(lambda: _nodes_ready(cluster, state)),
            timeout,
            cluster.logs / "kwok.log",
        )
        _wait(
            "the default ServiceAccount",
            ready(lambda: _default_service_account(cluster, state)),
            timeout,
            cluster.logs / "kube-controller-manager.log",
        )
        if real_node:
            _real_node_up(cluster)
    except BaseException:
        down(cluster, keep_logs=True)
        raise
    return cluster


def _real_node_up(cluster: LocalCluster) -> None:
    from e2e.cluster import node  # here: node.py imports this module

    node.up(cluster)


def _ready_check(cluster: LocalCluster, state: ClusterState, name: str) -> Callable[[], bool]:
    """Whether component ``name`` serves again (for a restart)."""
    if name == "etcd":
        url = f"http://127.0.0.1:{state.ports['etcd']}/health"
        return lambda: httpx.get(url, timeout=2).json()["health"] == "true"
    if name == "kube-apiserver":

        def apiserver_ready() -> bool:
            with _admin_client(cluster, state) as client:
                return client.get("/readyz").status_code == 200

        return apiserver_ready
    return lambda: _alive(state.pids[name])


def kill(cluster: LocalCluster, name: str) -> None:
    """kill -9 one component (no chance to shut down cleanly), as a crash would."""
    state = cluster.read_state()
    if state is None or name not in state.pids:
        raise ClusterError(f"no {name} is running in {cluster.root}")
    pid = state.pids[name]
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pid, signal.SIGKILL)
    while _alive(pid):
        time.sleep(0.05)


def start(
    cluster: LocalCluster, name: str, extra_args: Sequence[str] = (), timeout: float = 120.0
) -> None:
    """Start one component again on its recorded ports, with ``extra_args`` added to its
    usual flags (a later flag wins), and wait until it serves."""
    state = cluster.read_state()
    if state is None:
        raise ClusterError(f"no cluster is running in {cluster.root}")
    _spawn(cluster, state, name, [*_commands(cluster, state)[name], *extra_args])
    _wait(
        f"{name} to serve again",
        _ready_check(cluster, state, name),
        timeout,
        cluster.logs / f"{name}.log",
    )


def _stop_pid(pid: int, grace: float) -> None:
    try:
        os.killpg(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _alive(pid):
            return
        time.sleep(0.05)
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        return
    while _alive(pid):
        time.sleep(0.05)


def down(cluster: LocalCluster | None = None, *, keep_logs: bool = False) -> None:
    """Stop every process the cluster started and remove its state (logs optional)."""
    cluster = cluster or LocalCluster()
    from e2e.cluster import node  # here: node.py imports this module

    # The real node first: it holds mounts, network namespaces and host paths.
    node.stop(cluster)
    state = cluster.read_state()
    if state is not None:
        for name in reversed(_COMPONENTS):
            pid = state.pids.get(name)
            if pid:
                _stop_pid(pid, grace=10.0)
    if not cluster.root.exists():
        return
    for child in cluster.root.iterdir():
        if keep_logs and child == cluster.logs:
            continue
        if child.is_dir():
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink()


def info(cluster: LocalCluster | None = None) -> dict[str, object]:
    """A summary for humans: where the kubeconfig is, ports, processes."""
    cluster = cluster or LocalCluster()
    state = cluster.read_state()
    return {
        "healthy": healthy(cluster),
        "kubeconfig": str(cluster.kubeconfig),
        "server": cluster.api_url(state) if state else None,
        "pids": state.pids if state else {},
        "logs": str(cluster.logs),
    }
