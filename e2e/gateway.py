"""The pool gateway on real processes, for tests and benchmarks.

* Gateway replicas: real ``haproxy`` processes (Debian's 2.6), one per simulated gateway
  pod, each in master-worker mode with its own runtime directory and ports, named with
  ``-L`` and peered with the others on 127.0.0.1. Their configuration is rendered by
  :func:`shoal.render.haproxy_config.haproxy_config` and applied (written, checked, reloaded)
  by :mod:`shoal.gateway.haproxy_runner`, exactly as the gateway pod's agent does. Only the
  ports differ between replicas here, as pods on one machine cannot share them.
* Model replicas: real ``tritonserver`` processes serving the linear-cost Python model
  (e2e/models/linear_cost.py) with configs rendered by Shoal.
* Tokens: shaped exactly like Kubernetes projected service-account tokens (header
  ``alg``/``kid``; claims ``aud`` as a list, ``exp``, ``iat``, ``nbf``, ``iss``, ``jti``,
  ``sub`` = ``system:serviceaccount:<namespace>:<name>``, the ``kubernetes.io`` claim),
  signed with a test RSA and a test EC key pair. What is not real here is only the
  signer: the cluster tests use tokens from the real API server.
* Load: closed-loop and open-loop HTTP clients (httpx, one connection per thread) that
  record each request's start, latency and status.
"""

from __future__ import annotations

import base64
import concurrent.futures
import csv
import dataclasses
import io
import json
import multiprocessing
import queue
import statistics
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import httpx
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

from e2e import triton
from e2e.cluster.local import free_port
from e2e.linear_model import BODY, linear_model
from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.inferencemodel import InferenceModel
from shoal.gateway import haproxy_runner as runner
from shoal.render import gateway_files
from shoal.render.batching import effective_batching
from shoal.render.gateway_config import (
    PRIORITY_HEADER,
    GatewayConfig,
    Limits,
    Peer,
    Route,
    Server,
    SigningKey,
)
from shoal.render.gateway_files import RuntimePaths
from shoal.render.gateway_plan import route as plan_route
from shoal.render.haproxy_config import haproxy_config
from shoal.render.model_config import render_config_pbtxt

MODELS = Path(__file__).resolve().parent / "models"
HAPROXY = "/usr/sbin/haproxy"
ISSUER = "https://kubernetes.default.svc.cluster.local"
AUDIENCE = "shoal-gateway.pool-shared"
# Where a gateway pod would find the signing keys; each replica here has its own copy.
KEYS_DIR = Path("/etc/shoal-gateway/keys")


# --- tokens -----------------------------------------------------------------------


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass(frozen=True)
class KeyPair:
    kid: str
    alg: str  # RS256 or ES256
    private: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

    def public_pem(self) -> bytes:
        return self.private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )

    def sign(self, message: bytes) -> bytes:
        if isinstance(self.private, rsa.RSAPrivateKey):
            return self.private.sign(message, padding.PKCS1v15(), hashes.SHA256())
        r, s = decode_dss_signature(self.private.sign(message, ec.ECDSA(hashes.SHA256())))
        return r.to_bytes(32, "big") + s.to_bytes(32, "big")  # JWS: raw r || s


