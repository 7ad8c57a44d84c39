"""The files and paths a pool's gateway runs on: one contract between the operator, which
renders them (shoal.render.gateway, shoal.render.haproxy_config), and the gateway's agent,
which applies them (shoal.gateway.haproxy_runner). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

# HAProxy's configuration, as a ConfigMap key and as a file in the gateway's directory.
CONFIG_FILE = "haproxy.cfg"
# A new configuration is written here beside the live one and checked before it replaces it.
CANDIDATE_FILE = ".haproxy.cfg.candidate"
# Where the agent writes the live configuration and keys, and where HAProxy's sockets are.
LIVE_DIR = "/var/run/shoal-gateway"
RUNTIME_DIR = "/var/run/haproxy"
# The signing algorithms HAProxy 2.6's jwt_verify takes.
ALGORITHMS = ("RS256", "RS384", "RS512", "ES256", "ES384", "ES512")


@dataclass(frozen=True)
class RuntimePaths:
    """Where a gateway's sockets and state live (``GatewayConfig.runtime_dir``)."""

    runtime_dir: str

    @property
    def master_socket(self) -> str:
        """The master CLI (haproxy's ``-S``): ``reload``, ``show proc``."""
        return f"{self.runtime_dir}/master.sock"

    @property
    def admin_socket(self) -> str:
        """The worker's runtime API; it also hands the listeners to a reloaded worker."""
        return f"{self.runtime_dir}/admin.sock"

    @property
    def routes_socket(self) -> str:
        """The gates' second hop."""
        return f"{self.runtime_dir}/routes.sock"

    @property
    def local_peer_socket(self) -> str:
        """A single replica's peers listener: a reload's old worker teaches the new one."""
        return f"{self.runtime_dir}/peers.sock"

    @property
    def server_state(self) -> str:
        """Servers' states saved before a reload, so a replica that was down stays down."""
        return f"{self.runtime_dir}/server-state"


def command(
    config: Path, runtime: RuntimePaths, local_peer: str, binary: str = "haproxy"
) -> list[str]:
    """The command line of a gateway replica: master-worker, the master CLI on a unix
    socket, and the replica's peer name (``-L``), which its stick-table keys carry."""
    return [
        binary,
        "-W",
        "-S",
        f"{runtime.master_socket},mode,600",
        "-f",
        str(config),
        "-L",
        local_peer,
    ]
