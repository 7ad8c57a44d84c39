"""An OpenID Connect issuer for tests: a discovery document and a JSON Web Key Set over
HTTPS on loopback (a certificate of a throwaway private CA), and tokens signed the way an
identity provider signs them.

What the operator reads from a real issuer is exactly this: ``<issuer>/.well-known/
openid-configuration`` naming the issuer and its ``jwks_uri``, and the key set there.
The keys are the test's own (RSA and EC pairs of e2e/gateway.py), and the test can
change what the issuer publishes while it runs: rotate its keys, publish a discovery
document that names someone else, or answer 503 (an outage).
"""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import json
import ssl
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

from cryptography.hazmat.primitives.asymmetric import ec, rsa

from e2e.cluster.pki import webhook_serving
from e2e.gateway import KeyPair

REALM = "/realms/platform"
AUDIENCE = "shoal-inference"
TENANT_CLAIM = "shoal_namespace"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _number(value: int) -> str:
    return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))


def jwk(key: KeyPair, *, with_alg: bool = True) -> dict[str, Any]:
    """The public half of ``key`` as an identity provider publishes it."""
    public = key.private.public_key()
    out: dict[str, Any] = {"kid": key.kid, "use": "sig"}
    if isinstance(public, rsa.RSAPublicKey):
        numbers = public.public_numbers()
        out |= {"kty": "RSA", "n": _number(numbers.n), "e": _number(numbers.e)}
    else:
        assert isinstance(public, ec.EllipticCurvePublicKey)
        points = public.public_numbers()
        size = (public.curve.key_size + 7) // 8
        out |= {
            "kty": "EC",
            "crv": "P-256",
            "x": _b64(points.x.to_bytes(size, "big")),
            "y": _b64(points.y.to_bytes(size, "big")),
        }
    if with_alg:
        out["alg"] = key.alg
    return out


@dataclass
class Published:
    """What the issuer answers now; the test changes it at will."""

    keys: list[KeyPair]
    # The issuer the discovery document names (None: its own).
    named_issuer: str | None = None
    # The jwks_uri the discovery document names (None: its own https one).
    jwks_uri: str | None = None
    # Answer every request with this status instead (an outage).
    failing: int | None = None
    # Keys listed as they are, beside the usable ones: odd entries of a key set.
    extra: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class TestIssuer:
    """A running issuer: ``url`` is what its tokens name in ``iss``."""

    __test__ = False  # not a test class, for pytest

    url: str
    ca_pem: str
    published: Published
    requests: list[str] = field(default_factory=list)

    @property
    def jwks_uri(self) -> str:
        return f"{self.url}/keys"

    @property
    def key(self) -> KeyPair:
        """The key it signs with now: the first it publishes."""
        return self.published.keys[0]

    def token(
        self,
        tenant: Any,
        *,
        key: KeyPair | None = None,
        audience: Any = AUDIENCE,
        issuer: str | None = None,
        lifetime_s: int = 600,
        not_before_s: int | None = 0,
        claims: Mapping[str, Any] | None = None,
        header: Mapping[str, Any] | None = None,
        tenant_claim: str = TENANT_CLAIM,
    ) -> str:
        """A token as an identity provider issues one (client credentials): ``tenant``
        in ``tenant_claim`` (any JSON value; None leaves the claim out)."""
        key = key or self.key
        now = int(time.time())
        payload: dict[str, Any] = {
            "iss": issuer or self.url,
            "sub": "service-account-batch-scorer",
            "aud": audience,
            "exp": now + lifetime_s,
            "iat": now,
            "jti": str(uuid.uuid4()),
            "azp": "batch-scorer",
            "scope": "inference",
        }
        if not_before_s is not None:
            payload["nbf"] = now + not_before_s
        if tenant is not None:
            payload[tenant_claim] = tenant
        payload.update(claims or {})
        for name in [k for k, v in payload.items() if v is None]:
            del payload[name]
        head = {"alg": key.alg, "kid": key.kid, "typ": "JWT", **(header or {})}
        signing_input = f"{_b64(json.dumps(head).encode())}.{_b64(json.dumps(payload).encode())}"
        return f"{signing_input}.{_b64(key.sign(signing_input.encode()))}"

    def forged(self, tenant: str, how: str) -> str:
        """Tokens no key of the issuer signed, made the classic ways: ``none`` (alg none,
        no signature), ``hs256`` (HMAC with the issuer's public key as the secret, which
        a verifier that lets the token pick its algorithm accepts)."""
        good = self.token(tenant)
        _, payload, _ = good.split(".")
        if how == "none":
            head = _b64(json.dumps({"alg": "none", "kid": self.key.kid}).encode())
            return f"{head}.{payload}."
        assert how == "hs256"
        head = _b64(json.dumps({"alg": "HS256", "kid": self.key.kid, "typ": "JWT"}).encode())
        secret = self.key.public_pem()
        mac = hmac.new(secret, f"{head}.{payload}".encode(), hashlib.sha256).digest()
        return f"{head}.{payload}.{_b64(mac)}"


def _handler(issuer: TestIssuer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            issuer.requests.append(self.path)
            published = issuer.published
            if published.failing is not None:
                self._send(published.failing, {"error": "unavailable"})
            elif self.path == f"{REALM}/.well-known/openid-configuration":
                self._send(
                    200,
                    {
                        "issuer": published.named_issuer or issuer.url,
                        "jwks_uri": published.jwks_uri or issuer.jwks_uri,
                        "token_endpoint": f"{issuer.url}/token",
                        "id_token_signing_alg_values_supported": ["RS256", "ES256"],
                    },
                )
            elif self.path == f"{REALM}/keys":
                keys = [jwk(k) for k in published.keys] + published.extra
                self._send(200, {"keys": keys})
            else:
                self._send(404, {"error": "not found"})

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, format: str, *args: Any) -> None:
            """Nothing per request on the test's output."""

    return Handler


@contextmanager
def oidc_issuer(
    state: Path, keys: Sequence[KeyPair], address: str = "127.0.0.1"
) -> Iterator[TestIssuer]:
    """An issuer on ``address`` (a free port) publishing ``keys``, its CA and serving
    certificate under ``state``; stopped on the way out."""
    ca_pem = webhook_serving(state, [address], "shoal-test-oidc-ca", dt.timedelta(hours=2))
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(state / "tls.crt", state / "tls.key")
    issuer = TestIssuer("", ca_pem.decode(), Published(list(keys)))
    server = ThreadingHTTPServer((address, 0), _handler(issuer))
    server.socket = context.wrap_socket(server.socket, server_side=True)
    issuer.url = f"https://{address}:{server.server_address[1]}{REALM}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield issuer
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