def rsa_pair(kid: str) -> KeyPair:
    return KeyPair(kid, "RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))


def ec_pair(kid: str) -> KeyPair:
    return KeyPair(kid, "ES256", ec.generate_private_key(ec.SECP256R1()))


@dataclass
class TokenIssuer:
    """Signs tokens the way the API server signs projected service-account tokens."""

    keys: list[KeyPair]
    issuer: str = ISSUER
    audience: str = AUDIENCE

    @classmethod
    def new(cls) -> TokenIssuer:
        """Key ids as the API server makes them (base64url of a digest), one beginning
        with "-" and one with "_": a cluster's key id begins with "-" one time in 32,
        and the gateway must take it as a value, never as an option."""
        return cls(
            [
                rsa_pair("-xHPUG5YyBlMrW4Sz1BE3JEWiZGlyY83xWy0AkJaheY"),
                ec_pair("_3bT9kq1Lw2m0nE7vYp4cZ8rXoJ5uHs6aDfGiK0lQwMe"),
            ]
        )

    def key_files(self) -> dict[str, bytes]:
        """The public keys as the gateway mounts them, relative to its directory."""
        return {f"keys/{k.kid}.pem": k.public_pem() for k in self.keys}

    def signing_keys(self, directory: Path = KEYS_DIR) -> tuple[SigningKey, ...]:
        """The keys as a pod would mount them under ``directory``."""
        return tuple(SigningKey(k.kid, k.alg, str(directory / f"{k.kid}.pem")) for k in self.keys)

    def token(
        self,
        namespace: str,
        name: str = "default",
        *,
        key: KeyPair | None = None,
        lifetime_s: int = 3600,
        not_before_s: int = 0,
        audience: Sequence[str] | None = None,
        issuer: str | None = None,
        subject: str | None = None,
        claims: Mapping[str, Any] | None = None,
    ) -> str:
        key = key or self.keys[0]
        now = int(time.time())
        payload: dict[str, Any] = {
            "aud": list(audience) if audience is not None else [self.audience],
            "exp": now + lifetime_s,
            "iat": now,
            "iss": issuer or self.issuer,
            "jti": str(uuid.uuid4()),
            "kubernetes.io": {
                "namespace": namespace,
                "node": {"name": "gpu-shared-0", "uid": str(uuid.uuid4())},
                "pod": {"name": f"{name}-client-0", "uid": str(uuid.uuid4())},
                "serviceaccount": {"name": name, "uid": str(uuid.uuid4())},
            },
            "nbf": now + not_before_s,
            "sub": subject or f"system:serviceaccount:{namespace}:{name}",
        }
        payload.update(claims or {})
        header = _b64(json.dumps({"alg": key.alg, "kid": key.kid}).encode())
        body = _b64(json.dumps(payload, separators=(",", ":")).encode())
        signature = key.sign(f"{header}.{body}".encode())
        return f"{header}.{body}.{_b64(signature)}"


# --- models -----------------------------------------------------------------------


@dataclass(frozen=True)
class Model:
    """One linear-cost model in a repository: its Triton name, costs and batching."""

    name: str
    base_ms: float = 5.0
    per_item_ms: float = 0.2
    max_batch_size: int = 8
    max_queue_delay: str = "1ms"
    instances: int = 1

    def rendered(self) -> tuple[InferenceModel, BatchPolicySpec]:
        """The InferenceModel and batch policy the operator would serve it from."""
        doc = linear_model(self.base_ms, self.per_item_ms)
        doc["spec"]["model"]["name"] = self.name
        doc["spec"]["model"]["instances"] = self.instances
        im = InferenceModel.model_validate(doc)
        spec = BatchPolicySpec(
            max_batch_size=self.max_batch_size, max_queue_delay=self.max_queue_delay
        )
        return im, effective_batching(im, spec)

    def slots(self) -> int:
        """The requests the operator's gateway lets one replica hold at once."""
        planned = plan_route(*self.rendered(), ())
        assert planned is not None
        return planned.server_maxconn


def model_repository(root: Path, models: Sequence[Model]) -> Path:
    """A Triton model repository of rendered configs, one directory per model."""
    for model in models:
        config = render_config_pbtxt(*model.rendered())
        (root / model.name / "1").mkdir(parents=True, exist_ok=True)
        (root / model.name / "1" / "model.py").write_text((MODELS / "linear_cost.py").read_text())
        (root / model.name / "config.pbtxt").write_text(config)
    return root


@contextmanager
def tritons(
    workdir: Path, models: Sequence[Model], replicas: int = 1
) -> Iterator[list[triton.TritonServer]]:
    """``replicas`` tritonservers, each serving every model of ``models``."""
    repo = model_repository(workdir / "repo", models)
    servers: list[triton.TritonServer] = []
    # Started side by side: each spends seconds loading its models, mostly waiting.
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(replicas, 1)) as pool:
        starting = [
            pool.submit(triton.start, repo, workdir / f"triton-{index}")
            for index in range(replicas)
        ]
        concurrent.futures.wait(starting)
    try:
        # In replica order; the first failure is raised once every started one is kept
        # for stopping.
        servers += [f.result() for f in starting if f.exception() is None]
        for f in starting:
            error = f.exception()
            if error is not None:
                raise error
        yield servers
    finally:
        for server in servers:
            server.stop()


