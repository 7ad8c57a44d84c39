"""HAProxy's configuration for a pool's gateway: :class:`GatewayConfig` in, text out.

Pure and deterministic, like config.pbtxt: the gateway's agent writes the text, checks it
with ``haproxy -c`` and reloads (:mod:`shoal.gateway.haproxy_runner`). Everything the gateway
does is done by HAProxy's own primitives; the layout is:

``frontend edge`` (the HTTP port, and the gRPC port as h2c)
    gives every request one id, answers the model-less endpoints, verifies the
    ``Authorization: Bearer`` token (``jwt_verify`` with the key its ``kid`` names among
    those of the issuer its ``iss`` names, then ``aud``, ``exp``, ``nbf``), takes the
    tenant from the verified ``sub`` of a service-account token, or from the tenant claim
    of a trusted OIDC issuer's token, and hands the request to the tenant's gate.
``backend gate_<tenant>`` (one per admitted tenant)
    the tenant's limits: its request rate, summed over every gateway replica's stick-table
    entry, and its concurrency, as the ``maxconn`` of the gate's one server, so requests
    over it wait in the gate's priority-ordered queue for ``queue_timeout_ms`` and then
    get 429. It picks the route (only among the tenant's own models) and the request's
    priority, and sends the request over a unix socket to ...
``frontend routes``
    ... which passes it to the route's backend the gate named, or to the route's
    overflow backend when none of the model's replicas has a free slot and one of its
    overflow replicas (``spec.overflow``, another pool's) has.
``backend <route.backend>`` and ``<route.backend>_grpc``
    the model's ready Triton replicas: ``balance leastconn`` (or a hash of the sticky
    header), ``maxconn`` per replica with the excess queued by priority, low lanes shed
    when the queue is long, the route's timeout (504), active health checks plus passive
    observation of errors and timeouts.
``backend <route.backend>_overflow`` and ``..._overflow_grpc``
    the model's ready overflow replicas, with the same checks and slots, no lanes.
``frontend metrics``
    HAProxy's Prometheus exporter.

Internal headers (``X-Shoal-Internal-*``) carry the gate's decisions to the second hop;
the edge removes any a client sends, and the route backends remove them before Triton.
docs/gateway.md explains each limit, its consistency across replicas and the figures
measured on the real processes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence

from shoal.api.gateway import TENANT_CLAIM_PATTERN
from shoal.render.gateway_config import (
    PRIORITY_HEADER,
    REQUEST_ID_HEADER,
    TENANT_HEADER,
    GatewayConfig,
    Limits,
    Route,
    SigningKey,
)
from shoal.render.gateway_files import ALGORITHMS, RuntimePaths

# The peers section and its stick tables. Each replica counts a tenant's accepted
# requests under its own key, "<tenant>|<replica>"; peers replicate every key to every
# replica, and a replica sums the keys of all replicas to get the tenant's total.
PEERS_SECTION = "gw"
BURST_WINDOW_S = 1
SUSTAINED_WINDOW_S = 10
RATE_TABLES = {BURST_WINDOW_S: "rate_1s", SUSTAINED_WINDOW_S: "rate_10s"}
# A key is "<tenant>|<replica>": a namespace (63) and a pod name (up to 253).
TABLE_KEY_LENGTH = 320
# Keys are touched by every request of their tenant; one idle for longer than two
# sustained windows no longer contributes to any rate.
TABLE_EXPIRE_S = 3 * SUSTAINED_WINDOW_S
# Clients retry a 429 or a shed 503 after this many seconds.
RETRY_AFTER_S = 1
# Priority lanes: while a route's top lane is in use (a lane-1 request within the last
# TOP_LANE_WINDOW_S), the lower lanes leave this share of every replica's slots free for
# it, so a top-lane request never waits for a whole service time behind them.
TOP_LANE_RESERVE = 0.25
TOP_LANE_WINDOW_S = 10
TOP_LANE_TABLE = "top_lanes"

# Health: active checks of Triton's readiness, plus passive observation of responses.
CHECK_PATH = "/v2/health/ready"
CHECK_INTERVAL_MS = 1000
CHECK_FAST_INTERVAL_MS = 500
CHECK_TIMEOUT_MS = 1000
CHECK_FALL = 2
CHECK_RISE = 2
# Consecutive failed responses (5xx but 501/505, timeouts, resets) that take a replica
# out before its checks notice; a success in between starts the count again.
ERROR_LIMIT = 10

# Tokens: clocks of the API server and the gateway may differ by this much (nbf only;
# exp is honoured to the second).
CLOCK_SKEW_S = 60
# The first entries of an "aud" array that are compared with the gateway's audience.
MAX_AUDIENCES = 8
# The source of the cluster's service-account tokens; OIDC issuers are oidc0, oidc1, ...
SA_SOURCE = "sa"
# A claim read as an integer (jwt_payload_query's 'int'), in hex: a JSON number or
# boolean is eight bytes, a JSON string its own bytes (no string of a JSON payload
# starts with a NUL or 0xFF byte). A number is a non-negative integer here.
NUMBER_HEX = "^00[0-9A-F]{14}$"
NOT_STRING_HEX = "^(00|FF)[0-9A-F]{14}$"

CONNECT_TIMEOUT_MS = 1000
HTTP_REQUEST_TIMEOUT_MS = 10_000
KEEP_ALIVE_TIMEOUT_MS = 30_000
# A reload's old worker finishes its requests for at most this long past the longest
# a request may take through the gateway.
HARD_STOP_MARGIN_MS = 10_000
# gRPC: the body bytes the gate waits for to read the model name (or the whole body
# when shorter), and for how long.
GRPC_BODY_WAIT_MS = 1000

INTERNAL_PREFIX = "X-Shoal-Internal-"
ROUTE_HEADER = INTERNAL_PREFIX + "Route"
# The gateway's own request id and the client's, from the edge to the second hop.
GATEWAY_ID_HEADER = INTERNAL_PREFIX + "Request-ID"
CLIENT_ID_HEADER = INTERNAL_PREFIX + "Client-Request-ID"
_CLIENT_ID_SENT = "{ var(txn.client_id) -m found }"
# Set on every response of the second hop: a 503 without it is the gate's own queue
# timeout, which the gate turns into 429.
ANSWERED_HEADER = INTERNAL_PREFIX + "Answered"

GRPC_SERVICE = "/inference.GRPCInferenceService/"
# RPCs whose request message carries the model name in field 1.
GRPC_MODEL_RPCS = (
    "ModelInfer",
    "ModelStreamInfer",
    "ModelReady",
    "ModelMetadata",
    "ModelConfig",
    "ModelStatistics",
)
# Server-level RPCs a client may call: they go to the tenant's first model (by name),
# so they answer for a Triton replica that serves the tenant.
GRPC_SERVER_RPCS = ("ServerLive", "ServerReady", "ServerMetadata")
# Triton's HTTP endpoints of one model (metadata is the bare path).
HTTP_MODEL_ENDPOINTS = ("ready", "config", "stats", "infer", "generate", "generate_stream")

_TENANT = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_NAME = re.compile(r"^[a-z0-9]([-.a-z0-9]{0,251}[a-z0-9])?$")
_PROXY_NAME = re.compile(r"^[A-Za-z0-9_.:-]+$")
_HOST = re.compile(r"^[A-Za-z0-9.:-]+$")
_HEADER = re.compile(r"^[A-Za-z0-9-]+$")
_PATH = re.compile(r"^/[A-Za-z0-9._/@+-]+$")
_TENANT_CLAIM = re.compile(TENANT_CLAIM_PATTERN)


class GatewayConfigError(ValueError):
    """A GatewayConfig the configuration cannot express safely."""


def gate_backend(tenant: str) -> str:
    return f"gate_{tenant}"


def grpc_backend(route: Route) -> str:
    return f"{route.backend}_grpc"


def overflow_backend(route: Route, grpc: bool = False) -> str:
    """The backend of the route's overflow replicas (HTTP, or gRPC)."""
    return f"{route.backend}_overflow{'_grpc' if grpc else ''}"


