"""The gateway's HAProxy configuration renderer: golden file and each of its branches.

That HAProxy accepts and enforces what is rendered is shown on the real processes in
tests/e2e/test_gateway_*.py.
"""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

import pytest
from tritonclient.grpc import service_pb2

from shoal.render.gateway_config import (
    GatewayConfig,
    Limits,
    Peer,
    Route,
    Server,
    SigningKey,
    TrustedIssuer,
)
from shoal.render.haproxy_config import (
    GatewayConfigError,
    burst_limit,
    grpc_name_prefix,
    haproxy_config,
    quote,
    reserved_slots,
    share,
    shed_multiplier,
    sustained_limit,
)

GOLDEN = Path(__file__).parent / "golden" / "haproxy.cfg"


def route(tenant: str, model: str, **changes: object) -> Route:
    base = Route(
        tenant=tenant,
        model=model,
        backend=f"m_{tenant}_{model}",
        servers=(
            Server("ranker-7d9f-abcde", "10.0.1.12"),
            Server("ranker-7d9f-fghij", "10.0.2.17"),
        ),
        timeout_ms=2000,
        server_maxconn=16,
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def config(**changes: object) -> GatewayConfig:
    base = GatewayConfig(
        pool="shared",
        issuer="https://kubernetes.default.svc.cluster.local",
        audience="shoal-gateway.shared",
        keys=(
            SigningKey("kid-rsa", "RS256", "/etc/shoal-gateway/keys/kid-rsa.pem"),
            SigningKey("kid-ec", "ES256", "/etc/shoal-gateway/keys/kid-ec.pem"),
        ),
        tenants=(
            ("team-a", Limits(requests_per_second=200, burst=20, concurrency=64)),
            ("team-b", Limits(requests_per_second=50, concurrency=9, queue_timeout_ms=250)),
            ("team-c", Limits()),
        ),
        routes=(
            route("team-a", "ranker", priority_levels=3, default_priority=2),
            route(
                "team-a",
                "embedder",
                timeout_ms=500,
                sticky_header="X-Session-ID",
                overflow=(Server("embedder-overflow-6b8c-klmno", "10.0.5.3"),),
            ),
            route("team-b", "ranker", server_maxconn=4),
        ),
        peers=(
            Peer("shoal-gw-shared-5c6d-aaaaa", "10.0.3.4"),
            Peer("shoal-gw-shared-5c6d-bbbbb", "10.0.4.9"),
        ),
        oidc=(
            TrustedIssuer(
                issuer="https://login.example.com/realms/platform",
                audience="shoal-inference",
                tenant_claim="shoal.namespace",
                keys=(
                    SigningKey("idp-2", "ES256", "/etc/shoal-gateway/keys/oidc-1-idp-2.pem"),
                    SigningKey("idp-1", "RS256", "/etc/shoal-gateway/keys/oidc-1-idp-1.pem"),
                ),
            ),
        ),
    )
    return dataclasses.replace(base, **changes)  # type: ignore[arg-type]


def oidc(**changes: object) -> TrustedIssuer:
    return dataclasses.replace(config().oidc[0], **changes)  # type: ignore[arg-type]


def section(text: str, header: str) -> list[str]:
    """The lines of one section (stripped, blank ones left out)."""
    lines = text.splitlines()
    start = lines.index(header) + 1
    body = []
    for line in lines[start:]:
        if line and not line.startswith(" "):
            break
        if line:
            body.append(line.strip())
    return body


def test_the_rendered_config_matches_the_golden_file() -> None:
    """Review changes to the gateway's configuration here; UPDATE_GOLDEN=1 rewrites it."""
    rendered = haproxy_config(config())
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(rendered)
    assert rendered == GOLDEN.read_text()


def test_the_order_of_the_inputs_does_not_matter() -> None:
    c = config()
    shuffled = dataclasses.replace(
        c,
        tenants=tuple(reversed(c.tenants)),
        routes=tuple(
            dataclasses.replace(r, servers=tuple(reversed(r.servers))) for r in reversed(c.routes)
        ),
        peers=tuple(reversed(c.peers)),
        keys=tuple(reversed(c.keys)),
    )
    assert haproxy_config(shuffled) == haproxy_config(c)


def test_every_key_file_is_named_in_a_jwt_verify_of_its_issuer_with_its_own_algorithm() -> None:
    text = haproxy_config(config())
    sources = [("sa", config().keys), ("oidc0", config().oidc[0].keys)]
    for source, keys in sources:
        for key in keys:
            assert (
                f'jwt_verify("{key.alg}","{key.path}") if {{ var(txn.jwt_src) -m str {source} }} '
                f'{{ var(txn.jwt_kid) -m str -- "{key.kid}" }} '
                f'{{ var(txn.jwt_alg) -m str -- "{key.alg}" }}'
            ) in text
    assert text.count("jwt_verify(") == 4


def test_the_issuer_a_token_names_picks_its_keys_audience_and_tenant_claim() -> None:
    text = haproxy_config(config())
    assert (
        'str(sa) if { var(txn.jwt_iss) -m str -- "https://kubernetes.default.svc.cluster.local" }'
        in text
    )
    assert (
        'str(oidc0) if { var(txn.jwt_iss) -m str -- "https://login.example.com/realms/platform" }'
        in text
    )
    # Audiences compared as the bytes of a JSON string, each issuer's own.
    assert (
        f"str({b'shoal-gateway.shared'.hex().upper()}) if {{ var(txn.jwt_src) -m str sa }}" in text
    )
    assert f"str({b'shoal-inference'.hex().upper()}) if {{ var(txn.jwt_src) -m str oidc0 }}" in text
    assert "jwt_payload_query('$.aud[7]','int'),hex,strcmp(txn.aud_wanted) -m int eq 0" in text
    assert "unless { var(txn.jwt_exp),hex -m reg ^00[0-9A-F]{14}$ }" in text
    assert "var(txn.jwt_exp),sub(txn.now) -m int gt 0" in text
    assert "var(txn.jwt_nbf),sub(txn.now) -m int gt 60" in text
    # the namespace of system:serviceaccount:<ns>:<name>, for service-account tokens only
    assert "field(3,:) if { var(txn.jwt_src) -m str sa }" in text
    assert "jwt_payload_query('$.shoal.namespace') if { var(txn.jwt_src) -m str oidc0 }" in text
    assert "if { var(txn.tenant_hex) -m reg ^(00|FF)[0-9A-F]{14}$ }" in text
    assert 'unless { var(txn.tenant) -m str -- "team-a" "team-b" "team-c" }' in text


def test_without_oidc_issuers_only_service_account_tokens_name_a_tenant() -> None:
    text = haproxy_config(config(oidc=()))
    assert "oidc0" not in text
    assert "tenant_hex" not in text
    assert text.count("jwt_verify(") == 2


def test_an_issuer_without_keys_has_its_tokens_refused() -> None:
    """Its tokens pick no key, so no jwt_verify sets txn.jwt_ok: 401."""
    issuer = dataclasses.replace(config().oidc[0], keys=())
    text = haproxy_config(config(oidc=(issuer,)))
    assert "str(oidc0)" in text
    assert "-m str oidc0 } { var(txn.jwt_kid)" not in text


def test_client_headers_the_gateway_owns_are_removed_first() -> None:
    edge = section(haproxy_config(config()), "frontend edge")
    removals = edge.index("http-request del-header X-Shoal-Tenant")
    first_use = next(i for i, line in enumerate(edge) if "set-header X-Shoal-Tenant" in line)
    assert removals < first_use
    assert "http-request del-header X-Shoal-Internal- -m beg" in edge
    assert "http-request del-header Authorization" in edge


def test_rate_limits_sum_every_replicas_key_and_track_only_the_local_one() -> None:
    gate = section(haproxy_config(config()), "backend gate_team-a")
    for peer in config().peers:
        assert any(f'str("team-a|{peer.name}"),table_http_req_rate(gw/rate_1s)' in g for g in gate)
        assert any(f'str("team-a|{peer.name}"),table_http_req_rate(gw/rate_10s)' in g for g in gate)
    deny = next(line for line in gate if "deny_status 429" in line)
    assert "rate_1s) -m int ge 220 }" in deny
    assert "rate_10s) -m int ge 2020 }" in deny
    tracks = [line for line in gate if "track-sc" in line]
    assert tracks == [
        'http-request track-sc0 str("team-a|${HAPROXY_LOCALPEER}") table gw/rate_1s',
        'http-request track-sc1 str("team-a|${HAPROXY_LOCALPEER}") table gw/rate_10s',
    ]
    assert gate.index(deny) < gate.index(tracks[0])  # a refused request is not counted


def test_the_limits_arithmetic() -> None:
    limits = Limits(requests_per_second=100, burst=10)
    assert (burst_limit(limits), sustained_limit(limits)) == (110, 1010)
    assert burst_limit(Limits()) is None
    assert sustained_limit(Limits()) is None
    assert [share(9, n) for n in (1, 2, 3, 4)] == [9, 5, 3, 3]
    assert [shed_multiplier(3, p) for p in (1, 2, 3)] == [None, 2, 1]
    assert shed_multiplier(0, 1) is None
    # A quarter of each replica's slots, in steps, the lowest lane leaving the most.
    assert [reserved_slots(16, 3, p) for p in (1, 2, 3)] == [None, 2, 4]
    assert [reserved_slots(8, 2, p) for p in (1, 2)] == [None, 2]
    assert reserved_slots(1, 2, 2) == 1  # at least one
    assert reserved_slots(16, 0, 2) is None


def test_concurrency_is_each_replicas_share_of_the_cap() -> None:
    text = haproxy_config(config())
    assert section(text, "backend gate_team-a")[-1].endswith("proto h2 maxconn 32")
    assert section(text, "backend gate_team-b")[-1].endswith("proto h2 maxconn 5")
    assert section(text, "backend gate_team-c")[-1].endswith("proto h2")
    assert "timeout queue 250ms" in section(text, "backend gate_team-b")
    one = haproxy_config(config(peers=()))
    assert section(one, "backend gate_team-b")[-1].endswith("maxconn 9")
    closed = haproxy_config(
        config(tenants=(("team-a", Limits(concurrency=0)), ("team-b", Limits())))
    )
    assert any(
        line.startswith("http-request deny deny_status 429") and " if " not in line
        for line in section(closed, "backend gate_team-a")
    )


def test_a_queue_timeout_at_the_gate_is_a_429() -> None:
    gate = section(haproxy_config(config()), "backend gate_team-a")
    assert (
        "http-after-response set-status 429 if { status 503 } "
        "!{ res.hdr(X-Shoal-Internal-Answered) -m found }" in gate
    )
    routes = section(haproxy_config(config()), "frontend routes")
    assert "http-after-response set-header X-Shoal-Internal-Answered 1" in routes


def test_one_replica_syncs_its_tables_with_itself_over_a_socket() -> None:
    text = haproxy_config(config(peers=()))
    peers = section(text, "peers gw")
    assert peers[0] == 'peer "${HAPROXY_LOCALPEER}" unix@/var/run/haproxy/peers.sock'
    gate = section(text, "backend gate_team-a")
    assert any('str("team-a|${HAPROXY_LOCALPEER}"),table_http_req_rate' in g for g in gate)


def test_routes_only_among_the_tenants_own_models() -> None:
    text = haproxy_config(config())
    gate_b = "\n".join(section(text, "backend gate_team-b"))
    assert "m_team-b_ranker" in gate_b
    assert "m_team-a_" not in gate_b
    gate_c = section(text, "backend gate_team-c")
    assert not any("set-var(txn.route)" in line for line in gate_c)


def test_routes_of_tenants_the_pool_does_not_admit_get_no_backend() -> None:
    text = haproxy_config(config(tenants=(("team-b", Limits()),)))
    assert "backend m_team-a_ranker" not in text
    assert "backend m_team-b_ranker" in text


def test_priority_lanes_order_the_queues_and_shed_the_low_ones() -> None:
    text = haproxy_config(config())
    ranker = section(text, "backend m_team-a_ranker")
    assert "http-request set-priority-class req.hdr(X-Shoal-Priority)" in ranker
    # Three lanes, 2 replicas x 16 slots: lane 3 shed once 1 round queues, lane 2 at 2.
    assert any("nbsrv,mul(16) if { req.hdr(X-Shoal-Priority) -m int 3 }" in r for r in ranker)
    assert any("nbsrv,mul(32) if { req.hdr(X-Shoal-Priority) -m int 2 }" in r for r in ranker)
    assert not any("-m int 1 }" in r and "shed_at" in r for r in ranker)
    # While the top lane is in use, lanes 2 and 3 leave 2 and 4 slots a replica free.
    assert any(
        "track-sc2 str(m_team-a_ranker) table top_lanes if { req.hdr(X-Shoal-Priority) -m int 1 }"
        in r
        for r in ranker
    )
    assert any(
        "txn.reserve) nbsrv,mul(2) if { req.hdr(X-Shoal-Priority) -m int 2 }" in r for r in ranker
    )
    assert any(
        "txn.reserve) nbsrv,mul(4) if { req.hdr(X-Shoal-Priority) -m int 3 }" in r for r in ranker
    )
    assert any(
        "{ var(txn.top_lane) -m int gt 0 }" in r and "be_conn_free,sub(txn.reserve)" in r
        for r in ranker
    )
    assert "backend top_lanes" in text
    gate = section(text, "backend gate_team-a")
    assert (
        "http-request set-var(txn.priority) int(2) "
        'if { var(txn.route) -m str -- "m_team-a_ranker" }' in gate
    )
    assert any("-m int 1:3 }" in line for line in gate)
    assert "http-request set-priority-class var(txn.priority)" in gate
    embedder = section(text, "backend m_team-a_embedder")
    assert not any("shed_at" in line for line in embedder)


def test_each_route_balances_checks_and_times_out() -> None:
    text = haproxy_config(config())
    ranker = section(text, "backend m_team-a_ranker")
    assert "balance leastconn" in ranker
    assert "timeout server 2000ms" in ranker
    assert "option httpchk GET /v2/health/ready" in ranker
    defaults = next(line for line in ranker if line.startswith("default-server"))
    for option in ("inter 1000ms", "fall 2", "rise 2", "observe layer7", "on-error mark-down"):
        assert option in defaults
    assert "server ranker-7d9f-abcde 10.0.1.12:8000 maxconn 16" in ranker
    grpc = section(text, "backend m_team-a_ranker_grpc")
    assert (
        "server ranker-7d9f-abcde 10.0.1.12:8001 proto h2 maxconn 16 "
        "track m_team-a_ranker/ranker-7d9f-abcde" in grpc
    )
    embedder = section(text, "backend m_team-a_embedder")
    assert embedder[:2] == ["balance hdr(X-Session-ID)", "hash-type consistent"]
    assert "timeout server 500ms" in embedder


def test_the_grpc_model_prefix_is_how_protobuf_encodes_field_1() -> None:
    for name in ("ranker", "m" * 200):
        for message in (
            service_pb2.ModelInferRequest(model_name=name, model_version="3", id="x"),
            service_pb2.ModelReadyRequest(name=name, version="1"),
            service_pb2.ModelMetadataRequest(name=name),
        ):
            encoded = message.SerializeToString().hex().upper()
            assert encoded.startswith(grpc_name_prefix(name))
    assert grpc_name_prefix("a") == "0A0161"
    assert grpc_name_prefix("m" * 200).startswith("0AC801")  # a two-byte length


def test_quoting_keeps_values_inert() -> None:
    assert quote('a"b\\c$d') == '"a\\"b\\\\c\\$d"'
    with pytest.raises(GatewayConfigError, match="control character"):
        quote("a\nb")


@pytest.mark.parametrize(
    "changes",
    [
        {"keys": ()},
        {"keys": (SigningKey("k", "PS256", "/k.pem"),)},
        {"keys": (SigningKey("k", "HS256", "/k.pem"),)},
        {"keys": (SigningKey("k", "RS256", "relative.pem"),)},
        {"keys": (SigningKey("k", "RS256", "/with space.pem"),)},
        {"issuer": "https://x\n"},
        {"tenants": (("Team_A", Limits()),)},
        {"tenants": (("team-a", Limits()), ("team-a", Limits()))},
        {"tenants": (("team-a", Limits(burst=-1)),)},
        {"tenants": (("team-a", Limits(queue_timeout_ms=0)),)},
        {"peers": (Peer("gw", "10.0.0.1"), Peer("gw", "10.0.0.2"))},
        {"peers": (Peer("gw|0", "10.0.0.1"),)},
        {"routes": (route("team-a", "ranker"), route("team-a", "ranker"))},
        {"routes": (route("team-a", "a/b"),)},
        {"routes": (route("team-a", "ranker", backend="gate_team-b"),)},
        {"routes": (route("team-a", "ranker", backend="bad name"),)},
        {"routes": (route("team-a", "ranker", timeout_ms=0),)},
        {"routes": (route("team-a", "ranker", priority_levels=2, default_priority=3),)},
        {"routes": (route("team-a", "ranker", sticky_header="X Bad"),)},
        {"routes": (route("team-a", "ranker", overflow=(Server("a b", "10.0.0.1"),)),)},
        {"routes": (route("team-a", "ranker", overflow=(Server("o", "10.0.0.1"),) * 2),)},
        {
            "routes": (
                route("team-a", "ranker", overflow=(Server("o", "10.0.0.1"),)),
                route("team-a", "other", backend="m_team-a_ranker_overflow"),
            )
        },
        {"bind_address": "0.0.0.0 ssl"},
        {"oidc": (oidc(issuer="https://kubernetes.default.svc.cluster.local"),)},
        {"oidc": (oidc(), oidc())},
        {"oidc": (oidc(tenant_claim="a b"),)},
        {"oidc": (oidc(tenant_claim="a['b']"),)},
        {"oidc": (oidc(tenant_claim=""),)},
        {"oidc": (oidc(audience=""),)},
        {"oidc": (oidc(keys=(SigningKey("k", "HS256", "/o.pem"),)),)},
        {"oidc": (oidc(keys=(SigningKey("k", "RS256", "/etc/shoal-gateway/keys/kid-rsa.pem"),)),)},
    ],
)
def test_inputs_it_cannot_express_safely_are_refused(changes: dict[str, object]) -> None:
    with pytest.raises(GatewayConfigError):
        haproxy_config(config(**changes))


def test_every_line_is_indented_or_a_section() -> None:
    sections = re.compile(r"^(global|defaults|peers \S+|frontend \S+|backend \S+|# .*)$")
    for line in haproxy_config(config()).splitlines():
        assert not line or line.startswith("    ") or sections.match(line), line
        assert line == line.rstrip()


def test_a_request_no_replica_has_a_slot_for_spills_to_a_free_overflow_replica() -> None:
    rendered = haproxy_config(config())
    routes = section(rendered, "frontend routes")
    spill = [x for x in routes if x.startswith("use_backend m_team-a_embedder_overflow if")]
    # The embedder keeps clients on one replica: a full one queues while others have
    # slots, so its requests also spill as soon as any wait.
    assert spill == [
        "use_backend m_team-a_embedder_overflow if "
        '{ req.hdr(X-Shoal-Internal-Route) -m str -- "m_team-a_embedder" } '
        "{ be_conn_free(m_team-a_embedder) -m int le 0 } "
        "{ be_conn_free(m_team-a_embedder_overflow) -m int gt 0 }",
        "use_backend m_team-a_embedder_overflow if "
        '{ req.hdr(X-Shoal-Internal-Route) -m str -- "m_team-a_embedder" } '
        "{ queue(m_team-a_embedder) -m int gt 0 } "
        "{ be_conn_free(m_team-a_embedder_overflow) -m int gt 0 }",
    ]
    plain = haproxy_config(
        config(routes=(route("team-a", "ranker", overflow=(Server("o", "10.0.0.9"),)),))
    )
    assert "queue(m_team-a_ranker)" not in plain
    # Before the route's own backend is chosen; gRPC spills to its own twin backend.
    assert routes.index(spill[0]) < routes.index("use_backend %[req.hdr(X-Shoal-Internal-Route)]")
    assert any(line.startswith("use_backend m_team-a_embedder_overflow_grpc if") for line in routes)
    http = section(rendered, "backend m_team-a_embedder_overflow")
    assert "server embedder-overflow-6b8c-klmno 10.0.5.3:8000 maxconn 16" in http
    assert any(line.startswith("default-server check") for line in http)
    grpc = section(rendered, "backend m_team-a_embedder_overflow_grpc")
    assert any("track m_team-a_embedder_overflow/embedder-overflow-6b8c-klmno" in x for x in grpc)
    # A route without overflow replicas spills nowhere and has no such backends.
    assert "m_team-a_ranker_overflow" not in rendered
    assert not any("_overflow" in line for line in section(rendered, "backend m_team-a_ranker"))


def test_overflow_replicas_take_no_lanes_to_shed() -> None:
    laned = route(
        "team-a",
        "ranker",
        priority_levels=3,
        default_priority=2,
        overflow=(Server("ranker-overflow-0", "10.0.6.1"),),
    )
    rendered = haproxy_config(config(routes=(laned,)))
    assert any("shed" in line for line in section(rendered, "backend m_team-a_ranker"))
    assert not any("shed" in line for line in section(rendered, "backend m_team-a_ranker_overflow"))