def servers_of(
    tritons: Sequence[triton.TritonServer], prefix: str = "triton"
) -> tuple[Server, ...]:
    return tuple(
        Server(f"{prefix}-{i}", "127.0.0.1", t.http_port, t.grpc_port)
        for i, t in enumerate(tritons)
    )


def route(
    tenant: str,
    model: str,
    servers: Sequence[Server],
    *,
    timeout_ms: int = 5000,
    # What the operator renders for a default Model (max batch 8, one instance):
    # Model.slots() gives it for another.
    server_maxconn: int = 16,
    priority_levels: int = 0,
    default_priority: int = 0,
    sticky_header: str | None = None,
) -> Route:
    return Route(
        tenant=tenant,
        model=model,
        backend=f"m_{tenant}_{model}",
        servers=tuple(servers),
        timeout_ms=timeout_ms,
        server_maxconn=server_maxconn,
        priority_levels=priority_levels,
        default_priority=default_priority,
        sticky_header=sticky_header,
    )


# --- gateway replicas -------------------------------------------------------------


@dataclass
class Replica:
    """One gateway pod: a haproxy master and its worker."""

    name: str
    directory: Path
    peer_port: int
    http_port: int = field(default_factory=free_port)
    grpc_port: int = field(default_factory=free_port)
    metrics_port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None
    # Unix socket paths are limited to about 100 bytes; a caller whose directory is deep
    # (pytest's tmp_path) gives a short one here.
    runtime_dir: str | None = None

    @property
    def runtime(self) -> RuntimePaths:
        return RuntimePaths(self.runtime_dir or str(self.directory / "run"))

    @property
    def log(self) -> Path:
        return self.directory / "haproxy.log"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def config_for(self, config: GatewayConfig) -> GatewayConfig:
        """The pool's configuration on this replica's ports, runtime directory and copy
        of the keys (the cluster's and the OIDC issuers')."""

        def here(keys: tuple[SigningKey, ...]) -> tuple[SigningKey, ...]:
            return tuple(
                dataclasses.replace(k, path=str(self.directory / "keys" / Path(k.path).name))
                for k in keys
            )

        return dataclasses.replace(
            config,
            keys=here(config.keys),
            oidc=tuple(dataclasses.replace(t, keys=here(t.keys)) for t in config.oidc),
            http_port=self.http_port,
            grpc_port=self.grpc_port,
            metrics_port=self.metrics_port,
            runtime_dir=self.runtime.runtime_dir,
            bind_address="127.0.0.1",
        )

    def apply(self, config: GatewayConfig, files: Mapping[str, bytes]) -> runner.Applied:
        return runner.apply(
            self.directory,
            haproxy_config(self.config_for(config)),
            self.runtime,
            self.name,
            files=files,
            binary=HAPROXY,
            reload_running=self.process is not None,
        )

    def start(self) -> None:
        Path(self.runtime.runtime_dir).mkdir(parents=True, exist_ok=True)
        command = gateway_files.command(
            self.directory / gateway_files.CONFIG_FILE, self.runtime, self.name, HAPROXY
        )
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT
            )
        try:
            runner.wait_ready(self.runtime)
        except runner.GatewayError as error:
            raise runner.GatewayError(f"{error}\n{self.log_tail()}") from error

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()  # the master stops its workers
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def log_tail(self, lines: int = 30) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def cli(self, request: str) -> str:
        """A runtime API command for the current worker (through the master CLI, so a
        reload's old worker never answers it)."""
        pid = runner.master_status(self.runtime).workers[0]
        return runner.worker_cli(self.runtime, pid, request)

    def stats(self) -> list[dict[str, str]]:
        """``show stat``: one row per frontend, backend and server."""
        text = self.cli("show stat").lstrip("# ")
        return list(csv.DictReader(io.StringIO(text)))

    def stat(self, backend: str, name: str = "BACKEND") -> dict[str, str]:
        for row in self.stats():
            if row["pxname"] == backend and row["svname"] == name:
                return row
        raise KeyError(f"{backend}/{name}")

    def server_status(self, backend: str, server: str) -> str:
        """UP, DOWN, MAINT, ... (a server in transition reads e.g. "UP 1/2")."""
        return self.stat(backend, server)["status"]

    def metric(self, name: str, **labels: str) -> float:
        """The sum of a metric's samples from the Prometheus exporter whose labels
        include ``labels``."""
        total, found = 0.0, False
        for line in httpx.get(self.metrics_url, timeout=10).text.splitlines():
            if not line.startswith(name + "{") and not line.startswith(name + " "):
                continue
            sample_labels, _, value = line.rpartition(" ")
            if all(f'{k}="{v}"' in sample_labels for k, v in labels.items()):
                total += float(value)
                found = True
        if not found:
            raise KeyError(f"{name}{labels} not exported")
        return total

    def rate(self, table: str, key: str) -> int:
        """One key's rate, straight from the worker's runtime socket (fast enough to poll
        by the millisecond; not for use during a reload)."""
        answer = runner.cli(self.runtime.admin_socket, f"show table gw/{table} key {key}")
        for part in answer.split():
            if part.startswith("http_req_rate("):
                return int(part.split("=", 1)[1])
        return 0

    def table(self, table: str) -> dict[str, int]:
        """A rate table's entries: key -> the rate HAProxy computes now."""
        entries = {}
        for line in self.cli(f"show table gw/{table}").splitlines():
            if " key=" not in line:
                continue
            fields = dict(part.split("=", 1) for part in line.split()[1:] if "=" in part)
            rate = next(v for k, v in fields.items() if k.startswith("http_req_rate"))
            entries[fields["key"]] = int(rate)
        return entries