def share(limit: int, replicas: int) -> int:
    """One replica's part of a limit the replicas enforce each on its own: rounded up,
    so the replicas together never admit less than the limit."""
    return math.ceil(limit / max(1, replicas))


def burst_limit(limits: Limits) -> int | None:
    """Requests admitted in any 1 s window: the rate plus the burst."""
    if limits.requests_per_second is None:
        return None
    return limits.requests_per_second + limits.burst


def sustained_limit(limits: Limits) -> int | None:
    """Requests admitted in any 10 s window: ten seconds of the rate plus one burst, so
    a tenant sending at exactly its rate keeps its burst as headroom, and a flood is
    served at rate + burst/10 per second."""
    if limits.requests_per_second is None:
        return None
    return SUSTAINED_WINDOW_S * limits.requests_per_second + limits.burst


def reserved_slots(server_maxconn: int, levels: int, priority: int) -> int | None:
    """Slots of each replica a request of ``priority`` must leave free while the top lane
    is in use: lane p >= 2 of L lanes stops at TOP_LANE_RESERVE * (p - 1) / (L - 1) of
    them (at least one), so the lowest lane stops first and lane 1 always finds a slot."""
    if levels < 2 or priority < 2:
        return None
    return max(1, math.ceil(server_maxconn * TOP_LANE_RESERVE * (priority - 1) / (levels - 1)))


def shed_multiplier(levels: int, priority: int) -> int | None:
    """How many rounds of the backend's slots may queue before a request of
    ``priority`` is shed: lane p >= 2 of L lanes is refused once the queue holds
    (L - p + 1) rounds, so the lowest lane goes first; lane 1 is never shed."""
    if levels < 2 or priority < 2:
        return None
    return levels - priority + 1


