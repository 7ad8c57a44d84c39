"""A thin, synchronous Kubernetes API edge: GET, server-side apply, status, Events.

The operator runs its reconcilers in its own worker threads, so blocking calls here do
not stall the watches. Every write is counted in the ``shoal_api_writes_total`` metric.
"""

from __future__ import annotations

import datetime as dt
import json
import socket
import struct
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException
from kubernetes.utils.keepalive import tcp_keepalive_socket_options

from shoal.api.constants import FIELD_MANAGER
from shoal.kube.drift import digest, holds, last_applied, stamped
from shoal.kube.paths import collection_path, object_path, path_of
from shoal.telemetry import WRITES

ApiError = ApiException
# Failures that are the API server's, not the request's: unreachable (0, see _call),
# shedding load or starting (429), failing or timing out (5xx).
TRANSIENT_STATUSES = frozenset({0, 429, 500, 502, 503, 504})
# Refusals by the API server that no retry can cure: the rendered object is invalid or
# forbidden as it stands.
TERMINAL_API_STATUSES = frozenset({400, 403, 404, 422})


def api_message(exc: ApiException) -> str:
    """What the API server said, from the Status in a failed reply's body."""
    try:
        return str(json.loads(exc.body or "").get("message", exc.body))
    except (TypeError, ValueError, AttributeError):
        return str(exc.body)


class WriteFence(Protocol):
    """Whether this replica may write now (shoal.leader.Fence): returns, or refuses."""

    def check(self) -> None: ...


class KnownState(Protocol):
    """What the watches vouch for (shoal.verified.Verified)."""

    def record(self, wanted: str, body: dict[str, Any]) -> None: ...

    def vouch(self, desired: dict[str, Any], wanted: str) -> dict[str, Any] | None: ...

    def absent(self, desired: dict[str, Any]) -> bool: ...


def socket_options() -> list[tuple[int, int, int]]:
    """client-go's TCP keep-alive, and a reset on close (SO_LINGER 0): a connection the
    operator drops, or leaves by exiting, takes its unsent bytes with it. A write sent
    into a partition is then never delivered after the leader stepped down."""
    linger = (socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    return [*tcp_keepalive_socket_options(), linger]  # type: ignore[list-item]


def load_api_client(
    kubeconfig: str | None = None,
    connections: int = 10,
    user_agent: str = "",
    retries: bool = True,
) -> client.ApiClient:
    """In-cluster credentials when running in a pod, else the kubeconfig. ``connections``
    bounds the kept-alive connections: one per concurrent caller, or each excess call
    pays a new TLS handshake. ``user_agent`` names this replica in the API server's
    audit log. Without ``retries`` a request that times out fails at once (urllib3
    would otherwise try a GET four times over)."""
    configuration = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=kubeconfig, client_configuration=configuration
        )
    configuration.connection_pool_maxsize = connections
    configuration.socket_options = socket_options()
    if not retries:
        configuration.retries = False
    api = client.ApiClient(configuration)
    if user_agent:
        api.user_agent = user_agent
    return api