@dataclass
class Gateway:
    """The replicas of one pool's gateway, peered, on one configuration."""

    replicas: list[Replica]
    issuer: TokenIssuer
    directory: Path
    config: GatewayConfig | None = None

    @property
    def peers(self) -> tuple[Peer, ...]:
        return tuple(Peer(r.name, "127.0.0.1", r.peer_port) for r in self.replicas)

    def base_config(
        self,
        tenants: Mapping[str, Limits],
        routes: Sequence[Route],
    ) -> GatewayConfig:
        """The pool's configuration as the operator would build it (replica-agnostic)."""
        return GatewayConfig(
            pool="shared",
            issuer=self.issuer.issuer,
            audience=self.issuer.audience,
            keys=self.issuer.signing_keys(),
            tenants=tuple(sorted(tenants.items())),
            routes=tuple(routes),
            peers=self.peers,
        )

    def apply(
        self, config: GatewayConfig, files: Mapping[str, bytes] | None = None
    ) -> list[runner.Applied]:
        """The same configuration on every replica (each renders its own ports), with the
        cluster's key files and ``files`` (paths relative to a replica's directory: an
        OIDC issuer's keys under keys/)."""
        self.config = config
        every = {**self.issuer.key_files(), **(files or {})}
        return [r.apply(config, every) for r in self.replicas]

    def token(self, namespace: str, **kwargs: Any) -> str:
        return self.issuer.token(namespace, **kwargs)

    def wait_peers_connected(self, timeout: float = 15.0) -> float:
        """Until every replica has finished learning the tables and has an established
        session with every other one (peers connect after a random 50 ms to 2 s; counts
        made before that reach the others late)."""

        def connected() -> bool:
            for replica in self.replicas:
                pid = runner.master_status(replica.runtime).workers[0]
                if runner.peers_flags(replica.runtime, pid) & runner.RESYNC_FINISHED != 3:
                    return False  # still learning the tables
                text = replica.cli("show peers")
                remotes = [line for line in text.splitlines() if "(remote," in line]
                if len(remotes) != len(self.replicas) - 1:
                    return False
                if not all("last_status=ESTA" in line for line in remotes):
                    return False
            return True

        return wait_until("peers connected", connected, timeout, step=0.1)


@contextmanager
def gateway(
    workdir: Path,
    tenants: Mapping[str, Limits],
    routes: Sequence[Route],
    *,
    replicas: int = 1,
    issuer: TokenIssuer | None = None,
) -> Iterator[Gateway]:
    """``replicas`` gateway replicas, started on the configuration for ``tenants`` and
    ``routes``; always stopped."""
    issuer = issuer or TokenIssuer.new()
    members = [
        Replica(f"gw-{i}", workdir / f"gw-{i}", peer_port=free_port()) for i in range(replicas)
    ]
    gw = Gateway(members, issuer, workdir)
    try:
        gw.apply(gw.base_config(tenants, routes))
        for replica in members:
            replica.start()
        if replicas > 1:
            gw.wait_peers_connected()
        yield gw
    finally:
        for replica in members:
            replica.stop()


