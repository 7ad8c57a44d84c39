"""The keys of the OIDC issuers a pool trusts, from their documents to the gateway's
files and the pool's status: what a discovery document and a key set must say, how the
operator keeps the last good keys, and how they survive the operator's restart in the
gateway's ConfigMap. Fetched over real HTTPS and verified by the real haproxy in
tests/e2e/test_gateway_oidc.py."""

from __future__ import annotations

import base64
from types import SimpleNamespace
from typing import Any

import pytest
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from shoal.api.gateway import OidcIssuer
from shoal.api.tenantpool import TenantPool
from shoal.kube.oidc import FetchError, IssuerKeys, IssuerSource, Keyring
from shoal.reconcile.gateway import (
    issuer_keys_condition,
    issuer_sources,
    oidc_status,
    trusted_keys,
)
from shoal.render.gateway import GatewaySite, config_map, oidc_keys_in
from shoal.render.keys import (
    IssuerDocumentError,
    IssuerKeySet,
    PublicKey,
    discovery_url,
    issuer_file_prefix,
    issuer_keys,
    jwks_uri_from,
)

ISSUER = "https://login.example.com/realms/platform"


def _b64(number: int, size: int | None = None) -> str:
    raw = number.to_bytes(size or (number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def rsa_jwk(kid: str, bits: int = 2048, **extra: Any) -> dict[str, Any]:
    numbers = rsa.generate_private_key(65537, bits).public_key().public_numbers()
    return {"kty": "RSA", "kid": kid, "n": _b64(numbers.n), "e": _b64(numbers.e), **extra}


def ec_jwk(kid: str, **extra: Any) -> dict[str, Any]:
    points = ec.generate_private_key(ec.SECP256R1()).public_key().public_numbers()
    return {
        "kty": "EC",
        "kid": kid,
        "crv": "P-256",
        "x": _b64(points.x, 32),
        "y": _b64(points.y, 32),
        **extra,
    }


def test_the_discovery_document_must_name_the_issuer_and_an_https_key_set() -> None:
    assert discovery_url(ISSUER) == f"{ISSUER}/.well-known/openid-configuration"
    assert discovery_url(ISSUER + "/") == f"{ISSUER}/.well-known/openid-configuration"
    keys = f"{ISSUER}/protocol/openid-connect/certs"
    assert jwks_uri_from({"issuer": ISSUER, "jwks_uri": keys}, ISSUER) == keys
    refused = [
        ({"issuer": ISSUER + "/", "jwks_uri": keys}, "names issuer"),
        ({"issuer": "https://evil.example", "jwks_uri": keys}, "names issuer"),
        ({"jwks_uri": keys}, "names issuer"),
        ({"issuer": ISSUER, "jwks_uri": "http://login.example.com/certs"}, "not https"),
        ({"issuer": ISSUER}, "not https"),
        ([ISSUER], "not a JSON object"),
    ]
    for document, words in refused:
        with pytest.raises(IssuerDocumentError, match=words):
            jwks_uri_from(document, ISSUER)


def test_a_key_set_becomes_the_keys_haproxy_verifies_each_once() -> None:
    found = issuer_keys(
        ISSUER,
        {
            "keys": [
                rsa_jwk("r1", alg="RS256", use="sig"),
                ec_jwk("e1"),  # no alg: the curve's
                rsa_jwk("r2", alg="RS384"),
                rsa_jwk("weak", bits=1024),
                rsa_jwk("pss", alg="PS256"),
                rsa_jwk("mismatch", alg="ES256"),  # an RSA key claiming an EC algorithm
                ec_jwk("e384", alg="ES384"),  # a P-256 key claiming another curve's
                rsa_jwk("enc", use="enc"),
                {"kty": "oct", "kid": "hmac", "k": "c2VjcmV0"},
                {"kty": "OKP", "kid": "ed", "crv": "Ed25519", "x": "AA"},
                rsa_jwk("r1"),  # a second key of that id
                rsa_jwk(""),
                "not a key",
                {"kty": "RSA", "kid": "broken", "n": 5, "e": "AQAB"},
            ]
        },
    )
    assert [(k.kid, k.alg) for k in found.keys] == [
        ("r1", "RS256"),
        ("e1", "ES256"),
        ("r2", "RS384"),
    ]
    prefix = issuer_file_prefix(ISSUER)
    assert [k.file_name for k in found.keys] == [
        f"{prefix}r1.pem",
        f"{prefix}e1.pem",
        f"{prefix}r2.pem",
    ]
    assert [s.split(":")[0] for s in found.skipped] == [
        "weak",
        "pss",
        "mismatch",
        "e384",
        "enc",
        "hmac",
        "ed",
        "r1",
        "(no kid)",
        "(no kid)",
        "broken",
    ]
    with pytest.raises(IssuerDocumentError):
        issuer_keys(ISSUER, {"keys": "none"})


def test_one_issuers_keys_never_share_a_file_with_anothers_or_the_clusters() -> None:
    one, other = issuer_file_prefix(ISSUER), issuer_file_prefix(ISSUER + "2")
    assert one != other
    assert PublicKey("k", "RS256", "", one).file_name != PublicKey("k", "RS256", "").file_name


def test_at_most_sixteen_keys_of_an_issuer() -> None:
    found = issuer_keys(ISSUER, {"keys": [ec_jwk(f"k{i:02d}") for i in range(18)]})
    assert len(found.keys) == 16
    assert len(found.skipped) == 2


KEY = PublicKey("k1", "RS256", "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----\n")


class Issuer:
    """A fetch the test drives: the key sets an issuer answers with, or failures."""

    def __init__(self) -> None:
        self.answers: list[IssuerKeySet | Exception] = []
        self.calls = 0

    def __call__(self, source: IssuerSource) -> tuple[str, IssuerKeySet]:
        self.calls += 1
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return f"{source.issuer}/keys", answer


def test_the_keyring_keeps_the_last_good_keys_while_a_fetch_fails() -> None:
    fetch, now = Issuer(), [0.0]
    keyring = Keyring(fetch, clock=lambda: now[0])
    source = IssuerSource(ISSUER)
    second = PublicKey("k2", "ES256", KEY.pem)
    fetch.answers = [
        IssuerKeySet((KEY,)),
        FetchError("GET x: HTTP 503"),
        FetchError("GET x: HTTP 503"),
        IssuerKeySet((second,), ("k3: not a signing key HAProxy verifies",)),
        IssuerKeySet((), ("k4: not a signing key HAProxy verifies",)),
    ]
    assert keyring.keys(source).keys == (KEY,)
    assert keyring.keys(source).keys == (KEY,)  # not fetched again on a pass
    assert fetch.calls == 1
    failed = keyring.refresh(source)  # the resync
    assert (failed.keys, failed.error, failed.fetched) == ((KEY,), "GET x: HTTP 503", True)
    now[0] += 5
    assert keyring.keys(source) == failed  # a pass soon after: not asked again
    now[0] += 15
    assert keyring.keys(source).error == "GET x: HTTP 503"  # asked again, still down
    assert fetch.calls == 3
    rotated = keyring.refresh(source)
    assert (rotated.keys, rotated.error) == ((second,), None)
    assert rotated.jwks_uri == f"{ISSUER}/keys"
    # A key set without a usable key replaces the keys all the same (the issuer
    # withdrew them), and says so.
    emptied = keyring.refresh(source)
    assert emptied.keys == ()
    assert "no key the gateway can verify with (k4" in (emptied.error or "")


def test_the_resync_fetches_every_issuer_a_pool_trusts_and_forgets_the_others() -> None:
    fetch = Issuer()
    keyring = Keyring(fetch)
    one, two = IssuerSource(ISSUER), IssuerSource(ISSUER, f"{ISSUER}/certs")
    fetch.answers = [IssuerKeySet((KEY,)), IssuerKeySet((KEY,)), IssuerKeySet((KEY,))]
    keyring.refresh_all([one, two])
    assert fetch.calls == 2
    keyring.refresh_all([two])
    assert fetch.calls == 3
    fetch.answers = [FetchError("down")]
    assert keyring.keys(one).keys == ()  # forgotten: fetched again, and failing


def pool(**gateway: Any) -> TenantPool:
    return TenantPool.model_validate(
        {
            "metadata": {"name": "shared"},
            "spec": {
                "isolation": "Shared",
                "tenants": {"namespaces": ["team-a"]},
                "quota": {"gpus": 1},
                "gateway": gateway,
            },
        }
    )


OIDC = {"issuer": ISSUER, "audience": "shoal-inference", "tenantClaim": "shoal_namespace"}


def test_the_gateways_config_map_holds_the_issuers_keys_and_says_whose_they_are() -> None:
    prefix = issuer_file_prefix(ISSUER)
    keys = (PublicKey("k1", "RS256", KEY.pem, prefix), PublicKey("k/2", "ES256", KEY.pem, prefix))
    body = config_map(pool(), GatewaySite(), "cfg", (KEY,), [(ISSUER, keys)])
    assert set(body["data"]) == {"haproxy.cfg", "k1.pem", f"{prefix}k1.pem", f"{prefix}k_2.pem"}
    assert oidc_keys_in(body) == {ISSUER: keys}
    # What does not read back as a key is left out.
    body["data"].pop(f"{prefix}k1.pem")
    assert oidc_keys_in(body) == {ISSUER: keys[1:]}
    assert oidc_keys_in({"metadata": {"annotations": {"shoal.dev/oidc-keys": "{"}}}) == {}
    assert oidc_keys_in({}) == {}
    assert "annotations" not in config_map(pool(), GatewaySite(), "cfg", (KEY,))["metadata"]


def test_keys_the_gateway_has_are_kept_when_a_restarted_operator_cannot_fetch() -> None:
    prefix = issuer_file_prefix(ISSUER)
    kept = (PublicKey("k1", "RS256", KEY.pem, prefix),)
    live = config_map(pool(), GatewaySite(), "cfg", (KEY,), [(ISSUER, kept)])
    fetch = Issuer()
    fetch.answers = [FetchError("GET x: ConnectError")]
    reads: list[tuple[str, ...]] = []

    def get(*args: str) -> dict[str, Any]:
        reads.append(args)
        return live

    op = SimpleNamespace(
        oidc=Keyring(fetch),
        kube=SimpleNamespace(get=get),
        settings=SimpleNamespace(gateway=GatewaySite()),
    )
    the_pool = pool(oidc=[OIDC])
    (found,) = trusted_keys(op, the_pool)  # type: ignore[arg-type]
    assert found[1].keys == kept
    assert found[1].error == "GET x: ConnectError"
    assert reads == [("v1", "ConfigMap", "gw-shared", "shoal-gateways")]
    trusted_keys(op, the_pool)  # type: ignore[arg-type]
    assert len(reads) == 1  # looked for once
    assert oidc_status([found]) == [
        {"issuer": ISSUER, "keys": ["k1"], "error": "GET x: ConnectError"}
    ]


def test_the_pools_condition_says_which_issuers_keys_are_loaded() -> None:
    spec = OidcIssuer.model_validate(OIDC)
    good = IssuerKeys((KEY,), f"{ISSUER}/keys", fetched=True)
    (none,) = issuer_keys_condition(pool(), [])
    assert (none.status, none.reason) == ("True", "NoIssuers")
    assert issuer_keys_condition(pool(enabled=False), []) == []
    (loaded,) = issuer_keys_condition(pool(oidc=[OIDC]), [(spec, good)])
    assert (loaded.status, loaded.reason) == ("True", "Loaded")
    assert f"{ISSUER} (1)" in loaded.message
    down = IssuerKeys((KEY,), f"{ISSUER}/keys", "GET x: HTTP 503", fetched=True)
    (failing,) = issuer_keys_condition(pool(oidc=[OIDC]), [(spec, down)])
    assert (failing.status, failing.reason) == ("False", "JWKSUnavailable")
    assert "verified with the 1 key(s) fetched before" in failing.message
    (never,) = issuer_keys_condition(pool(oidc=[OIDC]), [(spec, IssuerKeys(error="down"))])
    assert "its tokens are refused" in never.message
    empty = IssuerKeys((), f"{ISSUER}/keys", "the key set holds no key", fetched=True)
    (unusable,) = issuer_keys_condition(pool(oidc=[OIDC]), [(spec, empty)])
    assert unusable.reason == "NoUsableKeys"
    assert oidc_status([(spec, good)]) == [
        {"issuer": ISSUER, "keys": ["k1"], "jwksURI": f"{ISSUER}/keys"}
    ]


def test_pools_that_name_the_same_issuer_share_one_fetch() -> None:
    both = [pool(oidc=[OIDC]), pool(oidc=[OIDC]), pool(enabled=False, oidc=[{**OIDC}])]
    assert issuer_sources(both) == {IssuerSource(ISSUER)}
