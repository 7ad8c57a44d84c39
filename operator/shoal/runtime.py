"""Starting the operator: its state, built once, and kopf with deliberate settings.

Shoal registers only indexing and event handlers, which keep nothing on the watched
objects: no progress or last-handled annotations that would make a GitOps-synced object
look drifted, and no finalizer of kopf's.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

import kopf
import prometheus_client

from shoal import __version__
from shoal.cache import Cache
from shoal.controller import dispatch
from shoal.kube.client import Kube, load_api_client
from shoal.leader import Election, Fence, follower_liveness, lead
from shoal.metrics.reader import MetricsReader
from shoal.settings import Settings
from shoal.state import Operator
from shoal.telemetry import BUILD_INFO, LEADER
from shoal.verified import Verified
from shoal.watched import CHILDREN, INDEXED


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf keeps a "last handled" copy of an object for its change handlers, and builds
    one (a deep copy of the whole object) on every event. Shoal has no change handlers:
    nothing is built, nothing is stored on the objects."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        return None


# Seconds between the tries of one failed API request of kopf's (its watches and lists):
# never more than 5 s apart, 62.5 s in all (kopf's default gives up after 54 s).
API_ERROR_BACKOFFS = (0.5, 1.0, 2.0, 4.0) + (5.0,) * 10
# Seconds a kopf per-object worker waits for the object's next event before it exits.
# Each waiting worker holds its object's last event, decoded in full: with kopf's 5 s,
# a burst of new models keeps thousands of them alive (seven watched objects a model).
# At 1,000 models the operator peaked at 167 MB with 5 s and 159 MB with this, side by
# side on the same machine, at the same speed. An object's events come within a
# second (create, then the controllers' status updates); a later one starts a new
# worker, which costs a task, not a request.
WORKER_IDLE_SECONDS = 0.5


def operator_settings(config: Settings) -> kopf.OperatorSettings:
    """The kopf settings Shoal runs with (pure: builds and returns an object)."""
    settings = kopf.OperatorSettings()
    # A watch that silently stalls is a known failure mode: bound every watch request
    # so it is re-established even when the server never closes it.
    settings.watching.server_timeout = config.watch_server_timeout
    settings.watching.client_timeout = config.watch_client_timeout
    settings.watching.connect_timeout = 30
    # kopf's own backoffs between failed API requests grow to 13 and 21 s: a watch that
    # failed through a 15 s API-server restart would try again up to 13 s after the
    # server was back. Capped at 5 s, with as long a total before a request gives up.
    settings.networking.error_backoffs = API_ERROR_BACKOFFS
    settings.queueing.idle_timeout = WORKER_IDLE_SECONDS
    # kopf would post an Event for a handler's log line through its own client, past
    # the leader's write fence: Shoal posts its Events itself (shoal.kube.client).
    settings.posting.enabled = False
    settings.persistence.diffbase_storage = NoDiffBase()
    # The API server filters the children's watches: only Shoal's objects, its models'
    # EndpointSlices and its gateways' pods come to the operator at all.
    for watched in CHILDREN:
        if watched.selector:
            selector = (watched.group, watched.version, watched.plural)
            settings.watching.label_selectors[selector] = watched.selector
    # One active replica (the Lease's holder, shoal.leader); no kopf peering objects.
    settings.peering.standalone = True
    return settings


def build(config: Settings, fence: Fence | None = None, user_agent: str = "") -> Operator:
    """The operator's state, before anything is watched. With ``fence`` (leader
    election), every write is checked against it."""
    cache = Cache()
    verified = Verified(cache, watched={w.kind for w in (*INDEXED, *CHILDREN)})
    reader = MetricsReader(config.prometheus_url) if config.prometheus_url else None
    op = Operator(
        settings=config,
        # The workers, the resync and the probes: one connection each.
        kube=Kube(
            # No urllib3 retries behind the fence: a resent write would skip its check.
            load_api_client(
                connections=config.workers + 4, user_agent=user_agent, retries=fence is None
            ),
            known=verified,
            fence=fence,
        ),
        cache=cache,
        verified=verified,
        metrics=reader,
    )
    op.attach(dispatch)
    return op


def run(config: Settings) -> None:
    """Run the operator until it is told to stop (blocking)."""
    import shoal.handlers  # noqa: F401  - registers the handlers with kopf

    log_format = kopf.LogFormat.JSON if config.log_format == "json" else kopf.LogFormat.FULL
    kopf.configure(verbose=config.verbose, log_format=log_format, log_prefix=True)
    if not config.verbose:
        # kopf says "Handler ... succeeded" for every event of every watched object.
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    # Every replica serves its metrics, followers too: a scrape target that answers
    # only while leading would read as a target down. shoal_leader says which leads.
    BUILD_INFO.labels(__version__).set(1)
    LEADER.set(0)
    if config.metrics_port:
        prometheus_client.start_http_server(config.metrics_port)
    election = Election(config.leader_election_namespace or "", config.pod_name)
    # Each replica's requests carry its name: the audit log tells who wrote what.
    user_agent = f"shoal-operator/{__version__} ({election.who()})"
    leadership, fence = None, None
    if config.leader_election_namespace:
        fence = Fence()
        with follower_liveness(config.liveness_endpoint):
            # A Lease request is given up after its timeout, never tried again unasked.
            lease_api = load_api_client(connections=2, user_agent=user_agent, retries=False)
            leadership = lead(lease_api, election, fence)
    LEADER.set(1)
    op = build(config, fence, user_agent)
    op.leadership = leadership
    kopf.run(
        settings=operator_settings(config),
        standalone=True,
        clusterwide=not config.namespaces,
        # Watching some namespaces: the gateways' too (their replicas are peers).
        namespaces=[*config.namespaces, config.gateway_namespace] if config.namespaces else [],
        liveness_endpoint=config.liveness_endpoint,
        # kopf would otherwise name itself after the user (getpass), which fails for a
        # UID without a passwd entry: the image's 65532, or OpenShift's assigned UIDs.
        # (kopf types it as a NewType of str that it does not export.)
        identity=election.who(),  # type: ignore[arg-type]
        memo=kopf.Memo(operator=op),
    )