def quote(value: str) -> str:
    """A double-quoted HAProxy word: backslashes, quotes and ``$`` (which would expand
    an environment variable) escaped; control characters refused."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise GatewayConfigError(f"control character in {value!r}")
    escaped = value.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$")
    return f'"{escaped}"'


def match_str(*values: str) -> str:
    """An ACL's exact-string match of ``values``, each quoted, after ``--``: a value
    that begins with ``-`` (a key id is random base64url) is then a pattern, never read
    as an option of the ACL."""
    return "-m str -- " + " ".join(quote(v) for v in values)


def grpc_name_prefix(model: str) -> str:
    """Hex of the protobuf field 1 (tag, varint length, bytes) of a request naming
    ``model``: what a ModelInfer/ModelReady/... message starts with, as every protobuf
    encoder writes fields in number order."""
    name = model.encode()
    length, varint = len(name), bytearray()
    while True:
        byte = length & 0x7F
        length >>= 7
        varint.append(byte | (0x80 if length else 0))
        if not length:
            break
    return (b"\x0a" + bytes(varint) + name).hex().upper()


def _check(pattern: re.Pattern[str], value: str, what: str) -> str:
    if not pattern.match(value):
        raise GatewayConfigError(f"{what} {value!r} is not usable in the gateway's configuration")
    return value


def _validate_identity(config: GatewayConfig) -> None:
    if not config.keys:
        raise GatewayConfigError("no signing keys: no token could be verified")
    issuers = [config.issuer, *(t.issuer for t in config.oidc)]
    if len(set(issuers)) != len(issuers):
        raise GatewayConfigError(
            "an OIDC issuer is listed twice, or is the cluster's own service-account "
            f"issuer ({config.issuer}), whose tokens the gateway verifies already"
        )
    for _, issuer, audience, keys in _sources(config):
        quote(issuer)
        if not issuer or not audience:
            raise GatewayConfigError(f"issuer {issuer!r}: an issuer and an audience are required")
        for key in keys:
            if key.alg not in ALGORITHMS:
                raise GatewayConfigError(
                    f"key {key.kid!r}: algorithm {key.alg} (HAProxy 2.6 verifies {ALGORITHMS})"
                )
            _check(_PATH, key.path, "key file")
            quote(key.kid)
    paths = [k.path for _, _, _, keys in _sources(config) for k in keys]
    if len(set(paths)) != len(paths):
        raise GatewayConfigError("two signing keys share a key file")
    for trusted in config.oidc:
        _check(_TENANT_CLAIM, trusted.tenant_claim, "tenant claim")


def validate(config: GatewayConfig) -> None:
    """Refuse inputs the configuration cannot express safely (GatewayConfigError)."""
    _validate_identity(config)
    quote(config.audience)
    _check(_PATH, config.runtime_dir, "runtime directory")
    if config.bind_address:
        _check(_HOST, config.bind_address, "bind address")
    tenants = [name for name, _ in config.tenants]
    if len(set(tenants)) != len(tenants):
        raise GatewayConfigError("a tenant is listed twice")
    for name, limits in config.tenants:
        _check(_TENANT, name, "tenant")
        for number in (limits.requests_per_second, limits.concurrency):
            if number is not None and number < 0:
                raise GatewayConfigError(f"tenant {name}: negative limit")
        if limits.burst < 0 or limits.queue_timeout_ms < 1:
            raise GatewayConfigError(f"tenant {name}: burst must be >= 0 and queue timeout >= 1 ms")
    for peer in config.peers:
        _check(_DNS_NAME, peer.name, "peer")
        _check(_HOST, peer.host, "peer host")
    if len({p.name for p in config.peers}) != len(config.peers):
        raise GatewayConfigError("a peer is listed twice")
    names = {gate_backend(t) for t in tenants} | {"unrouted", TOP_LANE_TABLE}
    seen: set[tuple[str, str]] = set()
    for route in config.routes:
        if (route.tenant, route.model) in seen:
            raise GatewayConfigError(f"model {route.model!r} of {route.tenant} is routed twice")
        seen.add((route.tenant, route.model))
        quote(route.model)
        if not route.model or "/" in route.model:
            raise GatewayConfigError(f"model name {route.model!r}")
        backends = [route.backend, grpc_backend(route)]
        if route.overflow:
            backends += [overflow_backend(route), overflow_backend(route, grpc=True)]
        for backend in backends:
            _check(_PROXY_NAME, backend, "backend")
            if backend in names:
                raise GatewayConfigError(f"backend name {backend} is used twice")
            names.add(backend)
        if route.timeout_ms < 1 or route.server_maxconn < 1:
            raise GatewayConfigError(f"{route.backend}: timeout and server_maxconn must be >= 1")
        if route.priority_levels < 0 or not (
            route.priority_levels == 0 or 1 <= route.default_priority <= route.priority_levels
        ):
            raise GatewayConfigError(
                f"{route.backend}: default priority outside 1..priority_levels"
            )
        if route.sticky_header:
            _check(_HEADER, route.sticky_header, "sticky header")
        for servers in (route.servers, route.overflow):
            for server in servers:
                _check(_PROXY_NAME, server.name, "server")
                _check(_HOST, server.host, "server host")
            if len({s.name for s in servers}) != len(servers):
                raise GatewayConfigError(f"{route.backend}: a server is listed twice")


def _section(header: str, lines: Iterable[str]) -> list[str]:
    return [header, *(f"    {line}" if line else "" for line in lines), ""]


def _ms(value: int) -> str:
    return f"{value}ms"


def _route_budget_ms(route: Route) -> int:
    """The longest a request spends in a route: its queue, then its timeout."""
    return 2 * route.timeout_ms


def _gate_server_timeout_ms(routes: Sequence[Route]) -> int:
    return max((_route_budget_ms(r) for r in routes), default=1000) + 1000


def _client_timeout_ms(config: GatewayConfig) -> int:
    """A client may wait for the whole of its tenant's queue and its slowest route."""
    by_tenant = _routes_by_tenant(config)
    longest = max(
        (
            limits.queue_timeout_ms + _gate_server_timeout_ms(by_tenant.get(name, []))
            for name, limits in config.tenants
        ),
        default=1000,
    )
    return max(60_000, longest + 1000)


def _admitted_routes(config: GatewayConfig) -> list[Route]:
    """The routes of admitted tenants, in a fixed order; a model whose namespace the pool
    no longer admits is unreachable through the gateway, so it gets no backend."""
    tenants = {name for name, _ in config.tenants}
    return sorted(
        (r for r in config.routes if r.tenant in tenants), key=lambda r: (r.tenant, r.model)
    )


def _routes_by_tenant(config: GatewayConfig) -> dict[str, list[Route]]:
    routes: dict[str, list[Route]] = {}
    for route in _admitted_routes(config):
        routes.setdefault(route.tenant, []).append(route)
    return routes


def _bind(config: GatewayConfig, port: int) -> str:
    return f"{config.bind_address}:{port}"


