"""An S3-compatible object store on this machine (gofakes3, built from its Go module by
``e2e/cluster/build_tool.sh``), listening on the real node's bridge address so that the
real node's pods reach it as they would reach MinIO or Ceph RGW in a cluster. The
real-node tier serves model repositories from it to the rendered fetch container.

What stands in: gofakes3 speaks the S3 REST API (path-style buckets, listings, GET and
PUT of objects) but checks no request signature, so a wrong key is not refused here.
"""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from e2e.cluster.local import ensure_tool
from e2e.process import stop, wait_http

TOOL = ("objectstore", "github.com/johannesboyne/gofakes3/cmd/gofakes3")


@dataclass(frozen=True)
class ObjectStore:
    """A running store: ``endpoint`` is what a model's ``s3.endpoint`` names."""

    endpoint: str

    def create_bucket(self, bucket: str) -> None:
        httpx.put(f"{self.endpoint}/{bucket}", timeout=10).raise_for_status()

    def upload(self, bucket: str, prefix: str, directory: Path) -> list[str]:
        """Every file under ``directory`` as ``<prefix>/<relative path>``; the keys."""
        keys = []
        for path in sorted(p for p in directory.rglob("*") if p.is_file()):
            key = f"{prefix}/{path.relative_to(directory).as_posix()}"
            reply = httpx.put(f"{self.endpoint}/{bucket}/{key}", content=path.read_bytes())
            reply.raise_for_status()
            keys.append(key)
        return keys


def _free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        return int(probe.getsockname()[1])


@contextmanager
def object_store(address: str, logs: Path) -> Iterator[ObjectStore]:
    """A store in memory on ``address`` (a free port), stopped on the way out."""
    binary = ensure_tool(*TOOL)
    port = _free_port(address)
    log = logs / "object-store.log"
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [str(binary), "-backend=memory", f"-host={address}:{port}"],
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        endpoint = f"http://{address}:{port}"
        wait_http(endpoint + "/", "the object store", proc, log, timeout=30)
        yield ObjectStore(endpoint)
    finally:
        stop(proc)
