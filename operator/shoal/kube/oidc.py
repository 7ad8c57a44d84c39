"""The signing keys of the OIDC issuers pools trust: fetched by the operator (the
gateways make no outbound call), kept while a fetch fails.

An issuer's keys come from its JSON Web Key Set: ``jwksURI`` when the pool names one,
otherwise the ``jwks_uri`` of its discovery document
(``<issuer>/.well-known/openid-configuration``, which must name the same issuer). Both
are fetched over HTTPS only, verified with the pool's ``certificateAuthority`` when it
gives one (instead of the system CAs), without following redirects, through the
``HTTPS_PROXY`` of the operator's environment when one is set, each answer bounded in
time and size. The pure parts (what a discovery document and a key set must say) are in
shoal.render.keys.

:class:`Keyring` keeps the last key set fetched from each issuer: a pass fetches an
issuer it has never fetched, and again after RETRY_SECONDS while the last fetch failed;
the periodic resync fetches every issuer again, so a key an issuer adds reaches the
gateways within one resync, and a key it removes leaves them as soon. A fetch that fails
keeps the keys fetched before and says why.
"""

from __future__ import annotations

import json
import logging
import ssl
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import httpx

from shoal.api.gateway import OidcIssuer
from shoal.render.keys import (
    IssuerDocumentError,
    IssuerKeySet,
    PublicKey,
    discovery_url,
    issuer_keys,
    jwks_uri_from,
)

log = logging.getLogger(__name__)
FETCH_TIMEOUT_SECONDS = 5.0
# A discovery document or key set is a few kilobytes; more is not one.
MAX_DOCUMENT_BYTES = 1 << 20
# A pass fetches an issuer whose last fetch failed again after this long.
RETRY_SECONDS = 15.0


class FetchError(Exception):
    """An issuer's document could not be fetched, or is not JSON."""


@dataclass(frozen=True)
class IssuerSource:
    """Where one issuer's keys come from, as a pool says: pools that say the same share
    one fetch."""

    issuer: str
    jwks_uri: str | None = None
    certificate_authority: str | None = None

    @classmethod
    def of(cls, spec: OidcIssuer) -> IssuerSource:
        return cls(spec.issuer, spec.jwks_uri, spec.certificate_authority)


@dataclass(frozen=True)
class IssuerKeys:
    """One issuer's keys as the gateways verify with them, and how the last fetch went."""

    keys: tuple[PublicKey, ...] = ()
    jwks_uri: str | None = None  # where they were fetched from
    error: str | None = None  # why the last fetch failed (the keys are those before it)
    skipped: tuple[str, ...] = ()  # keys of the set the gateway cannot use, and why
    fetched: bool = False  # whether any fetch has succeeded
    # Whether keys were looked for in the gateway's ConfigMap (Keyring.remember).
    restored: bool = False


def _tls(source: IssuerSource) -> ssl.SSLContext:
    if source.certificate_authority is None:
        return ssl.create_default_context()
    try:
        return ssl.create_default_context(cadata=source.certificate_authority)
    except (ssl.SSLError, ValueError) as exc:
        raise FetchError(f"certificateAuthority holds no usable PEM certificate ({exc})") from None


def _json(http: httpx.Client, url: str) -> Any:
    try:
        with http.stream("GET", url) as response:
            if response.status_code != 200:
                raise FetchError(f"GET {url}: HTTP {response.status_code}")
            body = bytearray()
            for chunk in response.iter_bytes():
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise FetchError(f"GET {url}: more than {MAX_DOCUMENT_BYTES} bytes")
    except httpx.HTTPError as exc:
        raise FetchError(f"GET {url}: {type(exc).__name__}: {exc}") from None
    try:
        return json.loads(body)
    except ValueError:
        raise FetchError(f"GET {url}: not JSON") from None


def fetch_keys(source: IssuerSource) -> tuple[str, IssuerKeySet]:
    """The issuer's key set, fetched now: (where from, the usable keys)."""
    with httpx.Client(
        verify=_tls(source),
        timeout=FETCH_TIMEOUT_SECONDS,
        follow_redirects=False,
        headers={"Accept": "application/json"},
    ) as http:
        uri = source.jwks_uri
        if uri is None:
            uri = jwks_uri_from(_json(http, discovery_url(source.issuer)), source.issuer)
        return uri, issuer_keys(source.issuer, _json(http, uri))


class Keyring:
    """The last keys fetched from each issuer the pools trust (thread-safe)."""

    def __init__(
        self,
        fetch: Callable[[IssuerSource], tuple[str, IssuerKeySet]] = fetch_keys,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._fetch = fetch
        self._clock = clock
        self._lock = threading.Lock()
        self._known: dict[IssuerSource, IssuerKeys] = {}
        self._tried: dict[IssuerSource, float] = {}

    def keys(self, source: IssuerSource) -> IssuerKeys:
        """The issuer's keys; fetched now if they never were, or if the last fetch
        failed RETRY_SECONDS ago or more."""
        with self._lock:
            known = self._known.get(source)
            tried = self._tried.get(source, 0.0)
        if known is None or (known.error and self._clock() - tried >= RETRY_SECONDS):
            return self.refresh(source)
        return known

    def refresh(self, source: IssuerSource) -> IssuerKeys:
        """Fetch the issuer's keys now; on failure keep those fetched before."""
        with self._lock:
            before = self._known.get(source, IssuerKeys())
        try:
            uri, found = self._fetch(source)
        except (FetchError, IssuerDocumentError) as exc:
            log.warning(
                "fetching the signing keys of OIDC issuer %s failed: %s", source.issuer, exc
            )
            result = IssuerKeys(
                before.keys,
                before.jwks_uri,
                str(exc),
                before.skipped,
                before.fetched,
                before.restored,
            )
        else:
            problem = None
            if not found.keys:
                problem = "the key set holds no key the gateway can verify with" + (
                    f" ({'; '.join(found.skipped)})" if found.skipped else ""
                )
            result = IssuerKeys(found.keys, uri, problem, found.skipped, True)
        with self._lock:
            self._known[source] = result
            self._tried[source] = self._clock()
        return result

    def refresh_all(self, sources: Iterable[IssuerSource]) -> None:
        """Fetch every one of ``sources`` again (the resync), and forget the others."""
        wanted = set(sources)
        with self._lock:
            for gone in set(self._known) - wanted:
                del self._known[gone]
                self._tried.pop(gone, None)
        for source in sorted(wanted, key=lambda s: (s.issuer, s.jwks_uri or "")):
            self.refresh(source)

    def remember(self, source: IssuerSource, keys: tuple[PublicKey, ...], error: str) -> None:
        """Keys known from elsewhere (a gateway's ConfigMap, after a restart) for an issuer
        this keyring has no good fetch of; looked for once."""
        with self._lock:
            known = self._known.get(source, IssuerKeys())
            if not known.fetched:
                self._known[source] = IssuerKeys(
                    keys or known.keys,
                    known.jwks_uri,
                    error or known.error,
                    known.skipped,
                    False,
                    True,
                )