def _global(config: GatewayConfig) -> list[str]:
    paths = RuntimePaths(config.runtime_dir)
    return _section(
        "global",
        [
            "master-worker",
            "log stdout format raw local0 info",
            # expose-fd: a reloaded worker takes the listening sockets over from the old
            # one, so no connection is refused during a reload.
            f"stats socket {paths.admin_socket} mode 600 level admin expose-fd listeners",
            "stats timeout 30s",
            f"server-state-file {paths.server_state}",
            f"hard-stop-after {_ms(_client_timeout_ms(config) + HARD_STOP_MARGIN_MS)}",
        ],
    )


def _defaults(config: GatewayConfig) -> list[str]:
    log_format = (
        "%ci:%cp [%tr] %ft %b/%s %TR/%Tw/%Tc/%Tr/%Ta %ST %B %tsc %ac/%fc/%bc/%sc/%rc "
        "%sq/%bq id=%ID client_id=%[var(txn.client_id)] tenant=%[var(txn.tenant)] "
        "priority=%[var(txn.priority)] %{+Q}r"
    )
    return _section(
        "defaults",
        [
            "mode http",
            "log global",
            f"log-format {quote(log_format)}",
            "option dontlognull",
            # A reload's old worker keeps idle client connections until their next
            # request, answers it with "Connection: close", and only then closes: a
            # client never writes into a connection that is being closed.
            "option idle-close-on-response",
            f"timeout connect {_ms(CONNECT_TIMEOUT_MS)}",
            f"timeout client {_ms(_client_timeout_ms(config))}",
            f"timeout server {_ms(_client_timeout_ms(config))}",
            f"timeout http-request {_ms(HTTP_REQUEST_TIMEOUT_MS)}",
            f"timeout http-keep-alive {_ms(KEEP_ALIVE_TIMEOUT_MS)}",
            f"timeout check {_ms(CHECK_TIMEOUT_MS)}",
            "load-server-state-from-file global",
        ],
    )


def _peers(config: GatewayConfig) -> list[str]:
    if config.peers:
        peers = [
            f"peer {p.name} {p.host}:{p.port}" for p in sorted(config.peers, key=lambda p: p.name)
        ]
    else:
        # One replica: its only peer is itself, on a unix socket, which is how a reload's
        # old worker hands the tables to the new one.
        paths = RuntimePaths(config.runtime_dir)
        peers = [f'peer "${{HAPROXY_LOCALPEER}}" unix@{paths.local_peer_socket}']
    tables = [
        f"table {table} type string len {TABLE_KEY_LENGTH} size 16k "
        f"expire {TABLE_EXPIRE_S}s store http_req_rate({window}s)"
        for window, table in RATE_TABLES.items()
    ]
    return _section(f"peers {PEERS_SECTION}", [*peers, *tables])


def _deny(status: int, message: str, *extra: str) -> str:
    body = '{"error":"' + message + '"}'
    headers = "".join(f" {h}" for h in extra)
    return (
        f"http-request deny deny_status {status}{headers} "
        f"content-type application/json string {quote(body)}"
    )


def _edge(config: GatewayConfig) -> list[str]:
    tenants = sorted(name for name, _ in config.tenants)
    bearer = "hdr WWW-Authenticate " + quote('Bearer realm="shoal"')
    invalid = "hdr WWW-Authenticate " + quote('Bearer realm="shoal", error="invalid_token"')
    model_path = (
        r"^/v2/models/[^/]+(/versions/[0-9]+)?(/(" + "|".join(HTTP_MODEL_ENDPOINTS) + "))?$"
    )
    grpc_model = "^" + GRPC_SERVICE.replace(".", "[.]") + "(" + "|".join(GRPC_MODEL_RPCS) + ")$"
    grpc_server = " ".join(GRPC_SERVICE + rpc for rpc in GRPC_SERVER_RPCS)
    lines = [
        f"bind {_bind(config, config.http_port)}",
        f"bind {_bind(config, config.grpc_port)} proto h2",
        "acl grpc req.hdr(content-type) -m beg application/grpc",
        "",
        "# Two ids, kept apart. The gateway's own, a new UUID for every request, is what",
        "# both hops log as id=: no client chooses it, so no tenant can forge another's.",
        "# The client's X-Request-ID, if it sent exactly one plain id, is logged as",
        "# client_id= beside the tenant that sent it, passed to Triton and returned; a",
        "# client that sent none gets the gateway's.",
        f"unique-id-format {quote('%[var(txn.request_id)]')}",
        "http-request set-var(txn.request_id) uuid(4)",
        f"http-request set-var(txn.client_id) req.fhdr({REQUEST_ID_HEADER}) "
        f"if {{ req.fhdr_cnt({REQUEST_ID_HEADER}) eq 1 }} "
        f"{{ req.fhdr({REQUEST_ID_HEADER}) -m reg ^[A-Za-z0-9._:-]{{1,128}}$ }}",
        "http-request set-var(txn.shown_id) var(txn.client_id) if " + _CLIENT_ID_SENT,
        "http-request set-var(txn.shown_id) var(txn.request_id) unless " + _CLIENT_ID_SENT,
        f"http-request set-header {REQUEST_ID_HEADER} %[var(txn.shown_id)]",
        f"http-after-response set-header {REQUEST_ID_HEADER} %[var(txn.shown_id)]",
        f"http-after-response del-header {INTERNAL_PREFIX} -m beg",
        "",
        "# Only the gateway sets these.",
        f"http-request del-header {TENANT_HEADER}",
        f"http-request del-header {INTERNAL_PREFIX} -m beg",
        f"http-request set-header {GATEWAY_ID_HEADER} %[var(txn.request_id)]",
        f"http-request set-header {CLIENT_ID_HEADER} %[var(txn.client_id)] if {_CLIENT_ID_SENT}",
        "",
        "# The model-less endpoints, answered here (no token needed: probes use them).",
        "http-request return status 200 if !grpc { path /v2/health/live /v2/health/ready }",
        "http-request return status 200 content-type application/json string "
        + quote('{"name":"shoal-gateway","extensions":[]}')
        + " if !grpc { path /v2 }",
        "",
        *_identity_lines(config, bearer, invalid),
        "",
        "# A tenant the pool admits.",
        _deny(403, "this tenant is not admitted to the pool")
        + (f" unless {{ var(txn.tenant) {match_str(*tenants)} }}" if tenants else ""),
        f"http-request set-header {TENANT_HEADER} %[var(txn.tenant)]",
        "http-request del-header Authorization",
        "",
        "# What the request addresses: one model, or (gRPC) the server.",
        "http-request set-var(txn.kind) str(http) if !grpc { path_reg " + model_path + " }",
        "http-request set-var(txn.kind) str(grpc) if grpc { path_reg " + grpc_model + " }",
        "http-request set-var(txn.kind) str(grpc-server) if grpc { path " + grpc_server + " }",
        "http-request return status 404 content-type application/json string "
        + quote('{"error":"not available through the gateway"}')
        + " unless { var(txn.kind) -m found }",
        "",
        *_body_size_lines(config),
        "",
        f"use_backend {gate_backend('%[var(txn.tenant)]')}",
    ]
    return _section("frontend edge", lines)


