"""The cluster's service-account signing keys, as the gateway verifies tokens with them.

The API server publishes the public keys it signs ServiceAccount tokens with as a JSON
Web Key Set (``/openid/v1/jwks``, with its issuer in ``/.well-known/openid-configuration``).
HAProxy's ``jwt_verify`` takes a PEM public key file per key; these functions turn one
into the other (pure).
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass
from typing import Any

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from shoal.render.gateway_files import ALGORITHMS

_CURVES: dict[str, ec.EllipticCurve] = {
    "P-256": ec.SECP256R1(),
    "P-384": ec.SECP384R1(),
    "P-521": ec.SECP521R1(),
}
_DEFAULT_ALG = {"RSA": "RS256", "P-256": "ES256", "P-384": "ES384", "P-521": "ES512"}


@dataclass(frozen=True)
class PublicKey:
    kid: str
    alg: str
    pem: str

    @property
    def file_name(self) -> str:
        """A name for the key's file, safe as a ConfigMap key and a path."""
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", self.kid)[:200] or "key"
        return f"{safe}.pem"


@dataclass(frozen=True)
class Issuer:
    """Who signs the tokens the gateway accepts, and with which keys."""

    url: str
    keys: tuple[PublicKey, ...]


def _integer(text: str) -> int:
    return int.from_bytes(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), "big")


def public_key(jwk: dict[str, Any]) -> PublicKey | None:
    """One JWK as a PEM public key; None for a key the gateway cannot use (another key
    type, another use, an unknown curve or algorithm)."""
    if jwk.get("use", "sig") != "sig" or not jwk.get("kid"):
        return None
    kty = jwk.get("kty")
    key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey
    if kty == "RSA":
        key = rsa.RSAPublicNumbers(_integer(jwk["e"]), _integer(jwk["n"])).public_key()
        alg = jwk.get("alg") or _DEFAULT_ALG["RSA"]
    elif kty == "EC" and jwk.get("crv") in _CURVES:
        numbers = ec.EllipticCurvePublicNumbers(
            _integer(jwk["x"]), _integer(jwk["y"]), _CURVES[jwk["crv"]]
        )
        key = numbers.public_key()
        alg = jwk.get("alg") or _DEFAULT_ALG[jwk["crv"]]
    else:
        return None
    if alg not in ALGORITHMS:
        return None
    pem = key.public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    ).decode()
    return PublicKey(str(jwk["kid"]), alg, pem)


def issuer_from(discovery: dict[str, Any], jwks: dict[str, Any]) -> Issuer:
    """The issuer and its usable keys, from the discovery document and the key set."""
    keys = [public_key(k) for k in jwks.get("keys") or []]
    usable = tuple(sorted((k for k in keys if k is not None), key=lambda k: k.kid))
    return Issuer(str(discovery.get("issuer") or ""), usable)