# --- load -------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    started: float  # time.monotonic() when sent
    latency: float  # seconds
    status: int  # HTTP status; 0 for a transport error
    tag: str = ""
    request_id: str = ""  # the X-Request-ID sent, to find the gateway's own timing


def headers(token: str | None, priority: int | None = None) -> dict[str, str]:
    result = {}
    if token is not None:
        result["Authorization"] = f"Bearer {token}"
    if priority is not None:
        result[PRIORITY_HEADER] = str(priority)
    return result


def send(
    http: httpx.Client, path: str, hdrs: Mapping[str, str], tag: str, request_id: str = ""
) -> Sample:
    all_headers = dict(hdrs)
    if request_id:
        all_headers["X-Request-ID"] = request_id
    started = time.monotonic()
    try:
        status = http.post(path, json=BODY, headers=all_headers).status_code
    except httpx.HTTPError:
        status = 0
    return Sample(started, time.monotonic() - started, status, tag, request_id)


def one(url: str, path: str, hdrs: Mapping[str, str], tag: str = "") -> Sample:
    """One request on a connection of its own."""
    with httpx.Client(base_url=url, timeout=60) as http:
        return send(http, path, hdrs, tag)


def closed_loop(
    url: str,
    path: str,
    hdrs: Mapping[str, str],
    concurrency: int,
    seconds: float,
    tag: str = "",
) -> list[Sample]:
    """``concurrency`` clients sending back to back for ``seconds``."""
    samples: list[Sample] = []
    lock = threading.Lock()
    stop = time.monotonic() + seconds

    def client() -> None:
        local = []
        with httpx.Client(base_url=url, timeout=60) as http:
            while time.monotonic() < stop:
                local.append(send(http, path, hdrs, tag))
        with lock:
            samples.extend(local)

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return samples


class OpenLoop:
    """Requests sent at a fixed rate, whatever the answers (a tenant's offered load),
    from a pool of threads; runs in the background until :meth:`stop`."""

    def __init__(
        self,
        url: str,
        path: str,
        hdrs: Mapping[str, str] | Callable[[int], Mapping[str, str]],
        rate: float,
        *,
        threads: int = 16,
        tag: str = "",
        seconds: float | None = None,
    ) -> None:
        self.url, self.path, self.rate, self.tag = url, path, rate, tag
        self._headers = hdrs
        self.samples: list[Sample] = []
        self.late = 0  # requests sent later than scheduled as every thread was busy
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._jobs: queue.Queue[tuple[int, float] | None] = queue.Queue()
        self._seconds = seconds
        self._run = uuid.uuid4().hex[:8]
        self._workers = [threading.Thread(target=self._work) for _ in range(threads)]
        self._scheduler = threading.Thread(target=self._schedule)

    def __enter__(self) -> OpenLoop:
        for worker in self._workers:
            worker.start()
        self._scheduler.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.stop()

    def _schedule(self) -> None:
        start = time.monotonic()
        index = 0
        while not self._stop.is_set():
            due = start + index / self.rate
            if self._seconds is not None and due - start >= self._seconds:
                break
            delay = due - time.monotonic()
            if delay > 0:
                self._stop.wait(delay)
                if self._stop.is_set():
                    break
            self._jobs.put((index, due))
            index += 1
        for _ in self._workers:
            self._jobs.put(None)

    def _work(self) -> None:
        with httpx.Client(base_url=self.url, timeout=60) as http:
            while (job := self._jobs.get()) is not None:
                index, due = job
                if time.monotonic() - due > 0.05:
                    with self._lock:
                        self.late += 1
                hdrs = self._headers(index) if callable(self._headers) else self._headers
                request_id = f"{self.tag}-{self._run}-{index}" if self.tag else ""
                sample = send(http, self.path, hdrs, self.tag, request_id)
                with self._lock:
                    self.samples.append(sample)

    def join(self) -> None:
        self._scheduler.join()
        for worker in self._workers:
            worker.join()

    def stop(self) -> None:
        self._stop.set()
        self.join()