def _body_size_lines(config: GatewayConfig) -> list[str]:
    """HTTP: the body a request declares (Content-Length), refused before it is read;
    a body that declares no length (chunked) is refused, since nothing could stop it
    at the limit. gRPC messages are sized at the gate (:func:`_grpc_size_lines`)."""
    limit = config.max_request_body
    return [
        f"# Sizes: no request body over {limit} bytes reaches a model.",
        _deny(413, f"the request body is over the gateway's limit of {limit} bytes")
        + f" if {{ req.hdr_val(content-length) gt {limit} }}",
        _deny(411, "a request body must declare its length (Content-Length)")
        + " if !grpc !METH_GET !{ req.hdr_cnt(content-length) gt 0 }",
    ]


def _grpc_size_lines(config: GatewayConfig) -> list[str]:
    """A gRPC message's length is its 5-byte prefix: a compressed flag, then the
    length, big-endian. A compressed message is refused: its size once expanded is
    known only to the model that expands it."""
    limit = config.max_request_body
    grpc = "{ var(txn.kind) -m str grpc }"
    return [
        _deny(413, "compressed gRPC messages are not accepted; send them uncompressed")
        + f" if {grpc} {{ req.body,bytes(0,1),hex -m str 01 }}",
        _deny(413, f"the gRPC message is over the gateway's limit of {limit} bytes")
        + f" if {grpc} {{ req.body,bytes(1,4),be2dec(:,4) -m int gt {limit} }}",
    ]


def _sources(config: GatewayConfig) -> list[tuple[str, str, str, tuple[SigningKey, ...]]]:
    """Who may sign the tokens the gateway accepts, as (source, issuer, audience, keys):
    the cluster (service-account tokens), then each trusted OIDC issuer, by URL."""
    sources = [(SA_SOURCE, config.issuer, config.audience, config.keys)]
    for index, trusted in enumerate(sorted(config.oidc, key=lambda t: t.issuer)):
        sources.append((f"oidc{index}", trusted.issuer, trusted.audience, trusted.keys))
    return sources


