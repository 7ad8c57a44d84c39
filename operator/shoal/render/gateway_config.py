"""What a pool's gateway is configured from: plain, frozen data (no Kubernetes objects).

The operator builds a :class:`GatewayConfig` from the TenantPool, its admitted tenants,
its InferenceModels and their ready endpoints, the gateway's own replicas, the
cluster's service-account signing keys and those of the OIDC issuers the pool trusts;
:func:`shoal.render.haproxy_config.haproxy_config` turns it into HAProxy's
configuration, a pure function like config.pbtxt. Tests build one directly, with
127.0.0.1 addresses, and run the real haproxy on it.
"""

from __future__ import annotations

from dataclasses import dataclass

from shoal.api.byte_size import bytes_of
from shoal.api.gateway import DEFAULT_REQUEST_BODY
from shoal.render.gateway_files import RUNTIME_DIR

# The gateway's ports, as Triton's: clients see the same API on the same ports.
HTTP_PORT = 8000
GRPC_PORT = 8001
METRICS_PORT = 8405
PEERS_PORT = 10000
# spec.gateway.maxRequestBody's default, in bytes.
DEFAULT_MAX_REQUEST_BODY = bytes_of(DEFAULT_REQUEST_BODY)
# Requests carry their priority in this header (1 is the highest level); requests
# without it get the model's default priority.
PRIORITY_HEADER = "X-Shoal-Priority"
REQUEST_ID_HEADER = "X-Request-ID"
# The verified tenant, as the gateway tells the model (a client's own is removed).
TENANT_HEADER = "X-Shoal-Tenant"


@dataclass(frozen=True)
class Limits:
    """One tenant's limits at the edge, for the whole gateway (all replicas together).

    ``None`` means no limit of that kind."""

    requests_per_second: int | None = None
    # Requests a tenant may send beyond its rate within one second.
    burst: int = 0
    # Requests of the tenant in flight at once (in the models or waiting for them).
    concurrency: int | None = None
    # How long a request over the concurrency cap waits for a slot before a 429.
    queue_timeout_ms: int = 1000


@dataclass(frozen=True)
class Server:
    """One ready Triton replica of a model."""

    name: str  # the pod's name
    host: str  # the pod's IP (a test: 127.0.0.1)
    http_port: int = HTTP_PORT
    grpc_port: int = GRPC_PORT


@dataclass(frozen=True)
class Route:
    """One InferenceModel reached through the gateway."""

    tenant: str  # the model's namespace: only this tenant may call it
    model: str  # the Triton model name clients use in /v2/models/<model>/...
    backend: str  # a name unique in the gateway, e.g. "m_team-a_ranker"
    servers: tuple[Server, ...]
    timeout_ms: int  # a request still running after this gets 504
    # Requests one replica works on at once; more wait in the gateway's queue, ordered
    # by priority (Triton batches up to its maxBatchSize: a couple of batches in flight).
    server_maxconn: int
    # The BatchPolicy's lanes: 0 means no priorities; otherwise 1 (highest) .. levels.
    priority_levels: int = 0
    default_priority: int = 0
    # A header whose value keeps a client on one replica (e.g. a session id).
    sticky_header: str | None = None
    # The model's ready overflow replicas (spec.overflow): a request that finds every
    # one of ``servers`` at its maxconn goes to one of them with a free slot instead of
    # waiting in the queue.
    overflow: tuple[Server, ...] = ()


@dataclass(frozen=True)
class Peer:
    """One replica of the gateway, for the stick tables' synchronisation."""

    name: str  # the pod's name, which that replica runs haproxy with (-L)
    host: str
    port: int = PEERS_PORT


@dataclass(frozen=True)
class SigningKey:
    """A public key the cluster signs service-account tokens with."""

    kid: str
    alg: str  # RS256, RS384, RS512, ES256, ES384, ES512
    path: str  # the PEM file, as mounted in the gateway


@dataclass(frozen=True)
class TrustedIssuer:
    """An OIDC issuer whose tokens the gateway accepts beside service-account tokens."""

    issuer: str  # its tokens' "iss", exactly
    audience: str  # the "aud" its tokens must carry for this gateway
    # The claim whose value, a JSON string, is the tenant namespace: a name, or names
    # separated by "." for a claim inside an object.
    tenant_claim: str
    keys: tuple[SigningKey, ...]  # none: each of its tokens is refused


@dataclass(frozen=True)
class GatewayConfig:
    pool: str
    issuer: str  # the service-account tokens' "iss"
    audience: str  # the "aud" a token must carry for this gateway
    keys: tuple[SigningKey, ...]
    # Every tenant the pool admits, with its limits in force now (defaults, a tenant's
    # own, or a time window's).
    tenants: tuple[tuple[str, Limits], ...]
    routes: tuple[Route, ...]
    peers: tuple[Peer, ...] = ()
    http_port: int = HTTP_PORT
    grpc_port: int = GRPC_PORT
    metrics_port: int = METRICS_PORT
    # Where the master CLI and runtime sockets live in the gateway's container.
    runtime_dir: str = RUNTIME_DIR
    # The address the HTTP, gRPC and metrics ports listen on: "" is every address (a
    # pod); tests on a shared machine listen on 127.0.0.1 only.
    bind_address: str = ""
    # OIDC issuers whose tokens name a tenant too (spec.gateway.oidc).
    oidc: tuple[TrustedIssuer, ...] = ()
    # The longest request body passed on, in bytes (spec.gateway.maxRequestBody).
    max_request_body: int = DEFAULT_MAX_REQUEST_BODY

    @property
    def replicas(self) -> int:
        """Gateway replicas sharing the limits (each enforces its part of concurrency)."""
        return max(1, len(self.peers))
