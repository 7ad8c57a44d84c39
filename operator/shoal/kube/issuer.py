"""Reading the cluster's service-account token issuer and its signing keys."""

from __future__ import annotations

from shoal.kube.client import Kube
from shoal.render.keys import Issuer, issuer_from

DISCOVERY_PATH = "/.well-known/openid-configuration"
JWKS_PATH = "/openid/v1/jwks"


def fetch_issuer(kube: Kube) -> Issuer:
    """The issuer the API server signs ServiceAccount tokens as, and its public keys
    (the RBAC rule for these two paths is shoal.api.kinds.EXTRA_RULES)."""
    jwks = kube.get_path(JWKS_PATH, accept="application/jwk-set+json, application/json")
    return issuer_from(kube.get_path(DISCOVERY_PATH), jwks)