def _identity_lines(config: GatewayConfig, bearer: str, invalid: str) -> list[str]:
    """The edge's identity check: the token's signature by a key of the issuer it names,
    then its claims (audience, lifetime), then the tenant it proves."""
    refuse = _deny(401, "invalid token", invalid)
    sources = _sources(config)
    lines = [
        "# Identity: a token signed by a key of the issuer it names: the cluster's",
        "# (service-account tokens) or an OIDC issuer the pool trusts.",
        "http-request set-var(txn.jwt) http_auth_bearer",
        _deny(401, "a bearer token is required", bearer) + " unless { var(txn.jwt) -m found }",
        "http-request set-var(txn.jwt_kid) var(txn.jwt),jwt_header_query('$.kid')",
        "http-request set-var(txn.jwt_alg) var(txn.jwt),jwt_header_query('$.alg')",
        "# The issuer named picks the keys that may verify the token, and the claims it is",
        "# then held to: only that issuer's keys can make the name true.",
        "http-request set-var(txn.jwt_iss) var(txn.jwt),jwt_payload_query('$.iss')",
    ]
    for source, issuer, _, _ in sources:
        lines.append(
            f"http-request set-var(txn.jwt_src) str({source}) "
            f"if {{ var(txn.jwt_iss) {match_str(issuer)} }}"
        )
    for source, _, _, keys in sources:
        for key in sorted(keys, key=lambda k: k.kid):
            # Every key file is named here, as jwt_verify loads them all at start-up.
            lines.append(
                f'http-request set-var(txn.jwt_ok) var(txn.jwt),jwt_verify("{key.alg}",'
                f'"{key.path}") if {{ var(txn.jwt_src) -m str {source} }} '
                f"{{ var(txn.jwt_kid) {match_str(key.kid)} }} "
                f"{{ var(txn.jwt_alg) {match_str(key.alg)} }}"
            )
    lines += [
        refuse + " unless { var(txn.jwt_ok) -m int 1 }",
        "# Signed; now its claims. The audience of its issuer for this gateway: the string,",
        f"# or one of the first {MAX_AUDIENCES} entries of a list. Compared as bytes (hex): a",
        "# value read as an integer is eight bytes, so no number passes for a string.",
    ]
    for source, _, audience, _ in sources:
        lines.append(
            f"http-request set-var(txn.aud_wanted) str({audience.encode().hex().upper()}) "
            f"if {{ var(txn.jwt_src) -m str {source} }}"
        )
    paths = ["$.aud", *(f"$.aud[{index}]" for index in range(MAX_AUDIENCES))]
    for index, path in enumerate(paths):
        unless_found = "!{ var(txn.jwt_aud) -m found } " if index else ""
        lines.append(
            f"http-request set-var(txn.jwt_aud) bool(true) if {unless_found}"
            f"{{ var(txn.jwt),jwt_payload_query('{path}','int'),hex,strcmp(txn.aud_wanted) "
            "-m int eq 0 }"
        )
    lines += [
        refuse + " unless { var(txn.jwt_aud) -m found }",
        "# Its lifetime: exp, and nbf if present, JSON numbers (a string would read as its",
        "# own bytes, not eight).",
        "http-request set-var(txn.now) date",
        "http-request set-var(txn.jwt_exp) var(txn.jwt),jwt_payload_query('$.exp','int')",
        "http-request set-var(txn.jwt_nbf) var(txn.jwt),jwt_payload_query('$.nbf','int')",
        refuse + f" unless {{ var(txn.jwt_exp),hex -m reg {NUMBER_HEX} }}",
        refuse + " unless { var(txn.jwt_exp),sub(txn.now) -m int gt 0 }",
        refuse
        + f" if {{ var(txn.jwt_nbf) -m found }} !{{ var(txn.jwt_nbf),hex -m reg {NUMBER_HEX} }}",
        refuse + f" if {{ var(txn.jwt_nbf),sub(txn.now) -m int gt {CLOCK_SKEW_S} }}",
        "# The tenant. A service account's: its namespace, from the verified sub.",
        f"http-request set-var(txn.jwt_sub) var(txn.jwt),jwt_payload_query('$.sub') "
        f"if {{ var(txn.jwt_src) -m str {SA_SOURCE} }}",
        refuse + f" if {{ var(txn.jwt_src) -m str {SA_SOURCE} }} !{{ var(txn.jwt_sub) -m reg "
        "^system:serviceaccount:[a-z0-9]([-a-z0-9]*[a-z0-9])?:[a-z0-9]([-.a-z0-9]*[a-z0-9])?$ }",
        "http-request set-var(txn.tenant) var(txn.jwt_sub),field(3,:) "
        f"if {{ var(txn.jwt_src) -m str {SA_SOURCE} }}",
    ]
    trusted = sources[1:]
    if trusted:
        lines.append(
            "# An OIDC issuer's: the string its tenant claim holds (not a number, list or object)."
        )
    for (source, _, _, _), each in zip(
        trusted, sorted(config.oidc, key=lambda t: t.issuer), strict=True
    ):
        claim = f"$.{each.tenant_claim}"
        lines += [
            f"http-request set-var(txn.tenant) var(txn.jwt),jwt_payload_query('{claim}') "
            f"if {{ var(txn.jwt_src) -m str {source} }}",
            f"http-request set-var(txn.tenant_hex) var(txn.jwt),jwt_payload_query('{claim}','int'),"
            f"hex if {{ var(txn.jwt_src) -m str {source} }}",
        ]
    lines.append(refuse + " unless { var(txn.tenant) -m found }")
    if trusted:
        lines.append(refuse + f" if {{ var(txn.tenant_hex) -m reg {NOT_STRING_HEX} }}")
    return lines


def _rate_lines(tenant: str, limits: Limits, peers: Sequence[str]) -> list[str]:
    burst, sustained = burst_limit(limits), sustained_limit(limits)
    if burst is None or sustained is None:
        return []
    lines = [
        f"# Rate: at most {burst} requests in any {BURST_WINDOW_S} s and {sustained} in any "
        f"{SUSTAINED_WINDOW_S} s, all replicas together:",
        "# the sum of every replica's count of requests it admitted.",
    ]
    for window, table in RATE_TABLES.items():
        var = f"txn.rate_{window}s"
        for index, peer in enumerate(peers):
            add = f",add({var})" if index else ""
            lines.append(
                f'http-request set-var({var}) str("{tenant}|{peer}"),'
                f"table_http_req_rate({PEERS_SECTION}/{table}){add}"
            )
    lines += [
        _deny(429, "rate limit", f"hdr Retry-After {RETRY_AFTER_S}")
        + f" if {{ var(txn.rate_{BURST_WINDOW_S}s) -m int ge {burst} }}"
        + f" || {{ var(txn.rate_{SUSTAINED_WINDOW_S}s) -m int ge {sustained} }}",
        "# Counted only once admitted, under this replica's own key.",
    ]
    for index, table in enumerate(RATE_TABLES.values()):
        lines.append(
            f'http-request track-sc{index} str("{tenant}|${{HAPROXY_LOCALPEER}}") '
            f"table {PEERS_SECTION}/{table}"
        )
    return lines


def _priority_lines(route: Route, match: str) -> list[str]:
    if route.priority_levels < 1:
        return [f"http-request set-var(txn.priority) int(1) if {match}"]
    levels, header = route.priority_levels, PRIORITY_HEADER
    return [
        f"http-request set-var(txn.priority) int({route.default_priority}) if {match}",
        f"http-request set-var(txn.priority) req.hdr({header}) "
        f"if {match} {{ req.hdr({header}) -m int 1:{levels} }}",
        f"http-request set-var(txn.priority) int(1) if {match} {{ req.hdr({header}) -m int lt 1 }}",
        f"http-request set-var(txn.priority) int({levels}) "
        f"if {match} {{ req.hdr({header}) -m int gt {levels} }}",
    ]


