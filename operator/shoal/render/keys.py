"""The keys the gateway verifies tokens with: the cluster's service-account signing keys,
and those of the OIDC issuers a pool trusts.

The API server publishes the public keys it signs ServiceAccount tokens with as a JSON
Web Key Set (``/openid/v1/jwks``, with its issuer in ``/.well-known/openid-configuration``);
an OIDC issuer publishes its own (its discovery document's ``jwks_uri``). HAProxy's
``jwt_verify`` takes a PEM public key file per key; these functions turn one into the
other and check what an issuer's documents say (pure).
"""

from __future__ import annotations

import base64
import hashlib
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
# RSA keys shorter than this are refused (NIST SP 800-131A: 2048 bits at least).
MIN_RSA_BITS = 2048
# The usable keys taken from one OIDC issuer's key set; an issuer publishes two or three.
MAX_ISSUER_KEYS = 16


@dataclass(frozen=True)
class PublicKey:
    kid: str
    alg: str
    pem: str
    # Before the key id in the file's name: keeps one issuer's keys apart from another's.
    prefix: str = ""

    @property
    def file_name(self) -> str:
        """A name for the key's file, safe as a ConfigMap key and a path."""
        safe = re.sub(r"[^A-Za-z0-9._-]", "_", self.kid)[:200] or "key"
        return f"{self.prefix}{safe}.pem"


@dataclass(frozen=True)
class Issuer:
    """Who signs the tokens the gateway accepts, and with which keys."""

    url: str
    keys: tuple[PublicKey, ...]


def _integer(text: str) -> int:
    return int.from_bytes(base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)), "big")


def public_key(jwk: dict[str, Any]) -> PublicKey | None:
    """One JWK as a PEM public key; None for a key the gateway cannot use (another key
    type, another use, an unknown curve or algorithm, an algorithm of another key type or
    curve, an RSA key under MIN_RSA_BITS)."""
    if jwk.get("use", "sig") != "sig" or not jwk.get("kid"):
        return None
    kty = jwk.get("kty")
    key: rsa.RSAPublicKey | ec.EllipticCurvePublicKey
    if kty == "RSA":
        key = rsa.RSAPublicNumbers(_integer(jwk["e"]), _integer(jwk["n"])).public_key()
        alg = jwk.get("alg") or _DEFAULT_ALG["RSA"]
        if alg not in ("RS256", "RS384", "RS512"):
            return None
    elif kty == "EC" and jwk.get("crv") in _CURVES:
        numbers = ec.EllipticCurvePublicNumbers(
            _integer(jwk["x"]), _integer(jwk["y"]), _CURVES[jwk["crv"]]
        )
        key = numbers.public_key()
        alg = jwk.get("alg") or _DEFAULT_ALG[jwk["crv"]]
        if alg != _DEFAULT_ALG[jwk["crv"]]:
            return None
    else:
        return None
    if alg not in ALGORITHMS:
        return None
    if isinstance(key, rsa.RSAPublicKey) and key.key_size < MIN_RSA_BITS:
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


# ----------------------------------------------------------------------------- OIDC issuers

DISCOVERY_SUFFIX = "/.well-known/openid-configuration"


class IssuerDocumentError(ValueError):
    """An OIDC issuer's discovery document or key set is not one the gateway can use."""


def discovery_url(issuer: str) -> str:
    """Where an issuer's discovery document is (OpenID Connect Discovery 1.0, section 4:
    the issuer with any trailing slash removed, then the well-known path)."""
    return issuer.rstrip("/") + DISCOVERY_SUFFIX


def jwks_uri_from(discovery: Any, issuer: str) -> str:
    """The key set's address from an issuer's discovery document, which must name exactly
    this issuer (section 4.3: otherwise the document is someone else's) and an https
    address."""
    if not isinstance(discovery, dict):
        raise IssuerDocumentError("the discovery document is not a JSON object")
    named = discovery.get("issuer")
    if named != issuer:
        raise IssuerDocumentError(f"the discovery document names issuer {named!r}, not {issuer!r}")
    uri = discovery.get("jwks_uri")
    if not isinstance(uri, str) or not uri.startswith("https://"):
        raise IssuerDocumentError(f"the discovery document's jwks_uri {uri!r} is not https")
    return uri


def issuer_file_prefix(issuer: str) -> str:
    """The file-name prefix of an OIDC issuer's keys: a digest of its URL, so that its
    keys never take the name of the cluster's or another issuer's key of the same id."""
    return f"oidc-{hashlib.sha256(issuer.encode()).hexdigest()[:12]}-"


@dataclass(frozen=True)
class IssuerKeySet:
    """The usable keys of one OIDC issuer's key set, and what was left out and why."""

    keys: tuple[PublicKey, ...]
    skipped: tuple[str, ...] = ()


def issuer_keys(issuer: str, jwks: Any) -> IssuerKeySet:
    """An OIDC issuer's key set as the gateway's key files: the signing keys HAProxy 2.6
    verifies (RSA of 2048 bits or more, EC P-256/384/521, with a key id), each once by
    key id and file name, at most MAX_ISSUER_KEYS, in the set's order."""
    if not isinstance(jwks, dict) or not isinstance(jwks.get("keys"), list):
        raise IssuerDocumentError("the key set is not a JSON object with a list of keys")
    prefix = issuer_file_prefix(issuer)
    keys: list[PublicKey] = []
    skipped: list[str] = []
    for jwk in jwks["keys"]:
        kid = jwk.get("kid") if isinstance(jwk, dict) else None
        name = str(kid) if kid else "(no kid)"
        try:
            key = public_key(jwk) if isinstance(jwk, dict) and isinstance(kid, str) else None
        except (KeyError, TypeError, ValueError):
            key = None
        if key is None:
            skipped.append(f"{name}: not a signing key HAProxy verifies")
            continue
        key = PublicKey(key.kid, key.alg, key.pem, prefix)
        if any(k.kid == key.kid or k.file_name == key.file_name for k in keys):
            skipped.append(f"{name}: a second key of that id")
        elif len(keys) >= MAX_ISSUER_KEYS:
            skipped.append(f"{name}: more than {MAX_ISSUER_KEYS} keys")
        else:
            keys.append(key)
    return IssuerKeySet(tuple(keys), tuple(skipped))