class Kube:
    """The operator's API access. Thread-safe."""

    def __init__(
        self,
        api: client.ApiClient,
        known: KnownState | None = None,
        fence: WriteFence | None = None,
    ) -> None:
        """``known`` is told every child as apply leaves it, and may vouch that a child
        is unchanged since it was last verified, or does not exist, sparing the read.
        ``fence``, with leader election, is checked before every write is sent."""
        self.api = api
        self._known = known
        self._fence = fence

    # ----------------------------------------------------------------------- raw
    def _call(
        self,
        method: str,
        path: str,
        body: Any = None,
        query: list[tuple[str, str]] | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> Any:
        method, url, headers, payload, _ = self.api.param_serialize(
            method=method,
            resource_path=path,
            query_params=query or [],
            header_params={"Accept": accept, "Content-Type": content_type},
            body=body,
            auth_settings=["BearerToken"],
        )
        if method != "GET" and self._fence is not None:
            # The one write path: as late as possible before the bytes leave.
            self._fence.check()
        try:
            response = self.api.call_api(
                method, url, header_params=headers, body=payload, _request_timeout=30
            )
        except urllib3.exceptions.HTTPError as exc:
            # Unreachable (restarting, partitioned): an API error like any other
            # transient one, retried with backoff, logged as one line.
            reason = getattr(exc, "reason", None) or exc
            raise ApiException(status=0, reason=f"API server unreachable: {reason}") from exc
        raw = response.read()  # type: ignore[no-untyped-call]
        if not 200 <= response.status < 300:
            raise ApiException(http_resp=response)
        return json.loads(raw) if raw else None

    def _count(self, kind: str) -> None:
        WRITES.labels(kind).inc()

    # ----------------------------------------------------------------------- reads
    # Reads ask for resourceVersion=0: the API server answers from its watch cache
    # instead of a quorum read from etcd. The cache is never older than the watch event
    # that triggered the pass (events come from it), which is all a level-triggered
    # reconcile needs, and it costs the API server and etcd far less at scale.
    CACHED = ("resourceVersion", "0")

    def get(
        self, api_version: str, kind: str, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = self._call(
                "GET", object_path(api_version, kind, name, namespace), query=[self.CACHED]
            )
            return result
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def get_path(self, path: str, accept: str = "application/json") -> dict[str, Any]:
        """A document the API server serves outside its resources (discovery, keys)."""
        result: dict[str, Any] = self._call("GET", path, accept=accept)
        return result

    def list_metadata(
        self, api_version: str, kind: str, namespace: str | None = None, labels: str = ""
    ) -> list[dict[str, Any]]:
        """Only the objects' metadata (PartialObjectMetadataList): what a caller needing
        names and versions reads, at a fraction of the bytes and memory of the objects."""
        query = [self.CACHED]
        if labels:
            query.append(("labelSelector", labels))
        result = self._call(
            "GET",
            collection_path(api_version, kind, namespace),
            query=query,
            accept="application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
        )
        items: list[dict[str, Any]] = result.get("items") or []  # null when empty
        return items

    def list(
        self,
        api_version: str,
        kind: str,
        namespace: str | None = None,
        labels: str = "",
        fields: str = "",
    ) -> list[dict[str, Any]]:
        query = [self.CACHED]
        if labels:
            query.append(("labelSelector", labels))
        if fields:
            query.append(("fieldSelector", fields))
        result = self._call("GET", collection_path(api_version, kind, namespace), query=query)
        items: list[dict[str, Any]] = result.get("items", [])
        return items

    # ----------------------------------------------------------------------- writes
    def apply(self, desired: dict[str, Any]) -> dict[str, Any]:
        """Server-side apply ``desired`` unless the child already holds it.

        The child holds it when Shoal's last apply carried this very intent (the digest
        in its applied annotation) and every field of it still has the wanted value; a
        field Shoal stopped sending changes the digest, so the apply that drops it is
        sent. Returns the child as it stands afterwards (for a child the watch vouches
        for, the cache's projection of it: metadata, and a Deployment's rollout status).
        Fields other managers own (an HPA's replicas, an admin's annotations) are left
        alone; fields Shoal owns are forced back.
        """
        wanted = digest(desired)
        live: dict[str, Any] | None = None
        if self._known is not None:
            vouched = self._known.vouch(desired, wanted)
            if vouched is not None:
                return vouched
            if not self._known.absent(desired):
                live = self._get_object(desired)
        else:
            live = self._get_object(desired)
        if live is not None and last_applied(live) == wanted and holds(live, desired):
            self._record(wanted, live)
            return live
        applied: dict[str, Any] = self._call(
            "PATCH",
            path_of(desired),
            body=stamped(desired, wanted),
            query=[("fieldManager", FIELD_MANAGER), ("force", "true")],
            content_type="application/apply-patch+yaml",
        )
        self._count(desired["kind"])
        self._record(wanted, applied)
        return applied

    def preview(self, desired: dict[str, Any]) -> dict[str, Any]:
        """What the child would be if Shoal applied ``desired`` now (a server-side dry
        run: nothing is written). Equal to the live child exactly when it has converged,
        removed fields included."""
        result: dict[str, Any] = self._call(
            "PATCH",
            path_of(desired),
            body=stamped(desired),
            query=[("fieldManager", FIELD_MANAGER), ("force", "true"), ("dryRun", "All")],
            content_type="application/apply-patch+yaml",
        )
        return result

    def _get_object(self, desired: dict[str, Any]) -> dict[str, Any] | None:
        meta = desired["metadata"]
        return self.get(desired["apiVersion"], desired["kind"], meta["name"], meta.get("namespace"))

    def _record(self, wanted: str, body: dict[str, Any]) -> None:
        if self._known is not None:
            self._known.record(wanted, body)

    def set_finalizers(self, obj: dict[str, Any], finalizers: Sequence[str]) -> dict[str, Any]:
        """Replace ``obj``'s finalizers, failing (409) if it changed since it was read;
        returns the object as the write left it."""
        meta = obj["metadata"]
        result: dict[str, Any] = self._call(
            "PATCH",
            path_of(obj),
            body={
                "metadata": {"finalizers": finalizers, "resourceVersion": meta["resourceVersion"]}
            },
            query=[("fieldManager", FIELD_MANAGER)],
            content_type="application/merge-patch+json",
        )
        self._count(f"{obj['kind']}/finalizers")
        return result

    def delete(self, obj: dict[str, Any]) -> bool:
        """Delete ``obj``; False when it was already gone."""
        try:
            self._call("DELETE", path_of(obj))
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        self._count(f"{obj['kind']}/delete")
        return True

    def evict(self, pod: dict[str, Any]) -> bool:
        """Ask the Eviction API to remove ``pod``: its PodDisruptionBudget is honoured and
        its termination grace period applies. False when a budget refuses it for now
        (429) or it is already gone."""
        meta = pod["metadata"]
        body = {
            "apiVersion": "policy/v1",
            "kind": "Eviction",
            "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
        }
        try:
            self._call(
                "POST", path_of({**pod, "apiVersion": "v1", "kind": "Pod"}) + "/eviction", body
            )
        except ApiException as exc:
            if exc.status in (404, 429):
                return False
            raise
        self._count("Pod/eviction")
        return True

    def patch_status(self, obj: dict[str, Any], status: dict[str, Any]) -> dict[str, Any] | None:
        """Merge-patch the status subresource of a shoal.dev object; a key set to None is
        removed. Returns the object as the write left it (None: it is gone)."""
        try:
            result: dict[str, Any] = self._call(
                "PATCH",
                path_of(obj) + "/status",
                body={"status": status},
                query=[("fieldManager", FIELD_MANAGER)],
                content_type="application/merge-patch+json",
            )
        except ApiException as exc:
            if exc.status != 404:
                raise
            return None
        self._count(f"{obj['kind']}/status")
        return result

    def event(self, obj: dict[str, Any], type_: str, reason: str, message: str) -> None:
        """Record a core/v1 Event about ``obj`` (best effort: never fails a reconcile)."""
        meta = obj["metadata"]
        namespace = meta.get("namespace") or "default"
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{uuid.uuid4().hex[:12]}", "namespace": namespace},
            "involvedObject": {
                "apiVersion": obj["apiVersion"],
                "kind": obj["kind"],
                "name": meta["name"],
                "namespace": meta.get("namespace"),
                "uid": meta.get("uid"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "type": type_,
            "reason": reason,
            "message": message[:1024],
            "firstTimestamp": now,
            "lastTimestamp": now,
            "eventTime": None,
            "count": 1,
            "source": {"component": FIELD_MANAGER},
            "reportingComponent": FIELD_MANAGER,
            "reportingInstance": FIELD_MANAGER,
        }
        try:
            self._call("POST", collection_path("v1", "Event", namespace), body=body)
            self._count("Event")
        except ApiException:
            pass
