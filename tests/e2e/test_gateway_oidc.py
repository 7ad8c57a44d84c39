"""Tokens of an OIDC issuer the pool trusts, beside ServiceAccount tokens, on real
haproxy and tritonserver: the tenant is the namespace the issuer's token names in its
tenant claim, and nothing a caller can make up.

The issuers are e2e/oidc_issuer.py's: a discovery document and a key set over HTTPS on
loopback, with a private CA. Their keys reach the gateway as they do in a cluster: the
operator's own fetch (shoal.kube.oidc.Keyring, with the pool's certificateAuthority),
turned into the pool's gateway configuration by the operator's planner and renderer, and
applied by the agent's runner. The operator's pass and status around this are tested on
the cluster (tests/e2e/test_gateway_oidc_on_cluster.py).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa
from e2e.linear_model import BODY
from e2e.oidc_issuer import AUDIENCE, TENANT_CLAIM, TestIssuer, jwk, oidc_issuer

from e2e import gateway as gw
from e2e import triton
from shoal.api.gateway import OidcIssuer
from shoal.kube.oidc import IssuerKeys, IssuerSource, Keyring
from shoal.render.gateway_config import Limits
from shoal.render.gateway_plan import trusted_issuer

INFER = "/v2/models/{}/infer"
# The second issuer: a partner's, whose client id looks like a number and whose tenant
# sits inside an object.
PARTNER_AUDIENCE = "12345"
PARTNER_CLAIM = "org.namespace"


def spec_of(issuer: TestIssuer, **changes: Any) -> OidcIssuer:
    fields: dict[str, Any] = {
        "issuer": issuer.url,
        "audience": AUDIENCE,
        "tenant_claim": TENANT_CLAIM,
        "certificate_authority": issuer.ca_pem,
        **changes,
    }
    return OidcIssuer(**fields)


@dataclass
class Trust:
    """A gateway trusting some issuers, with their keys fetched by the operator's code."""

    gateway: gw.Gateway
    specs: list[OidcIssuer]
    keyring: Keyring

    @property
    def url(self) -> str:
        return self.gateway.replicas[0].url

    def load(self, *, refresh: bool = True) -> list[IssuerKeys]:
        """Fetch every issuer's keys (as a resync does) and apply the configuration the
        operator renders with them (as its agent does)."""
        found = []
        for spec in self.specs:
            source = IssuerSource.of(spec)
            found.append(self.keyring.refresh(source) if refresh else self.keyring.keys(source))
        assert self.gateway.config is not None
        trusted = tuple(trusted_issuer(s, f.keys) for s, f in zip(self.specs, found, strict=True))
        files = {f"keys/{k.file_name}": k.pem.encode() for f in found for k in f.keys}
        self.gateway.apply(dataclasses.replace(self.gateway.config, oidc=trusted), files)
        return found

    def post(self, model: str, token: str | None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
        return httpx.post(self.url + INFER.format(model), json=BODY, headers=headers, timeout=10)


@dataclass
class Models:
    a: list[triton.TritonServer]
    b: list[triton.TritonServer]

    def routes(self) -> list[Any]:
        return [
            gw.route("team-a", "linear", gw.servers_of(self.a, "a")),
            gw.route("team-a", "ranker", gw.servers_of(self.a, "a")),
            gw.route("team-b", "linear", gw.servers_of(self.b, "b")),
        ]


TENANTS = {"team-a": Limits(), "team-b": Limits()}


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Models]:
    work = tmp_path_factory.mktemp("oidc-models")
    # Both tenants have a model named "linear", on different servers.
    with (
        gw.tritons(work / "a", [gw.Model("linear"), gw.Model("ranker")]) as a,
        gw.tritons(work / "b", [gw.Model("linear")]) as b,
    ):
        yield Models(a, b)


@dataclass
class Setup:
    trust: Trust
    platform: TestIssuer
    partner: TestIssuer


