"""Identity at the gateway, on real haproxy and tritonserver: a tenant is who its
service-account token proves it is, never what a header says.

Every token is shaped like a Kubernetes projected service-account token (see
e2e/gateway.py); only the signer is a test key pair.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from e2e.linear_model import BODY
from tritonclient.utils import InferenceServerException

from e2e import gateway as gw
from shoal.render.gateway_config import TENANT_HEADER, Limits

INFER = "/v2/models/{}/infer"
AUD = gw.AUDIENCE


@dataclass
class Setup:
    gateway: gw.Gateway
    direct: str  # tritonserver of team-a's model, bypassing the gateway

    @property
    def url(self) -> str:
        return self.gateway.replicas[0].url


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    work = tmp_path_factory.mktemp("identity")
    # Both tenants have a model named "linear", on different servers: the name alone
    # must never decide where a request goes.
    with (
        gw.tritons(work / "a", [gw.Model("linear"), gw.Model("ranker")]) as a_servers,
        gw.tritons(work / "b", [gw.Model("linear")]) as b_servers,
    ):
        routes = [
            gw.route("team-a", "linear", gw.servers_of(a_servers, "a")),
            gw.route("team-a", "ranker", gw.servers_of(a_servers, "a")),
            gw.route("team-b", "linear", gw.servers_of(b_servers, "b")),
        ]
        tenants = {
            "team-a": Limits(requests_per_second=1000, burst=100),
            "team-b": Limits(requests_per_second=5, burst=0),
        }
        with gw.gateway(work / "gw", tenants, routes) as gateway:
            yield Setup(gateway, a_servers[0].http_url)


def post(setup: Setup, model: str, headers: dict[str, str]) -> httpx.Response:
    return httpx.post(setup.url + INFER.format(model), json=BODY, headers=headers, timeout=10)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_valid_token_of_either_key_type_reaches_its_model(setup: Setup) -> None:
    issuer = setup.gateway.issuer
    for key in issuer.keys:  # RS256 and ES256
        response = post(setup, "linear", bearer(issuer.token("team-a", key=key)))
        assert response.status_code == 200, (key.alg, response.text)
        assert response.json()["model_name"] == "linear"


def test_bad_tokens_get_401_with_www_authenticate(setup: Setup) -> None:
    issuer = setup.gateway.issuer
    stranger = gw.rsa_pair(issuer.keys[0].kid)  # same kid, another key: a forgery
    good = issuer.token("team-a")
    header, _payload, signature = good.split(".")
    cases = {
        "missing": {},
        "not a bearer": {"Authorization": f"Basic {good}"},
        "garbage": bearer("not.a.token"),
        "forged (wrong key, same kid)": bearer(issuer.token("team-a", key=stranger)),
        "unknown kid": bearer(issuer.token("team-a", key=gw.rsa_pair("nobody"))),
        "payload swapped": bearer(f"{header}.{issuer.token('team-b').split('.')[1]}.{signature}"),
        "expired": bearer(issuer.token("team-a", lifetime_s=-5)),
        "not yet valid": bearer(issuer.token("team-a", not_before_s=600)),
        "wrong audience": bearer(issuer.token("team-a", audience=["kubernetes"])),
        "no audience": bearer(issuer.token("team-a", audience=[])),
        "wrong issuer": bearer(issuer.token("team-a", issuer="https://evil.example")),
        "not a service account": bearer(issuer.token("team-a", subject="admin")),
        "no exp": bearer(issuer.token("team-a", claims={"exp": None})),
        # Numbers as strings: read as integers they would pass.
        "exp as a string": bearer(issuer.token("team-a", claims={"exp": str(2**33)})),
        "nbf as a string": bearer(issuer.token("team-a", claims={"nbf": "0"})),
        "audience a list of lists": bearer(issuer.token("team-a", claims={"aud": [[AUD]]})),
    }
    failures = {}
    for name, headers in cases.items():
        response = post(setup, "linear", headers)
        challenge = response.headers.get("WWW-Authenticate", "")
        if response.status_code != 401 or not challenge.startswith("Bearer"):
            failures[name] = (response.status_code, challenge)
    assert not failures, failures
    # A signature is checked with the algorithm of the key its kid names, not the one
    # its header claims.
    confused = issuer.token("team-a", key=gw.ec_pair(issuer.keys[0].kid))
    assert post(setup, "linear", bearer(confused)).status_code == 401


def test_audience_may_be_one_of_several_or_a_plain_string(setup: Setup) -> None:
    issuer = setup.gateway.issuer
    several = issuer.token("team-a", audience=["kubernetes", "vault", issuer.audience])
    assert post(setup, "linear", bearer(several)).status_code == 200
    plain = issuer.token("team-a", claims={"aud": issuer.audience})
    assert post(setup, "linear", bearer(plain)).status_code == 200


def test_a_tenant_the_pool_does_not_admit_gets_403(setup: Setup) -> None:
    response = post(setup, "linear", bearer(setup.gateway.token("team-c")))
    assert response.status_code == 403


def test_the_tenant_header_is_the_verified_one(setup: Setup) -> None:
    """A client naming another tenant in X-Shoal-Tenant still acts as itself: team-a's
    token with team-b's name reaches team-a's server (whose log shows team-a)."""
    token = setup.gateway.token("team-a")
    response = post(setup, "linear", {**bearer(token), TENANT_HEADER: "team-b"})
    assert response.status_code == 200
    rid = response.headers["X-Request-ID"]
    lines = gw_log_lines(setup, f"id={rid} ", 2)
    route = next(line for line in lines if line.split()[2] == "routes")
    assert "m_team-a_linear/" in route, route
    assert "tenant=team-a" in route, route


def gw_log_lines(setup: Setup, marker: str, count: int) -> list[str]:
    """The gateway's log lines that carry ``marker`` (``id=<id> `` for one request,
    ``client_id=<id>`` for the requests a client sent with that id), once there are
    ``count`` of them (a hop logs when it ends)."""
    log = setup.gateway.replicas[0].log
    found: list[str] = []

    def logged() -> bool:
        found[:] = [line for line in log.read_text().splitlines() if f" {marker}" in line]
        return len(found) >= count

    gw.wait_until(f"{count} log lines with {marker}", logged, timeout=5)
    return found


def test_another_tenants_model_answers_as_if_absent(setup: Setup) -> None:
    a, b = setup.gateway.token("team-a"), setup.gateway.token("team-b")
    assert post(setup, "ranker", bearer(b)).status_code == 404
    assert post(setup, "nonexistent", bearer(a)).status_code == 404
    # Endpoints that would show or change the whole server are not passed on.
    for path in ("/v2/repository/index", "/v2/models/stats", "/v2/systemsharedmemory/status"):
        response = httpx.post(setup.url + path, headers=bearer(a), timeout=10)
        assert response.status_code == 404, path


def test_one_tenants_token_never_spends_anothers_limit(setup: Setup) -> None:
    """team-b may send 5 requests a second; team-a's 30 requests, to a model of the same
    name, take nothing from it."""
    replica = setup.gateway.replicas[0]
    a = setup.gateway.token("team-a")
    before = replica.table("rate_10s").get("team-b|gw-0", 0)
    assert all(post(setup, "linear", bearer(a)).status_code == 200 for _ in range(30))
    assert replica.table("rate_10s").get("team-b|gw-0", 0) <= before
    assert replica.table("rate_10s")["team-a|gw-0"] >= 30
    gw.wait_until(
        "team-b's earlier requests out of its 1 s window",
        lambda: replica.table("rate_1s").get("team-b|gw-0", 0) == 0,
        timeout=5,
    )
    b = setup.gateway.token("team-b")
    statuses = [post(setup, "linear", bearer(b)).status_code for _ in range(5)]
    assert statuses == [200] * 5
    over = post(setup, "linear", bearer(b))
    assert over.status_code == 429
    assert over.headers["Retry-After"] == "1"


def test_two_request_ids_the_clients_and_the_gateways_own(setup: Setup) -> None:
    """The client's X-Request-ID comes back to it and reaches both hops' logs as
    client_id=, beside its tenant; the id the logs key on (id=) is always the gateway's
    own, so one tenant sending another's id forges nothing."""
    token = setup.gateway.token("team-a")
    mine = f"req-{uuid.uuid4()}"
    response = post(setup, "linear", {**bearer(token), "X-Request-ID": mine})
    assert response.headers["X-Request-ID"] == mine
    # Both hops log it: the edge and the route to Triton, under one id of the gateway's.
    lines = gw_log_lines(setup, f"client_id={mine}", 2)
    [own] = {line.split(" id=", 1)[1].split()[0] for line in lines}
    assert uuid.UUID(own).version == 4
    assert all("tenant=team-a" in line for line in lines), lines
    # Another tenant sending the same id (served, or over its small rate limit): its
    # lines say so, under an id of the gateway's that is not the first's.
    other = setup.gateway.token("team-b")
    post(setup, "linear", {**bearer(other), "X-Request-ID": mine})
    lines = gw_log_lines(setup, f"client_id={mine}", 3)
    by_id = {
        line.split(" id=", 1)[1].split()[0]: line.split(" tenant=", 1)[1].split()[0]
        for line in lines
    }
    assert len(by_id) == 2, lines
    assert by_id[own] == "team-a"
    assert sorted(by_id.values()) == ["team-a", "team-b"], lines
    # A client that sends none gets the gateway's, which the logs key on.
    generated = post(setup, "linear", bearer(token)).headers["X-Request-ID"]
    assert uuid.UUID(generated).version == 4
    gw_log_lines(setup, f"id={generated} ", 2)
    # An id that is not a plain token is not logged as sent: the client gets the
    # gateway's.
    odd = post(setup, "linear", {**bearer(token), "X-Request-ID": "a b\tc"})
    assert uuid.UUID(odd.headers["X-Request-ID"])
    # Rejections carry one too, and the edge logs the 401.
    refused = post(setup, "linear", {"X-Request-ID": f"{mine}-x"})
    assert refused.status_code == 401
    assert refused.headers["X-Request-ID"] == f"{mine}-x"
    [unauthorized] = gw_log_lines(setup, f"client_id={mine}-x", 1)
    assert " 401 " in unauthorized, unauthorized


