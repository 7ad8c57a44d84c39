"""Leader election with a write fence: of the operator's replicas, only the holder of a
fresh Lease writes.

The election is client-go's algorithm on a coordination.k8s.io Lease (holder, lease
duration, renew time; client-go's default timings), written here rather than taken
from the kubernetes client's ``leaderelection`` module, which measures on the wall
clock, restarts its renew deadline after every attempt and sends Lease requests with no
timeout: a leader paused past its Lease, or cut off from the API server, went on
writing over its successor's work. Here:

- **The fence.** The leader records when its last successful renew *began*, on
  CLOCK_BOOTTIME (it keeps counting through a SIGSTOP, a throttled container, a frozen
  VM or a suspended host). Every write the operator sends passes ``Fence.check`` first
  (``shoal.kube.client``); once the renew deadline has passed since that moment, the
  write is refused and the process exits at once. The kubelet restarts it as a
  follower.
- **Bounded Lease calls.** Each Lease request times out after ``LEASE_CALL_SECONDS``,
  under the retry period, so a partitioned leader notices within the renew deadline and
  exits while still cut off. Its connections close with a reset (``SO_LINGER`` 0, see
  ``shoal.kube.client.socket_options``): a write it sent into the partition is dropped
  with the socket rather than delivered when the network returns.
- **A Lease that names someone else ends leadership at once** (another replica took
  it, or an admin handed it over by hand). A follower takes a Lease only when it is
  free: released (no holder), or unchanged for a whole lease duration as this replica
  observed it. Its own name on a Lease it did not renew (a restarted container, a hand
  edit) counts as someone else's, so it waits too.

What this guarantees: a replica sends no write later than ``RENEW_DEADLINE_SECONDS``
after the start of its last successful renew, and no other replica starts before
``LEASE_SECONDS`` after it observed that renew. The 5 s between the two absorb the
clocks' rates and the time a write admitted by the fence takes to reach the API server.

What it cannot guarantee (the API server has no fencing tokens for ordinary objects):
- a write admitted just before the deadline that the API server holds for more than
  those 5 s (an overloaded server, a request queued by priority and fairness) still
  lands after the successor started;
- the process can be stopped between the check and the bytes leaving it (tens of
  microseconds): resumed past its Lease, that one write is sent;
- the clocks of the two replicas must run at about the same rate (not agree on the
  time): a clock running more than a third slow breaks the margin.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import urllib3
from kubernetes import client

log = logging.getLogger(__name__)

LEASE_NAME = "shoal-operator"
# client-go's defaults (controller-runtime's too).
LEASE_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_SECONDS = 2
# Each Lease request gives up after this: below the retry period, so that a renew that
# hangs on a partition is given up and retried, and the deadline is reached on time.
LEASE_CALL_SECONDS = 1.5
# A graceful release's tries before it leaves the Lease to expire, and each call's
# timeout (a stopping process may be slow to answer; nothing waits on it but the stop).
RELEASE_TRIES = 3
RELEASE_CALL_SECONDS = 5.0


def boottime() -> float:
    """Seconds on a clock that never jumps and keeps counting while the process, its
    VM or its host is stopped."""
    return time.clock_gettime(time.CLOCK_BOOTTIME)


def step_down() -> None:
    """End the process at once: nothing may run without the Lease. The kubelet restarts
    it as a follower."""
    log.error("leadership lost: stepping down")
    logging.shutdown()
    os._exit(1)


class NotLeadingError(RuntimeError):
    """A write refused: this replica does not hold a fresh Lease."""


@dataclass
class Fence:
    """Whether this replica may write now: it renewed its Lease within the renew deadline.

    One per process, shared by the election (which renews it) and the API edge (which
    checks it before every write)."""

    renew_deadline: float = RENEW_DEADLINE_SECONDS
    clock: Callable[[], float] = boottime
    on_expired: Callable[[], None] = step_down
    _renewed_at: float | None = field(default=None, init=False)
    _guard: threading.Lock = field(default_factory=threading.Lock, init=False)

    def renewed(self, began: float) -> None:
        """A renew (or the acquisition) that began at ``began`` succeeded."""
        with self._guard:
            if self._renewed_at is None or began > self._renewed_at:
                self._renewed_at = began

    def revoke(self) -> None:
        """Leadership ended (released, or the Lease names another): no more writes."""
        with self._guard:
            self._renewed_at = None

    def deadline(self) -> float | None:
        """When the fence closes unless renewed; None when it is closed."""
        with self._guard:
            return None if self._renewed_at is None else self._renewed_at + self.renew_deadline

    def fresh(self) -> bool:
        deadline = self.deadline()
        return deadline is not None and self.clock() < deadline

    def check(self) -> None:
        """Return if a write may be sent now; otherwise step down and refuse it."""
        if self.fresh():
            return
        self.on_expired()
        raise NotLeadingError("this replica's leader Lease is not fresh: the write was not sent")


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


# ----------------------------------------------------------------------- the decision
@dataclass(frozen=True)
class Observed:
    """A Lease as this replica last saw it change, and when (on the fence's clock)."""

    version: str
    holder: str
    duration: float
    since: float


def may_take(observed: Observed, now: float) -> bool:
    """Whether a follower may take the Lease: released, or unrenewed for its duration
    since this replica saw it change. Its own name counts as another's (see above)."""
    return not observed.holder or now - observed.since >= observed.duration


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class Elector:
    """Runs the election for one replica; ``fence`` says whether it leads."""

    def __init__(
        self,
        api: client.ApiClient,
        election: Election,
        fence: Fence,
        on_lost: Callable[[], None] = step_down,
    ) -> None:
        self.leases = client.CoordinationV1Api(api)
        self.namespace = election.namespace
        self.identity = election.who()
        self.fence = fence
        self.on_lost = on_lost
        self.leading = threading.Event()
        self.released = False
        self._observed: Observed | None = None

    # ------------------------------------------------------------------ one attempt
    def _observe(self, lease: client.V1Lease) -> Observed:
        spec = lease.spec or client.V1LeaseSpec()
        version = str(lease.metadata.resource_version if lease.metadata else "")
        if self._observed is None or self._observed.version != version:
            self._observed = Observed(
                version,
                spec.holder_identity or "",
                float(spec.lease_duration_seconds or LEASE_SECONDS),
                self.fence.clock(),
            )
        return self._observed

    def attempt(self, began: float) -> bool | None:
        """One try at acquiring or renewing. True: this replica holds the Lease, renewed
        in this try; False: another holds it; None: the try failed (timeout, conflict),
        to be retried."""
        try:
            lease = self.leases.read_namespaced_lease(
                LEASE_NAME, self.namespace, _request_timeout=LEASE_CALL_SECONDS
            )
        except client.ApiException as exc:
            if exc.status != 404:
                return None
            return self._create(began)
        observed = self._observe(lease)
        leading = self.leading.is_set()
        if leading and observed.holder != self.identity:
            return False
        if not leading and not may_take(observed, self.fence.clock()):
            return False
        spec = lease.spec or client.V1LeaseSpec()
        now = _now()
        if not leading:
            spec.acquire_time = now
            spec.lease_transitions = (spec.lease_transitions or 0) + 1
        spec.holder_identity = self.identity
        spec.lease_duration_seconds = LEASE_SECONDS
        spec.renew_time = now
        lease.spec = spec
        if self.released:
            return None  # handed over meanwhile: renewing now would undo the hand-over
        try:
            # The resourceVersion read above: whoever wrote in between wins.
            self.leases.replace_namespaced_lease(
                LEASE_NAME, self.namespace, lease, _request_timeout=LEASE_CALL_SECONDS
            )
        except client.ApiException:
            return None
        self.fence.renewed(began)
        return True

    def _create(self, began: float) -> bool | None:
        now = _now()
        lease = client.V1Lease(
            metadata=client.V1ObjectMeta(name=LEASE_NAME, namespace=self.namespace),
            spec=client.V1LeaseSpec(
                holder_identity=self.identity,
                lease_duration_seconds=LEASE_SECONDS,
                acquire_time=now,
                renew_time=now,
                lease_transitions=0,
            ),
        )
        try:
            self.leases.create_namespaced_lease(
                self.namespace, lease, _request_timeout=LEASE_CALL_SECONDS
            )
        except client.ApiException:
            return None
        self.fence.renewed(began)
        return True

    # ------------------------------------------------------------------ the loop
    def run(self) -> None:
        """Try every retry period: as a follower until the Lease is taken, then as the
        leader until it is lost or released (never returns while leading)."""
        while not self.released:
            began = self.fence.clock()
            if self.leading.is_set() and not self.fence.fresh():
                return self._lose("not renewed within the renew deadline")
            try:
                outcome = self.attempt(began)
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                log.debug("Lease request failed: %s", exc)
                outcome = None
            if self.released:
                return
            if outcome is True and not self.leading.is_set():
                self.leading.set()
            elif outcome is False and self.leading.is_set():
                return self._lose("the Lease names another holder")
            pause = began + RETRY_SECONDS - self.fence.clock()
            deadline = self.fence.deadline()
            if self.leading.is_set() and deadline is not None:
                # Wake at the deadline at the latest, to step down on time.
                pause = min(pause, deadline - self.fence.clock())
            time.sleep(max(0.0, pause))

    def _lose(self, why: str) -> None:
        self.fence.revoke()
        if self.released:
            return  # handed over on purpose: the process is stopping
        log.error("lost the leader Lease %s/%s: %s", self.namespace, LEASE_NAME, why)
        self.on_lost()

    # ------------------------------------------------------------------ hand-over
    def release(self) -> None:
        """Hand the Lease over at once (a graceful stop): stop renewing it and clear its
        holder, so a follower takes it at its next retry instead of waiting for it to
        expire. Only when this replica still holds it."""
        self.released = True
        self.fence.revoke()
        # A renew already on its way may land between the read and the write below (a
        # 409), and a stopping process may answer slowly: try again, a few times, rather
        # than leave the Lease to expire. The release is no renew: it may take longer.
        for _ in range(RELEASE_TRIES):
            try:
                lease = self.leases.read_namespaced_lease(
                    LEASE_NAME, self.namespace, _request_timeout=RELEASE_CALL_SECONDS
                )
                if lease.spec is None or lease.spec.holder_identity != self.identity:
                    return
                lease.spec.holder_identity = None
                # The resourceVersion read above: a Lease taken meanwhile is left alone.
                self.leases.replace_namespaced_lease(
                    LEASE_NAME, self.namespace, lease, _request_timeout=RELEASE_CALL_SECONDS
                )
                log.info("released the leader Lease %s/%s", self.namespace, LEASE_NAME)
                return
            except client.ApiException as exc:
                if exc.status not in (0, 409, 429, 500, 503, 504):
                    log.warning("releasing the leader Lease failed: %s", exc.reason)
                    return
            except (urllib3.exceptions.HTTPError, OSError) as exc:
                log.info("releasing the leader Lease: %s; trying again", exc)
        log.warning("releasing the leader Lease failed %d times: it expires instead", RELEASE_TRIES)


def lead(
    api: client.ApiClient,
    election: Election,
    fence: Fence,
    on_lost: Callable[[], None] = step_down,
) -> Elector:
    """Block until this replica holds the Lease; keep renewing it in the background.
    ``on_lost`` runs if it is ever lost (by default the process exits), unless it was
    released."""
    elector = Elector(api, election, fence, on_lost)
    log.info(
        "waiting to lead (Lease %s/%s, as %s)", election.namespace, LEASE_NAME, elector.identity
    )
    threading.Thread(target=elector.run, name="leader-election", daemon=True).start()
    elector.leading.wait()
    log.info("leading (Lease %s/%s, as %s)", election.namespace, LEASE_NAME, elector.identity)
    return elector
