"""One real haproxy per gateway pod of the local cluster, on the configuration the
operator rendered into the pool's gateway ConfigMap.

KWOK's pods run nothing. As e2e/monitoring.py starts a real tritonserver for each Running
pod of a model, :class:`GatewayPods` starts a real haproxy (e2e/gateway.py's ``Replica``)
for each Running pod of a pool's gateway and applies the ConfigMap's configuration to it
the way the pod's agent does (shoal.gateway.haproxy_runner.apply), every time the operator
changes it. Only the pod's network and filesystem are simulated, by :func:`localize`:
the pods' addresses become the 127.0.0.1 ports of the processes standing for them, and
the pod's paths directories of this machine.
"""

from __future__ import annotations

import re
import shutil
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from kubernetes import client

from e2e.cluster.local import free_port
from e2e.gateway import Replica
from e2e.monitoring import PodBackers, Prometheus, write_targets
from shoal.gateway import haproxy_runner as runner
from shoal.render.gateway import gateway_name
from shoal.render.gateway_config import GRPC_PORT, HTTP_PORT, METRICS_PORT, PEERS_PORT
from shoal.render.gateway_files import CONFIG_FILE, LIVE_DIR, RUNTIME_DIR

HAPROXY = "/usr/sbin/haproxy"


def localize(
    text: str,
    replica: Replica,
    peers: dict[str, int],
    models: dict[str, tuple[int, int]],
) -> str:
    """The operator's configuration as ``replica`` runs it on this machine: its listeners
    on its own 127.0.0.1 ports, its sockets and key files in its directory, each peer
    (gateway pod) at the port of the haproxy standing for it, and each server (model
    pod) at the HTTP or gRPC port of the tritonserver standing for it."""
    binds = {
        HTTP_PORT: replica.http_port,
        GRPC_PORT: replica.grpc_port,
        METRICS_PORT: replica.metrics_port,
    }
    text = re.sub(
        r"^(\s*bind) :(\d+)", lambda m: f"{m[1]} 127.0.0.1:{binds[int(m[2])]}", text, flags=re.M
    )
    text = text.replace(RUNTIME_DIR, replica.runtime.runtime_dir).replace(
        LIVE_DIR, str(replica.directory)
    )
    text = re.sub(
        rf"^(\s*peer) (\S+) \S+:{PEERS_PORT}$",
        lambda m: f"{m[1]} {m[2]} 127.0.0.1:{peers[m[2]]}",
        text,
        flags=re.M,
    )

    def server(m: re.Match[str]) -> str:
        http, grpc = models[m[2]]
        return f"{m[1]} {m[2]} 127.0.0.1:{http if int(m[3]) == HTTP_PORT else grpc}"

    return re.sub(r"^(\s*server) (\S+) \S+:(8000|8001)", server, text, flags=re.M)


def service_account_token(
    core: client.CoreV1Api, namespace: str, aud: str, account: str = "caller", seconds: int = 600
) -> str:
    """A real ServiceAccount token for ``aud``, issued by the API server."""
    try:
        core.create_namespaced_service_account(
            namespace, client.V1ServiceAccount(metadata=client.V1ObjectMeta(name=account))
        )
    except client.ApiException as exc:
        if exc.status != 409:
            raise
    request = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=[aud], expiration_seconds=seconds)
    )
    issued = core.create_namespaced_service_account_token(account, namespace, request)
    assert issued.status is not None
    return str(issued.status.token)


@dataclass
class GatewayPods:
    """Real haproxy processes for the Running pods of one pool's gateway."""

    core: client.CoreV1Api
    pool: str
    namespace: str  # the gateways' namespace
    workdir: Path
    backers: list[PodBackers]
    # Scrapes each replica's exporter as the shoal-gateway job would, with its pool.
    prometheus: Prometheus | None = None
    replicas: dict[str, Replica] = field(default_factory=dict)
    applied: dict[str, str] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _thread: threading.Thread | None = None

    def start(self) -> GatewayPods:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def urls(self) -> list[str]:
        with self._lock:
            return [r.url for r in self.replicas.values() if r.process is not None]

    def _model_ports(self) -> dict[str, tuple[int, int]]:
        ports: dict[str, tuple[int, int]] = {}
        for backers in self.backers:
            with backers._lock:
                for pod, server in backers.servers.items():
                    ports[pod] = (server.http_port, server.grpc_port)
        return ports

    def _run(self) -> None:
        name = gateway_name(self.pool)
        while not self._stop.is_set():
            try:
                self._pass(name)
            except Exception as exc:  # reported by the test through .errors
                self.errors.append(f"{type(exc).__name__}: {exc}")
            self._stop.wait(0.5)

    def _pass(self, name: str) -> None:
        pods = self.core.list_namespaced_pod(
            self.namespace, label_selector=f"shoal.dev/gateway={self.pool}"
        ).items
        running = {
            str(p.metadata.name)
            for p in pods
            if p.metadata
            and p.status
            and p.status.phase == "Running"
            and not p.metadata.deletion_timestamp
        }
        for pod in sorted(running - set(self.replicas)):
            self.replicas[pod] = Replica(
                pod,
                self.workdir / pod,
                peer_port=free_port(),
                runtime_dir=tempfile.mkdtemp(prefix="shoal-gw-"),
            )
        for pod in sorted(set(self.replicas) - running):
            with self._lock:
                gone = self.replicas.pop(pod)
            gone.stop()
            shutil.rmtree(gone.runtime.runtime_dir, ignore_errors=True)
            self.applied.pop(pod, None)
        config_map = self.core.read_namespaced_config_map(name, self.namespace)
        data = dict(config_map.data or {})
        text = data.pop(CONFIG_FILE, "")
        files = {key: value.encode() for key, value in data.items()}
        peers = {pod: replica.peer_port for pod, replica in self.replicas.items()}
        models = self._model_ports()
        for pod, replica in sorted(self.replicas.items()):
            try:
                local = localize(text, replica, peers, models)
            except KeyError:
                continue  # a model pod whose tritonserver is not up yet
            if self.applied.get(pod) == local:
                continue
            replica.directory.mkdir(parents=True, exist_ok=True)
            runner.apply(
                replica.directory,
                local,
                replica.runtime,
                pod,
                files=files,
                binary=HAPROXY,
                reload_running=replica.process is not None,
            )
            if replica.process is None:
                replica.start()
            self.applied[pod] = local
        self._write_targets()

    def _write_targets(self) -> None:
        if self.prometheus is None:
            return
        with self._lock:
            targets = [
                {
                    "targets": [f"127.0.0.1:{replica.metrics_port}"],
                    "labels": {"namespace": self.namespace, "pod": pod, "pool": self.pool},
                }
                for pod, replica in self.replicas.items()
                if replica.process is not None
            ]
        write_targets(self.prometheus.gateway_targets_file, targets)

    def stop(self) -> None:
        self._stop.set()
        if self._thread:
            self._thread.join(30)
        with self._lock:
            replicas = list(self.replicas.values())
            self.replicas.clear()
        for replica in replicas:
            replica.stop()
            shutil.rmtree(replica.runtime.runtime_dir, ignore_errors=True)