@dataclass(frozen=True)
class Load:
    """An open-loop load for :func:`run_loads`: ``rate`` requests a second for
    ``seconds``, from ``threads`` threads, each request with an X-Request-ID
    ``<tag>-<run>-<n>``."""

    url: str
    path: str
    headers: Mapping[str, str]
    rate: float
    seconds: float
    tag: str
    threads: int = 16


@dataclass
class LoadResult:
    samples: list[Sample]
    late: int  # requests sent more than 50 ms after their time, every thread busy


def _run_load(load: Load, start_at: float) -> LoadResult:
    time.sleep(max(0.0, start_at - time.monotonic()))
    with OpenLoop(
        load.url,
        load.path,
        load.headers,
        load.rate,
        threads=load.threads,
        tag=load.tag,
        seconds=load.seconds,
    ) as generator:
        generator.join()
    return LoadResult(generator.samples, generator.late)


def run_loads(loads: Sequence[Load], start_in: float = 2.0) -> list[LoadResult]:
    """Each load in a process of its own, all starting together: one tenant's clients
    never wait for another's on the interpreter's lock, so what is measured is the
    gateway and the models, not the load generator."""
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=len(loads), mp_context=context) as pool:
        start_at = time.monotonic() + start_in  # one clock for every process on Linux
        futures = [pool.submit(_run_load, load, start_at) for load in loads]
        return [future.result() for future in futures]


class RouteHop(NamedTuple):
    """The second hop's own record of one request (HAProxy's log of the route)."""

    status: int
    state: str  # %tsc: "PR--" is a request the proxy refused itself
    queued_ms: int  # %Tw, in the route's queue: -1 when it never entered one
    triton_ms: int  # %Tr, waiting for Triton's answer
    total_ms: int  # %Ta


def _logged(replica: Replica, frontend: str, tag: str) -> Iterator[tuple[str, list[str]]]:
    """(request id, fields) of each line ``frontend`` logged for a request whose id
    starts with ``tag``- (any id when ``tag`` is empty). A request's id here is the
    X-Request-ID its client sent (the log's client_id=), else the gateway's own (id=).
    Fields as in the log-format the renderer sets: [4] the timers, [5] the status, [7]
    the termination state."""
    for line in replica.log.read_text(errors="replace").splitlines():
        fields = line.split()
        if len(fields) < 8 or fields[2] != frontend or " id=" not in line:
            continue
        client = line.split(" client_id=", 1)[1].split()[0] if " client_id=" in line else "-"
        request_id = client if client != "-" else line.split(" id=", 1)[1].split()[0]
        if request_id.startswith(f"{tag}-" if tag else ""):
            yield request_id, fields


def route_hops(replica: Replica, tag: str) -> dict[str, RouteHop]:
    """The second hop's records of the requests whose id starts with ``tag``-, by
    request id."""
    found = {}
    for request_id, fields in _logged(replica, "routes", tag):
        timers = [int(t) for t in fields[4].split("/")]
        found[request_id] = RouteHop(int(fields[5]), fields[7], timers[1], timers[3], timers[4])
    return found


def edge_times(replica: Replica, tag: str) -> dict[str, tuple[int, float]]:
    """The gateway's own view of the requests whose id starts with ``tag``-: status
    and total time at the edge (HAProxy's %Ta, from the request received to the
    response sent, in seconds), by request id."""
    return {
        request_id: (int(fields[5]), int(fields[4].rsplit("/", 1)[1]) / 1000)
        for request_id, fields in _logged(replica, "edge", tag)
    }


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of ``values``, by linear interpolation."""
    if not values:
        return float("nan")
    if len(values) == 1:
        return values[0]
    ordered = sorted(values)
    return statistics.quantiles(ordered, n=100, method="inclusive")[round(q) - 1]


def statuses(samples: Sequence[Sample]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for s in samples:
        counts[s.status] = counts.get(s.status, 0) + 1
    return dict(sorted(counts.items()))


def wait_until(what: str, check: Callable[[], bool], timeout: float, step: float = 0.05) -> float:
    """Seconds until ``check()`` holds; fails after ``timeout``."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if check():
            return time.monotonic() - started
        time.sleep(step)
    raise AssertionError(f"{what}: not within {timeout:.0f}s")