@pytest.fixture(scope="module")
def setup(models: Models, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Setup]:
    work = tmp_path_factory.mktemp("oidc")
    platform_keys = [gw.rsa_pair("idp-rsa-1"), gw.ec_pair("idp-ec-1")]
    # The partner's key has the platform's RSA key id: one issuer's key never verifies
    # another's tokens.
    partner_keys = [gw.rsa_pair("idp-rsa-1")]
    with (
        oidc_issuer(work / "platform", platform_keys) as platform,
        oidc_issuer(work / "partner", partner_keys) as partner,
        gw.gateway(work / "gw", TENANTS, models.routes()) as gateway,
    ):
        specs = [
            spec_of(platform),
            spec_of(partner, audience=PARTNER_AUDIENCE, tenant_claim=PARTNER_CLAIM),
        ]
        trust = Trust(gateway, specs, Keyring())
        found = trust.load()
        assert [[k.kid for k in f.keys] for f in found] == [
            ["idp-rsa-1", "idp-ec-1"],
            ["idp-rsa-1"],
        ]
        assert all(f.error is None for f in found), found
        yield Setup(trust, platform, partner)


def partner_token(setup: Setup, tenant: Any, **kwargs: Any) -> str:
    """A token of the partner's issuer: ``tenant`` in {"org": {"namespace": ...}}."""
    kwargs.setdefault("audience", PARTNER_AUDIENCE)
    claims = {"org": {"namespace": tenant}} if tenant is not None else {}
    return setup.partner.token(None, claims={**claims, **kwargs.pop("claims", {})}, **kwargs)


def routed_to(setup: Setup, response: httpx.Response) -> str:
    """The route the gateway's log names for a request (its second hop's line)."""
    log = setup.trust.gateway.replicas[0].log
    rid = response.headers["X-Request-ID"]

    def lines() -> list[str]:
        return [line for line in log.read_text().splitlines() if f"id={rid} " in line]

    gw.wait_until("the request's two log lines", lambda: len(lines()) >= 2, timeout=5)
    return next(line for line in lines() if line.split()[2] == "routes")


def test_a_valid_token_of_either_key_reaches_its_tenants_model(setup: Setup) -> None:
    for key in setup.platform.published.keys:  # RS256 and ES256
        response = setup.trust.post("linear", setup.platform.token("team-a", key=key))
        assert response.status_code == 200, (key.alg, response.text)
        assert response.json()["model_name"] == "linear"
    # The tenant it names is the tenant Triton is told, and whose model it reaches.
    route = routed_to(setup, setup.trust.post("linear", setup.platform.token("team-b")))
    assert "m_team-b_linear/" in route, route
    assert "tenant=team-b" in route, route


def test_a_second_issuer_names_its_tenant_in_its_own_claim_and_audience(setup: Setup) -> None:
    response = setup.trust.post("linear", partner_token(setup, "team-b"))
    assert response.status_code == 200, response.text
    assert "tenant=team-b" in routed_to(setup, response)
    listed = partner_token(setup, "team-a", audience=["other", PARTNER_AUDIENCE])
    assert setup.trust.post("ranker", listed).status_code == 200


def test_another_tenants_model_answers_as_if_absent(setup: Setup) -> None:
    assert setup.trust.post("ranker", setup.platform.token("team-b")).status_code == 404


