"""``shoal gateway-agent``: the sidecar that keeps a gateway's HAProxy on its pool's
configuration.

The operator renders the pool's gateway configuration into one ConfigMap (HAProxy's
configuration and the signing keys). The agent watches that ConfigMap through the API
(not a mounted volume, which the kubelet refreshes only every minute or so), and applies
each version with shoal.gateway.haproxy_runner: written into the directory HAProxy
reads, checked by HAProxy itself, and HAProxy's master told to reload (new workers take
new connections on the new configuration while the old ones finish their requests).
``--once`` (the init container) writes the files and exits, so HAProxy starts on them.

The sidecar's liveness: its loop beats a :class:`Heartbeat` at every turn (a read, an
event, a watch that ended on its timeout, a retry), and ``--health-port`` answers
``/healthz`` with 200 while the last beat is recent. Every call of the loop is bounded
in time, so a loop that stops beating is stuck, and the kubelet restarts the agent
(HAProxy, a container of its own, serves on meanwhile).
"""

from __future__ import annotations

import hashlib
import http.server
import json
import logging
import signal
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from shoal.gateway import haproxy_runner
from shoal.render.gateway_files import CONFIG_FILE, RuntimePaths

log = logging.getLogger(__name__)
RETRY_SECONDS = 2.0
# The API server ends each watch after this; the client gives up on a silent one later.
WATCH_SECONDS = 60
WATCH_READ_SECONDS = WATCH_SECONDS + 30
# A loop that has not beaten for this long is stuck: one whole silent watch and more.
STALE_SECONDS = WATCH_READ_SECONDS + 30


class Heartbeat:
    """When the agent's loop last went round, on a monotonic clock."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._last = clock()

    def beat(self) -> None:
        self._last = self._clock()

    def alive(self) -> bool:
        return self._clock() - self._last < STALE_SECONDS


def serve_health(heartbeat: Heartbeat, port: int) -> http.server.ThreadingHTTPServer:
    """``/healthz`` on ``port`` (all addresses, for the kubelet's probe), in a thread."""

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            ok = self.path == "/healthz" and heartbeat.alive()
            self.send_response(200 if ok else (500 if self.path == "/healthz" else 404))
            self.end_headers()
            self.wfile.write(b"ok\n" if ok else b"stuck\n")

        def log_message(self, format: str, *args: Any) -> None:
            """Probes every few seconds are not news."""

    server = http.server.ThreadingHTTPServer(("", port), Health)
    threading.Thread(target=server.serve_forever, name="health", daemon=True).start()
    return server


def digest(data: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(data), sort_keys=True).encode()).hexdigest()


class Agent:
    """Applies each new version of the gateway's ConfigMap once
    (shoal.gateway.haproxy_runner: written, checked with ``haproxy -c``, and HAProxy
    reloaded)."""

    def __init__(
        self,
        directory: Path,
        runtime: RuntimePaths,
        local_peer: str,
        applier: Callable[..., Any] = haproxy_runner.apply,
        binary: str = "haproxy",
    ) -> None:
        self.directory = directory
        self.runtime = runtime
        self.local_peer = local_peer
        self.binary = binary
        self._apply = applier
        self._applied: str | None = None

    def apply(self, data: Mapping[str, str], *, reload_haproxy: bool = True) -> bool:
        """Apply ``data`` (the ConfigMap's) when it differs from what was last applied;
        True when it did. A configuration HAProxy refuses is logged and left: the
        gateway keeps serving on the last good one."""
        wanted = digest(data)
        if wanted == self._applied:
            return False
        files = {name: text.encode() for name, text in data.items() if name != CONFIG_FILE}
        try:
            self._apply(
                self.directory,
                data.get(CONFIG_FILE, ""),
                self.runtime,
                self.local_peer,
                files=files,
                binary=self.binary,
                reload_running=reload_haproxy,
            )
        except haproxy_runner.InvalidConfigError as refused:
            log.error("gateway configuration %s refused by haproxy: %s", wanted[:12], refused)
            self._applied = wanted  # the same text would be refused again
            return False
        self._applied = wanted
        log.info("gateway configuration %s applied", wanted[:12])
        return True


def stop_on_sigterm() -> None:
    """Exit at once on SIGTERM. The agent is its container's PID 1, and the kernel
    delivers to PID 1 only the signals it handles: without a handler the kubelet's
    SIGTERM is dropped and every gateway pod that leaves (a roll, a scale-down, its
    pool deleted) waits out its whole grace period before SIGKILL. There is nothing to
    finish: HAProxy, its own container, drains the requests."""
    signal.signal(signal.SIGTERM, _exit)


def _exit(signum: int, frame: object) -> None:
    raise SystemExit(0)


def _config_map_data(body: Any) -> dict[str, str]:
    data = getattr(body, "data", None)
    if data is None and isinstance(body, dict):
        data = body.get("data")
    return dict(data or {})


def run(
    namespace: str,
    name: str,
    directory: Path,
    runtime: RuntimePaths,
    local_peer: str,
    *,
    once: bool,
    health_port: int = 0,
) -> int:
    """Watch ConfigMap ``namespace/name`` and apply each version (the agent's main)."""
    from kubernetes import client, watch

    from shoal.kube.client import load_api_client

    stop_on_sigterm()

    core = client.CoreV1Api(load_api_client())
    agent = Agent(directory, runtime, local_peer)
    heartbeat = Heartbeat()
    if health_port:
        serve_health(heartbeat, health_port)
    while True:
        heartbeat.beat()
        try:
            current = core.read_namespaced_config_map(name, namespace, _request_timeout=10)
            agent.apply(_config_map_data(current), reload_haproxy=not once)
            if once:
                return 0
            version = current.metadata.resource_version if current.metadata else None
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                core.list_namespaced_config_map,
                namespace,
                field_selector=f"metadata.name={name}",
                resource_version=version,
                timeout_seconds=WATCH_SECONDS,
                _request_timeout=(10, WATCH_READ_SECONDS),
            )
            for event in stream:
                heartbeat.beat()
                if event["type"] in ("ADDED", "MODIFIED"):
                    agent.apply(_config_map_data(event["object"]))
        except Exception as exc:  # the API or HAProxy away for a moment: try again
            log.warning("gateway agent: %s; retrying in %ss", exc, RETRY_SECONDS)
            time.sleep(RETRY_SECONDS)