def test_model_less_endpoints_are_the_gateways_own(setup: Setup) -> None:
    for path in ("/v2/health/live", "/v2/health/ready"):
        assert httpx.get(setup.url + path, timeout=10).status_code == 200
    assert httpx.get(setup.url + "/v2", timeout=10).json()["name"] == "shoal-gateway"


def test_grpc_is_verified_and_routed_by_the_model_in_the_request(setup: Setup) -> None:
    replica = setup.gateway.replicas[0]
    client = grpcclient.InferenceServerClient(url=replica.grpc_url)
    a = {"authorization": f"Bearer {setup.gateway.token('team-a')}"}
    b = {"authorization": f"Bearer {setup.gateway.token('team-b')}"}
    data = grpcclient.InferInput("INPUT0", [1, 4], "FP32")
    data.set_data_from_numpy(np.arange(4, dtype=np.float32).reshape(1, 4))
    assert client.infer("linear", [data], headers=a).as_numpy("OUTPUT0").tolist() == [[0, 1, 2, 3]]
    assert client.is_model_ready("ranker", headers=a)
    assert client.is_server_live(headers=a)
    # A body larger than HAProxy's buffer is routed all the same (the model name is
    # read from the first bytes of the message): Triton itself answers this one, about
    # the shape.
    big = grpcclient.InferInput("INPUT0", [1, 4 * 8192], "FP32")
    big.set_data_from_numpy(np.ones((1, 4 * 8192), dtype=np.float32))
    with pytest.raises(InferenceServerException, match="unexpected shape"):
        client.infer("linear", [big], headers=a)
    refused = {
        "no token": lambda: client.is_model_ready("linear"),
        "another tenant's model": lambda: client.is_model_ready("ranker", headers=b),
        "repository index": lambda: client.get_model_repository_index(headers=a),
    }
    answered = []
    for name, call in refused.items():
        try:
            call()
            answered.append(name)
        except InferenceServerException:
            pass
    assert not answered


def test_the_models_own_port_is_not_the_gateways(setup: Setup) -> None:
    """A control: the same request straight to Triton needs no token (what the pool's
    NetworkPolicies forbid in a cluster), so the 401s above are the gateway's doing."""
    response = httpx.post(setup.direct + INFER.format("linear"), json=BODY, timeout=10)
    assert response.status_code == 200