def test_bad_tokens_get_401(setup: Setup) -> None:
    platform, partner = setup.platform, setup.partner
    now = int(time.time())
    outsider = gw.rsa_pair("idp-rsa-1")  # the issuer's key id, someone else's key
    cases = {
        "no token": None,
        "wrong audience": platform.token("team-a", audience="another-app"),
        "audience list without ours": platform.token("team-a", audience=["a", "b"]),
        "no audience": platform.token("team-a", audience=None),
        "another issuer's audience": platform.token("team-a", audience=PARTNER_AUDIENCE),
        "audience a number": partner_token(setup, "team-a", audience=12345),
        "audience a number in a list": partner_token(setup, "team-a", audience=[12345]),
        "issuer not trusted": platform.token("team-a", issuer="https://login.evil.example"),
        "issuer with a trailing slash": platform.token("team-a", issuer=platform.url + "/"),
        "issuer as a list": platform.token("team-a", issuer=[platform.url]),  # type: ignore[arg-type]
        "issuer the cluster's": platform.token("team-a", issuer=gw.ISSUER),
        "signed by the other issuer's key": partner.token("team-a", issuer=platform.url),
        "expired": platform.token("team-a", lifetime_s=-5),
        "not yet valid": platform.token("team-a", not_before_s=600),
        "no exp": platform.token("team-a", claims={"exp": None}),
        "exp as a string": platform.token("team-a", claims={"exp": str(now + 600)}),
        "exp a boolean": platform.token("team-a", claims={"exp": True}),
        "nbf as a string": platform.token("team-a", claims={"nbf": "0"}),
        "no tenant claim": platform.token(None),
        "tenant claim a list": platform.token(["team-a"]),
        "tenant claim a list of one tenant among others": platform.token(["team-a", "team-b"]),
        "tenant claim an object": platform.token({"namespace": "team-a"}),
        "tenant claim null": platform.token(None, claims={TENANT_CLAIM: None}),
        "tenant claim a number": platform.token(7),
        "tenant claim a boolean": platform.token(True),
        "tenant in the other issuer's claim": platform.token(
            None, claims={"org": {"namespace": "team-a"}}
        ),
        "the partner's tenant at the top level": partner_token(
            setup, None, claims={"namespace": "team-a"}
        ),
        "alg none": platform.forged("team-a", "none"),
        "HS256 with the public key as the secret": platform.forged("team-a", "hs256"),
        "key not in the key set (its key id)": platform.token("team-a", key=outsider),
        "key not in the key set (unknown id)": platform.token(
            "team-a", key=gw.rsa_pair("idp-rsa-9")
        ),
        "RS256 signature under the EC key's id": platform.token(
            "team-a", key=gw.KeyPair("idp-ec-1", "RS256", outsider.private)
        ),
        "ES256 claimed for the RSA key": platform.token(
            "team-a", key=gw.KeyPair("idp-rsa-1", "ES256", gw.ec_pair("x").private)
        ),
        "payload swapped": _swapped(platform),
    }
    failures = {}
    for name, token in cases.items():
        response = setup.trust.post("linear", token)
        challenge = response.headers.get("WWW-Authenticate", "")
        if response.status_code != 401 or not challenge.startswith("Bearer"):
            failures[name] = (response.status_code, challenge)
    assert not failures, failures


def _swapped(issuer: TestIssuer) -> str:
    """team-a's signature on team-b's claims."""
    header, _, signature = issuer.token("team-a").split(".")
    return f"{header}.{issuer.token('team-b').split('.')[1]}.{signature}"


def test_a_tenant_the_pool_does_not_admit_gets_403(setup: Setup) -> None:
    for tenant in ("team-c", "kube-system", "Team-A", "team-a ", ""):
        response = setup.trust.post("linear", setup.platform.token(tenant))
        assert response.status_code == 403, (tenant, response.status_code, response.text)
    partner = partner_token(setup, "shoal-gateways")
    assert setup.trust.post("linear", partner).status_code == 403


def test_service_account_tokens_still_work_beside_oidc(setup: Setup) -> None:
    gateway = setup.trust.gateway
    assert setup.trust.post("linear", gateway.token("team-a")).status_code == 200
    # A service-account token naming an OIDC issuer is no token of it.
    assert (
        setup.trust.post("linear", gateway.token("team-a", issuer=setup.platform.url)).status_code
        == 401
    )
    # Nor does an OIDC token's subject make it a service account's.
    fake = setup.platform.token("team-a", claims={"sub": "system:serviceaccount:team-b:default"})
    response = setup.trust.post("linear", fake)
    assert response.status_code == 200
    assert "tenant=team-a" in routed_to(setup, response)


