"""Leader election: of the operator's replicas, only the holder of a Lease reconciles.

The kubernetes client's leader-election module (a coordination.k8s.io Lease, client-go's
algorithm and default timings) decides. A replica waits as a follower, answering its
liveness probe, until it holds the Lease; then the operator starts. Losing the Lease
(it could not be renewed within the renew deadline: the API server unreachable, or
another replica took it) ends the process at once, as controller-runtime does, so two
replicas never reconcile together for longer than the renew deadline; the kubelet
restarts it as a follower. A leader that stops gracefully releases the Lease, and a
follower takes it at its next retry; a killed leader's Lease expires after the lease
duration first.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock

log = logging.getLogger(__name__)

LEASE_NAME = "shoal-operator"
# client-go's defaults (controller-runtime's too).
LEASE_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2


@dataclass(frozen=True)
class Election:
    """Where the Lease is and who this replica is."""

    namespace: str
    identity: str = ""

    def who(self) -> str:
        return self.identity or f"{socket.gethostname()}_{os.getpid()}"


@contextmanager
def follower_liveness(endpoint: str) -> Iterator[None]:
    """Answer the liveness probe (200 on its path) while waiting to lead; the port is
    free again when the block ends, for the operator's own endpoint."""
    parts = urlsplit(endpoint)
    path = parts.path or "/"

    class Probe(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status = 200 if self.path.split("?")[0] == path else 404
            self.send_response(status)
            self.end_headers()
            self.wfile.write(b'{"follower": true}' if status == 200 else b"")

        def log_message(self, format: str, *args: object) -> None:
            pass  # probes every few seconds: not worth a log line each

    server = ThreadingHTTPServer((parts.hostname or "0.0.0.0", parts.port or 80), Probe)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield
    finally:
        server.shutdown()
        server.server_close()


class _Lock(LeaseLock):
    """The client's Lease lock, which stops renewing once the Lease is released."""

    released = False

    def update(self, name: str, namespace: str, updated_record: Any) -> bool:
        if self.released:
            return False
        return bool(super().update(name, namespace, updated_record))  # type: ignore[no-untyped-call]


@dataclass
class Leadership:
    """This replica's hold on the Lease."""

    lock: _Lock
    identity: str

    def release(self) -> None:
        """Hand the Lease over at once (a graceful stop): stop renewing it and clear its
        holder, so a follower takes it at its next retry instead of waiting for it to
        expire. Only when this replica still holds it."""
        self.lock.released = True
        api: client.CoordinationV1Api = self.lock.api_instance
        try:
            lease = api.read_namespaced_lease(self.lock.name, self.lock.namespace)
            if lease.spec is None or lease.spec.holder_identity != self.identity:
                return
            lease.spec.holder_identity = None
            # The resourceVersion read above: a Lease taken meanwhile is left alone.
            api.replace_namespaced_lease(self.lock.name, self.lock.namespace, lease)
            log.info("released the leader Lease %s/%s", self.lock.namespace, self.lock.name)
        except client.ApiException as exc:
            log.warning("releasing the leader Lease failed: %s", exc.reason)


def lead(
    api: client.ApiClient,
    election: Election,
    on_lost: Callable[[], None] | None = None,
) -> Leadership:
    """Block until this replica holds the Lease; keep renewing it in the background.
    ``on_lost`` runs if it is ever lost (by default the process exits with status 1),
    unless it was released."""
    identity = election.who()
    lock = _Lock(LEASE_NAME, election.namespace, identity)  # type: ignore[no-untyped-call]
    lock.api_instance = client.CoordinationV1Api(api)
    leading = threading.Event()

    def lost() -> None:
        if lock.released:
            return  # handed over on purpose: the process is stopping
        log.error("lost the leader Lease %s/%s: stopping", election.namespace, LEASE_NAME)
        if on_lost is not None:
            on_lost()
        else:
            os._exit(1)  # at once: no reconcile may run without the Lease

    config = electionconfig.Config(  # type: ignore[no-untyped-call]
        lock,
        lease_duration=LEASE_SECONDS,
        renew_deadline=RENEW_DEADLINE_SECONDS,
        retry_period=RETRY_SECONDS,
        onstarted_leading=leading.set,
        onstopped_leading=lost,
    )
    log.info("waiting to lead (Lease %s/%s, as %s)", election.namespace, LEASE_NAME, identity)
    threading.Thread(
        target=leaderelection.LeaderElection(config).run,  # type: ignore[no-untyped-call]
        name="leader-election",
        daemon=True,
    ).start()
    leading.wait()
    log.info("leading (Lease %s/%s, as %s)", election.namespace, LEASE_NAME, identity)
    return Leadership(lock, identity)