def _gate(config: GatewayConfig, tenant: str, limits: Limits, routes: Sequence[Route]) -> list[str]:
    paths = RuntimePaths(config.runtime_dir)
    peers = [p.name for p in sorted(config.peers, key=lambda p: p.name)] or ["${HAPROXY_LOCALPEER}"]
    lines = [
        f"timeout queue {_ms(limits.queue_timeout_ms)}",
        f"timeout server {_ms(_gate_server_timeout_ms(routes))}",
        *_rate_lines(tenant, limits, peers),
    ]
    if limits.concurrency == 0:
        lines.append(_deny(429, "no requests allowed", f"hdr Retry-After {RETRY_AFTER_S}"))
    lines += [
        "",
        "# The route: only among this tenant's models; another's answers as if absent.",
        "http-request set-var(txn.model) path,field(4,/) if { var(txn.kind) -m str http }",
    ]
    if routes:
        longest = max(len(grpc_name_prefix(r.model)) // 2 for r in routes)
        lines.append(
            f"http-request wait-for-body time {_ms(GRPC_BODY_WAIT_MS)} at-least {5 + longest} "
            "if { var(txn.kind) -m str grpc }"
        )
        lines += _grpc_size_lines(config)
    for route in routes:
        http = f"{{ var(txn.kind) -m str http }} {{ var(txn.model) {match_str(route.model)} }}"
        grpc = (
            "{ var(txn.kind) -m str grpc } "
            f"{{ req.body,bytes(5,{len(grpc_name_prefix(route.model)) // 2}),hex "
            f"{match_str(grpc_name_prefix(route.model))} }}"
        )
        lines += [
            f"http-request set-var(txn.route) str({route.backend}) if {http}",
            f"http-request set-var(txn.route) str({grpc_backend(route)}) if {grpc}",
        ]
    if routes:
        first = routes[0]
        lines.append(
            f"http-request set-var(txn.route) str({grpc_backend(first)}) "
            "if { var(txn.kind) -m str grpc-server }"
        )
    lines += [
        "http-request return status 404 content-type application/json lf-string "
        + quote(
            '{"error":"Request for unknown model: \'%[var(txn.model),json(utf8s)]\' is not found"}'
        )
        + " unless { var(txn.route) -m found }",
        "",
        f"# Priority: {PRIORITY_HEADER} (1 is the highest) within the route's lanes, else its",
        "# default; it orders this gate's queue and the route's.",
    ]
    for route in routes:
        for backend in (route.backend, grpc_backend(route)):
            lines += _priority_lines(route, f"{{ var(txn.route) {match_str(backend)} }}")
    concurrency = limits.concurrency
    server = f"server routes unix@{paths.routes_socket} proto h2"
    if concurrency:
        server += f" maxconn {share(concurrency, config.replicas)}"
    lines += [
        "http-request set-priority-class var(txn.priority)",
        f"http-request set-header {PRIORITY_HEADER} %[var(txn.priority)]",
        f"http-request set-header {ROUTE_HEADER} %[var(txn.route)]",
        "",
        "# Concurrency: this replica's share of the tenant's cap is the server's maxconn;",
        "# a request still queued after the queue timeout gets 429, not the 503 HAProxy",
        "# answers on its own (the routes' own 503s carry the answered marker).",
        f"http-after-response set-status 429 if {{ status 503 }} "
        f"!{{ res.hdr({ANSWERED_HEADER}) -m found }}",
        f"http-after-response set-header Retry-After {RETRY_AFTER_S} "
        "if { status 429 } !{ res.hdr(Retry-After) -m found }",
        server,
    ]
    return _section(f"backend {gate_backend(tenant)}", lines)


def _spill_lines(routes: Sequence[Route]) -> list[str]:
    """Overflow: a request that finds no free slot on any of the model's replicas goes
    to its overflow replicas while one of them has a free slot; otherwise it waits in
    the model's queue as usual (so the overflow replicas never queue for it). A route
    that keeps clients on one replica (a sticky header) queues on a full replica while
    others have slots: there, requests spill as soon as any wait."""
    lines = []
    for route in routes:
        if not route.overflow:
            continue
        for grpc in (False, True):
            own = grpc_backend(route) if grpc else route.backend
            spill = overflow_backend(route, grpc)
            when = [f"{{ be_conn_free({own}) -m int le 0 }}"]
            if route.sticky_header:
                when.append(f"{{ queue({own}) -m int gt 0 }}")
            for full in when:
                lines.append(
                    f"use_backend {spill} if {{ req.hdr({ROUTE_HEADER}) {match_str(own)} }} "
                    f"{full} {{ be_conn_free({spill}) -m int gt 0 }}"
                )
    return ["# Overflow before the queue.", *lines] if lines else []


def _routes_frontend(config: GatewayConfig) -> list[str]:
    paths = RuntimePaths(config.runtime_dir)
    return _section(
        "frontend routes",
        [
            f"bind unix@{paths.routes_socket} mode 600 proto h2",
            f"unique-id-format {quote('%[var(txn.request_id)]')}",
            f"http-request set-var(txn.request_id) req.hdr({GATEWAY_ID_HEADER})",
            f"http-request set-var(txn.client_id) req.hdr({CLIENT_ID_HEADER})",
            f"http-request set-var(txn.tenant) req.hdr({TENANT_HEADER})",
            f"http-request set-var(txn.priority) req.hdr({PRIORITY_HEADER})",
            f"http-after-response set-header {ANSWERED_HEADER} 1",
            *_spill_lines(_admitted_routes(config)),
            f"use_backend %[req.hdr({ROUTE_HEADER})]",
            "default_backend unrouted",
        ],
    )


def _route_backend(route: Route, grpc: bool, overflow: bool = False) -> list[str]:
    """The backend of the model's replicas, or (``overflow``) of its overflow replicas,
    which take only what the first has no slot for: no lanes to shed there."""
    if overflow:
        name, http_name = overflow_backend(route, grpc), overflow_backend(route)
        replicas = route.overflow
    else:
        name = grpc_backend(route) if grpc else route.backend
        http_name, replicas = route.backend, route.servers
    balance = (
        [f"balance hdr({route.sticky_header})", "hash-type consistent"]
        if route.sticky_header
        else ["balance leastconn"]
    )
    lines = [
        *balance,
        f"timeout server {_ms(route.timeout_ms)}",
        f"timeout queue {_ms(route.timeout_ms)}",
        "retries 2",
        "retry-on conn-failure empty-response",
        "option redispatch 1",
        f"http-request del-header {INTERNAL_PREFIX} -m beg",
        f"http-request set-priority-class req.hdr({PRIORITY_HEADER})",
    ]
    if route.priority_levels >= 2 and not overflow:
        levels, header = route.priority_levels, PRIORITY_HEADER
        lines += [
            "# Low lanes are shed (503 at once), never left to time out: while the top lane",
            "# is in use, when taking a slot would leave fewer than its reserve free; and",
            "# always, when the queue already holds rounds of work for every slot.",
            f"http-request track-sc2 str({name}) table {TOP_LANE_TABLE} "
            f"if {{ req.hdr({header}) -m int 1 }}",
            f"http-request set-var(txn.top_lane) str({name}),"
            f"table_http_req_rate({TOP_LANE_TABLE}) unless {{ req.hdr({header}) -m int 1 }}",
        ]
        for priority in range(2, levels + 1):
            reserve = reserved_slots(route.server_maxconn, levels, priority)
            rounds = shed_multiplier(levels, priority)
            assert reserve is not None
            assert rounds is not None
            lane = f"{{ req.hdr({header}) -m int {priority} }}"
            lines += [
                f"http-request set-var(txn.reserve) nbsrv,mul({reserve}) if {lane}",
                f"http-request set-var(txn.shed_at) nbsrv,mul({rounds * route.server_maxconn}) "
                f"if {lane}",
            ]
        shed = _deny(503, "overloaded: low priority shed", f"hdr Retry-After {RETRY_AFTER_S}")
        lines += [
            shed + " if { var(txn.top_lane) -m int gt 0 } { var(txn.reserve) -m found } "
            "{ be_conn_free,sub(txn.reserve) -m int le 0 }",
            shed + " if { var(txn.shed_at) -m found } { queue,sub(txn.shed_at) -m int ge 0 }",
        ]
    if grpc:
        servers = [
            f"server {s.name} {s.host}:{s.grpc_port} proto h2 maxconn {route.server_maxconn} "
            f"track {http_name}/{s.name}"
            for s in sorted(replicas, key=lambda s: s.name)
        ]
    else:
        lines += [
            f"option httpchk GET {CHECK_PATH}",
            "http-check expect status 200",
            f"default-server check inter {_ms(CHECK_INTERVAL_MS)} "
            f"fastinter {_ms(CHECK_FAST_INTERVAL_MS)} downinter {_ms(CHECK_INTERVAL_MS)} "
            f"fall {CHECK_FALL} rise {CHECK_RISE} "
            f"observe layer7 error-limit {ERROR_LIMIT} on-error mark-down",
        ]
        servers = [
            f"server {s.name} {s.host}:{s.http_port} maxconn {route.server_maxconn}"
            for s in sorted(replicas, key=lambda s: s.name)
        ]
    return _section(f"backend {name}", [*lines, *servers])


def _metrics(config: GatewayConfig) -> list[str]:
    return _section(
        "frontend metrics",
        [
            f"bind {_bind(config, config.metrics_port)}",
            "http-request set-log-level silent",
            "http-request use-service prometheus-exporter if { path /metrics }",
            "http-request return status 404",
        ],
    )


def haproxy_config(config: GatewayConfig) -> str:
    """haproxy.cfg for ``config``; the same input always gives the same text."""
    validate(config)
    by_tenant = _routes_by_tenant(config)
    sections = [
        [f"# The gateway of pool {config.pool}, rendered by Shoal: do not edit.", ""],
        _global(config),
        _defaults(config),
        _peers(config),
        _edge(config),
    ]
    for tenant, limits in sorted(config.tenants, key=lambda t: t[0]):
        sections.append(_gate(config, tenant, limits, by_tenant.get(tenant, [])))
    sections.append(_routes_frontend(config))
    sections.append(
        _section(
            "backend unrouted",
            ["http-request return status 404"],
        )
    )
    if any(r.priority_levels >= 2 for r in _admitted_routes(config)):
        sections.append(
            _section(
                f"backend {TOP_LANE_TABLE}",
                [
                    "# When each route's top lane was last used (this replica only).",
                    f"stick-table type string len 64 size 4k expire {3 * TOP_LANE_WINDOW_S}s "
                    f"store http_req_rate({TOP_LANE_WINDOW_S}s)",
                ],
            )
        )
    for route in _admitted_routes(config):
        sections.append(_route_backend(route, grpc=False))
        sections.append(_route_backend(route, grpc=True))
        if route.overflow:
            sections.append(_route_backend(route, grpc=False, overflow=True))
            sections.append(_route_backend(route, grpc=True, overflow=True))
    sections.append(_metrics(config))
    lines = [line for section in sections for line in section]
    return "\n".join(lines).rstrip("\n") + "\n"