def test_the_operators_fetch_follows_the_discovery_document(setup: Setup, tmp_path: Path) -> None:
    platform = setup.platform
    before = len(platform.requests)
    keyring = Keyring()
    found = keyring.refresh(IssuerSource.of(spec_of(platform)))
    asked = platform.requests[before:]
    assert asked == ["/realms/platform/.well-known/openid-configuration", "/realms/platform/keys"]
    assert found.jwks_uri == platform.jwks_uri
    # With jwksURI, the key set alone.
    before = len(platform.requests)
    direct = keyring.refresh(IssuerSource.of(spec_of(platform, jwks_uri=platform.jwks_uri)))
    assert platform.requests[before:] == ["/realms/platform/keys"]
    assert [k.kid for k in direct.keys] == ["idp-rsa-1", "idp-ec-1"]
    # Without the pool's CA the issuer's certificate is not trusted; nor with another's.
    for ca in (None, setup.partner.ca_pem):
        untrusted = keyring.refresh(IssuerSource(platform.url, None, ca))
        assert not untrusted.keys
        assert "CERTIFICATE_VERIFY_FAILED" in (untrusted.error or "")


def test_a_discovery_document_or_key_set_that_does_not_hold_is_refused(setup: Setup) -> None:
    platform = setup.platform
    source = IssuerSource.of(spec_of(platform))
    published = platform.published
    try:
        published.named_issuer = "https://login.evil.example/realms/platform"
        assert "names issuer" in (Keyring().refresh(source).error or "")
        published.named_issuer = None
        published.jwks_uri = platform.jwks_uri.replace("https://", "http://")
        assert "is not https" in (Keyring().refresh(source).error or "")
        published.jwks_uri = None
        # Keys the gateway cannot use are left out, and said so.
        weak = gw.KeyPair("idp-weak", "RS256", rsa.generate_private_key(65537, 1024))
        published.extra = [
            jwk(weak),
            {**jwk(gw.rsa_pair("idp-ps")), "alg": "PS256"},
            {**jwk(gw.rsa_pair("idp-enc")), "use": "enc"},
            {"kty": "oct", "kid": "idp-hmac", "k": "c2VjcmV0"},
            jwk(gw.ec_pair("idp-rsa-1")),  # a second key of that id
            {"kty": "RSA", "use": "sig", "n": "AQAB", "e": "AQAB"},  # no id
        ]
        found = Keyring().refresh(source)
        assert [k.kid for k in found.keys] == ["idp-rsa-1", "idp-ec-1"]
        assert found.error is None
        assert [s.split(":")[0] for s in found.skipped] == [
            "idp-weak",
            "idp-ps",
            "idp-enc",
            "idp-hmac",
            "idp-rsa-1",
            "(no kid)",
        ]
    finally:
        published.named_issuer = published.jwks_uri = None
        published.extra = []


def test_rotated_keys_work_after_a_resync_and_an_outage_keeps_the_last_good_ones(
    models: Models, tmp_path: Path
) -> None:
    first, second = gw.rsa_pair("rot-1"), gw.ec_pair("rot-2")
    with (
        oidc_issuer(tmp_path / "issuer", [first]) as issuer,
        gw.gateway(tmp_path / "gw", TENANTS, models.routes()) as gateway,
    ):
        trust = Trust(gateway, [spec_of(issuer)], Keyring())
        trust.load()
        old = issuer.token("team-a", key=first)
        assert trust.post("linear", old).status_code == 200
        # The issuer rotates: the new key is published beside the old, then signs.
        issuer.published.keys = [second, first]
        new = issuer.token("team-a", key=second)
        assert trust.post("linear", new).status_code == 401  # not fetched yet
        (found,) = trust.load()  # the resync
        assert [k.kid for k in found.keys] == ["rot-2", "rot-1"]
        assert trust.post("linear", new).status_code == 200
        assert trust.post("linear", old).status_code == 200  # still published
        # The old key is withdrawn: its tokens are refused from the next resync on.
        issuer.published.keys = [second]
        trust.load()
        assert trust.post("linear", old).status_code == 401
        assert trust.post("linear", new).status_code == 200
        # The issuer is down: the fetch fails, the last keys stay, tokens keep working.
        issuer.published.failing = 503
        (down,) = trust.load()
        assert "HTTP 503" in (down.error or "")
        assert [k.kid for k in down.keys] == ["rot-2"]
        assert trust.post("linear", new).status_code == 200
        issuer.published.failing = None
        (back,) = trust.load()
        assert back.error is None
