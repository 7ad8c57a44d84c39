"""A silent network partition between one client and the API server, on this machine.

The client is pointed at a relay (a plain TCP forwarder to the API server: TLS passes
through it untouched); cutting the partition drops, with nftables, every packet to and
from the relay's port. Nothing is refused or reset: the client's requests and renewals
hang as they would behind a failed switch, and its kernel keeps retransmitting what it
sent, which arrives if the partition heals while the connection still exists.
"""

from __future__ import annotations

import contextlib
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import yaml


def _pump(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(65536):
            sink.sendall(data)
    for sock in (source, sink):
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)


@dataclass
class Relay:
    """Forwards every connection to 127.0.0.1:``port`` to the ``upstream`` port."""

    upstream: int
    listener: socket.socket = field(init=False)
    _closed: bool = field(default=False, init=False)

    def __post_init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.listener.getsockname()[1])

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
                server = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                continue
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=_pump, args=(a, b), daemon=True).start()

    def close(self) -> None:
        self._closed = True
        self.listener.close()


@dataclass
class Partition:
    """The cut between the relay's clients and the relay (nftables, root)."""

    port: int
    table: str = field(init=False)

    def __post_init__(self) -> None:
        self.table = f"shoal_partition_{self.port}"

    def cut(self) -> None:
        rules = "\n".join(
            [
                f"table inet {self.table} {{",
                "  chain out {",
                "    type filter hook output priority 0;",
                f"    tcp dport {self.port} drop",
                f"    tcp sport {self.port} drop",
                "  }",
                "}",
                "",
            ]
        )
        subprocess.run([_nft(), "-f", "-"], input=rules, text=True, check=True)

    def heal(self) -> None:
        subprocess.run(  # no table: nothing was cut
            [_nft(), "delete", "table", "inet", self.table], check=False, capture_output=True
        )


def _nft() -> str:
    nft = shutil.which("nft") or ("/usr/sbin/nft" if Path("/usr/sbin/nft").exists() else None)
    if nft is None:
        raise RuntimeError("the partition scenario needs nftables' nft (make system-deps)")
    return nft


def relayed_kubeconfig(kubeconfig: Path, port: int, into: Path) -> Path:
    """``kubeconfig`` with its server's port replaced by the relay's."""
    config = yaml.safe_load(kubeconfig.read_text())
    for entry in config["clusters"]:
        server = entry["cluster"]["server"]
        entry["cluster"]["server"] = f"{server.rsplit(':', 1)[0]}:{port}"
    into.write_text(yaml.safe_dump(config))
    into.chmod(0o600)
    return into


def api_port(kubeconfig: Path) -> int:
    server = yaml.safe_load(kubeconfig.read_text())["clusters"][0]["cluster"]["server"]
    return int(server.rstrip("/").rsplit(":", 1)[1])


@contextmanager
def partitionable(kubeconfig: Path, into: Path) -> Iterator[tuple[Path, Partition]]:
    """A kubeconfig that reaches the API server through a relay, and the partition
    that can cut it; healed and closed when the block ends."""
    relay = Relay(api_port(kubeconfig))
    partition = Partition(relay.port)
    try:
        yield relayed_kubeconfig(kubeconfig, relay.port, into), partition
    finally:
        partition.heal()
        relay.close()
