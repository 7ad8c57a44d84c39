"""Static files over HTTPS with a certificate of a throwaway private CA: what a model's
``https://`` archive URL names when the server is a company's own (an artifact store
behind an internal CA), and what the model's ``caBundle`` must then trust. The
real-node tier serves a model archive from it on the node's bridge address; the unit
tier runs the fetch container's scripts against it on loopback.
"""

from __future__ import annotations

import datetime as dt
import functools
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from e2e.cluster.pki import webhook_serving


@dataclass(frozen=True)
class FileServer:
    """A running server: ``url`` is https://address:port, ``ca_pem`` the certificate of
    the CA that signed its own."""

    url: str
    ca_pem: bytes
    directory: Path


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """Nothing per request on the test's output."""


@contextmanager
def https_files(directory: Path, address: str, state: Path) -> Iterator[FileServer]:
    """Serve ``directory`` on ``address`` (a free port) with a certificate for that
    address, its CA and keys written under ``state``; stopped on the way out."""
    ca_pem = webhook_serving(state, [address], "shoal-test-files-ca", dt.timedelta(hours=2))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(state / "tls.crt", state / "tls.key")
    handler = functools.partial(_Quiet, directory=str(directory))
    server = ThreadingHTTPServer((address, 0), handler)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield FileServer(f"https://{address}:{server.server_address[1]}", ca_pem, directory)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
