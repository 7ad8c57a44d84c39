"""``shoal gateway-agent``: the sidecar that keeps a gateway's HAProxy on its pool's
configuration.

The operator renders the pool's gateway configuration into one ConfigMap (HAProxy's
configuration and the signing keys). The agent watches that ConfigMap through the API
(not a mounted volume, which the kubelet refreshes only every minute or so), writes its
files into the directory HAProxy reads, and asks HAProxy's master process to reload: new
workers take new connections on the new configuration while the old ones finish the
requests they have. ``--once`` (the init container) writes the files and exits, so
HAProxy starts on them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import socket
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)
RETRY_SECONDS = 2.0


def digest(data: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(dict(data), sort_keys=True).encode()).hexdigest()


def write_files(directory: Path, data: Mapping[str, str]) -> None:
    """Write every entry of ``data`` as a file of ``directory``, each atomically (a
    temporary file renamed over the old one), and remove files no longer in it."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, content in data.items():
        target = directory / name
        temporary = directory / f".{name}.tmp"
        temporary.write_text(content)
        os.replace(temporary, target)
    for stale in directory.iterdir():
        if stale.is_file() and not stale.name.startswith(".") and stale.name not in data:
            stale.unlink()


def master_command(master_socket: Path, command: str, timeout: float = 10.0) -> str:
    """Send one command to HAProxy's master CLI and return its answer."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        conn.connect(str(master_socket))
        conn.sendall(command.encode() + b"\n")
        chunks = []
        while chunk := conn.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def reload(master_socket: Path) -> None:
    """Ask HAProxy's master to reload: it starts new workers on the configuration now
    in its file; the old workers finish their requests and exit."""
    master_command(master_socket, "reload")


class Agent:
    """Applies each new version of the gateway's ConfigMap once."""

    def __init__(
        self,
        directory: Path,
        master_socket: Path,
        reloader: Callable[[Path], None] = reload,
    ) -> None:
        self.directory = directory
        self.master_socket = master_socket
        self._reload = reloader
        self._applied: str | None = None

    def apply(self, data: Mapping[str, str], *, reload_haproxy: bool = True) -> bool:
        """Write ``data`` and reload HAProxy when it differs from what was last applied;
        True when it did."""
        wanted = digest(data)
        if wanted == self._applied:
            return False
        write_files(self.directory, data)
        if reload_haproxy:
            self._reload(self.master_socket)
        self._applied = wanted
        log.info("gateway configuration %s applied", wanted[:12])
        return True


def _config_map_data(body: Any) -> dict[str, str]:
    data = getattr(body, "data", None)
    if data is None and isinstance(body, dict):
        data = body.get("data")
    return dict(data or {})


def run(namespace: str, name: str, directory: Path, master_socket: Path, *, once: bool) -> int:
    """Watch ConfigMap ``namespace/name`` and apply each version (the agent's main)."""
    from kubernetes import client, watch

    from shoal.kube.client import load_api_client

    core = client.CoreV1Api(load_api_client())
    agent = Agent(directory, master_socket)
    while True:
        try:
            current = core.read_namespaced_config_map(name, namespace)
            agent.apply(_config_map_data(current), reload_haproxy=not once)
            if once:
                return 0
            version = current.metadata.resource_version if current.metadata else None
            stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                core.list_namespaced_config_map,
                namespace,
                field_selector=f"metadata.name={name}",
                resource_version=version,
                timeout_seconds=300,
            )
            for event in stream:
                if event["type"] in ("ADDED", "MODIFIED"):
                    agent.apply(_config_map_data(event["object"]))
        except Exception as exc:  # the API or HAProxy away for a moment: try again
            log.warning("gateway agent: %s; retrying in %ss", exc, RETRY_SECONDS)
            time.sleep(RETRY_SECONDS)
