"""A TenantPool's gateway: the edge every tenant's requests come through.

The gateway proves who is calling (a ServiceAccount token for the gateway's audience, or
a token of an OIDC issuer the pool trusts), enforces each tenant's limits, orders
requests by priority and routes them to the least loaded ready replica of the tenant's
model. These models say how big it is and what each
tenant may do; docs/gateway.md says how it works.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from shoal.api.byte_size import byte_size_bounds, byte_size_format
from shoal.api.common import (
    Check,
    DnsLabel,
    DurationFormat,
    ResourceQuantity,
    Rule,
    SpecModel,
    TextFormat,
    unique_by,
)
from shoal.api.windows import Window

# A request body: 64Mi by default; at most 2Gi, the longest gRPC message.
REQUEST_BODY_MIN, REQUEST_BODY_MAX, DEFAULT_REQUEST_BODY = "1Ki", "2Gi", "64Mi"
RequestBodySize = Annotated[
    str,
    byte_size_format(DEFAULT_REQUEST_BODY),
    byte_size_bounds(REQUEST_BODY_MIN, REQUEST_BODY_MAX),
]
# How long a request over its tenant's concurrency may wait for a slot.
QueueTimeout = Annotated[str, DurationFormat("0s", "60s", example="1s")]
MAX_RATE = 1_000_000
MAX_CONCURRENCY = 100_000


class GatewayLimits(SpecModel):
    """What one tenant may send through the gateway: all its replicas together."""

    requests_per_second: int | None = Field(
        default=None,
        ge=1,
        le=MAX_RATE,
        description="Requests per second the tenant may send; more get 429 with "
        "Retry-After. Unset: no rate limit.",
    )
    burst: int = Field(
        default=0,
        ge=0,
        le=MAX_RATE,
        description="Requests the tenant may send beyond its rate within one second.",
    )
    concurrency: int | None = Field(
        default=None,
        ge=1,
        le=MAX_CONCURRENCY,
        description="Requests of the tenant in flight at once; more wait up to "
        "queueTimeout for a slot, then get 429. Unset: no cap.",
    )
    queue_timeout: QueueTimeout = Field(
        default="1s",
        description="How long a request over the concurrency cap waits for a slot.",
    )


class TenantLimits(SpecModel):
    """One tenant's own limits; a field left out keeps the pool's."""

    namespace: DnsLabel = Field(description="The tenant namespace.")
    requests_per_second: int | None = Field(
        default=None, ge=1, le=MAX_RATE, description="Requests per second."
    )
    burst: int | None = Field(
        default=None, ge=0, le=MAX_RATE, description="Requests beyond the rate in one second."
    )
    concurrency: int | None = Field(
        default=None, ge=1, le=MAX_CONCURRENCY, description="Requests in flight at once."
    )
    queue_timeout: QueueTimeout | None = Field(
        default=None, description="How long a request waits for a concurrency slot."
    )

    rules = (
        Rule(
            cel="has(self.requestsPerSecond) || has(self.burst) || has(self.concurrency) "
            "|| has(self.queueTimeout)",
            check=lambda t: any(
                v is not None
                for v in (t.requests_per_second, t.burst, t.concurrency, t.queue_timeout)
            ),
            message="set at least one limit for the tenant",
        ),
    )


class LimitWindow(Window):
    """A time window in which the pool's default limits are others (e.g. a night-time
    rate for batch jobs, or a tighter one at peak). Tenants' own limits still win."""

    limits: GatewayLimits = Field(description="The default limits while the window is open.")


# An issuer's URL as OpenID Connect names one: https, a host (a name or an IPv4 address)
# and an optional port and path, without credentials, query or fragment.
_HOST = r"[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?(\.[A-Za-z0-9]([-A-Za-z0-9]*[A-Za-z0-9])?)*"
_PORT = (
    r"(:([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5]))?"
)
_PATH = r"(/[-A-Za-z0-9._~!$&()*+,;=:@%/]*)?"
ISSUER_URL_PATTERN = rf"^https://{_HOST}{_PORT}{_PATH}$"
JWKS_URI_PATTERN = rf"^https://{_HOST}{_PORT}{_PATH}(\?[-A-Za-z0-9._~!$&()*+,;=:@%/?]*)?$"
IssuerUrl = Annotated[
    str,
    TextFormat(
        ISSUER_URL_PATTERN,
        "an https:// URL of a host, an optional port and path, without credentials, query "
        "or fragment, exactly as the issuer's tokens name it in iss",
        max_length=512,
        min_length=9,
        example="https://login.example.com/realms/platform",
    ),
]
JwksUri = Annotated[
    str,
    TextFormat(
        JWKS_URI_PATTERN,
        "an https:// URL of a host, an optional port, path and query, without credentials "
        "or fragment",
        max_length=1024,
        min_length=9,
        example="https://login.example.com/realms/platform/protocol/openid-connect/certs",
    ),
]
# Printable ASCII without spaces: what OIDC client ids and API identifiers are.
Audience = Annotated[
    str,
    TextFormat(
        r"^[!-~]+$",
        "an audience of printable ASCII characters without spaces",
        max_length=256,
        min_length=1,
        example="shoal-inference",
    ),
]
# A claim the gateway reads with HAProxy's JSON path: a name, or up to four names joined
# by "." for a claim inside objects; names of letters, digits, "_" and "-".
TENANT_CLAIM_PATTERN = r"^[A-Za-z0-9_-]{1,64}(\.[A-Za-z0-9_-]{1,64}){0,3}$"
# Claims that say something else than who the caller is.
REGISTERED_CLAIMS = ("iss", "aud", "exp", "nbf", "iat", "jti")
TenantClaim = Annotated[
    str,
    TextFormat(
        TENANT_CLAIM_PATTERN,
        "a claim name of letters, digits, '_' and '-' (up to 64), or up to four such names "
        "joined by '.' for a claim inside objects",
        max_length=259,
        min_length=1,
        example="shoal_namespace",
    ),
    Check(
        cel="!(self in [" + ", ".join(f"'{c}'" for c in REGISTERED_CLAIMS) + "])",
        check=lambda claim: claim not in REGISTERED_CLAIMS,
        message="must name a claim that says who the caller is, not "
        + ", ".join(REGISTERED_CLAIMS),
    ),
]
PEM_CERTIFICATE = "-----BEGIN CERTIFICATE-----"
CertificateAuthority = Annotated[
    str,
    Field(max_length=65536),
    Check(
        cel=f"self.contains('{PEM_CERTIFICATE}')",
        check=lambda text: PEM_CERTIFICATE in text,
        message=f"must be one or more PEM certificates ({PEM_CERTIFICATE} ...)",
    ),
]
MAX_OIDC_ISSUERS = 4


class OidcIssuer(SpecModel):
    """An OpenID Connect issuer whose tokens the gateway accepts beside the cluster's
    ServiceAccount tokens: its callers need no Kubernetes identity (a caller outside the
    cluster, through an ingress). The operator fetches the issuer's signing keys (JWKS)
    and the gateway verifies its tokens with them."""

    issuer: IssuerUrl = Field(
        description="The issuer's URL, exactly as its tokens name it in iss, e.g. "
        "https://login.example.com/realms/platform. Its discovery document "
        "(<issuer>/.well-known/openid-configuration) must name the same issuer.",
    )
    jwks_uri: JwksUri | None = Field(
        default=None,
        alias="jwksURI",
        description="Where the issuer publishes its signing keys (a JSON Web Key Set). "
        "Unset: the jwks_uri of its discovery document. The operator fetches it at every "
        "resync; the gateway itself makes no outbound call.",
    )
    certificate_authority: CertificateAuthority | None = Field(
        default=None,
        description="PEM certificates of the CA that signs the issuer's (and jwksURI's) "
        "HTTPS certificate, trusted instead of the operator's system CAs: for a private "
        "issuer. Unset: the system CAs.",
    )
    audience: Audience = Field(
        description="The aud the issuer's tokens must carry for this pool's gateway (a "
        "string, or an entry of a list): the client id or API identifier the issuer gives "
        "this gateway. Tokens it issues for other audiences are refused.",
    )
    tenant_claim: TenantClaim = Field(
        description="The claim whose value, a string, is the caller's tenant namespace, "
        "e.g. shoal_namespace, or shoal.namespace for a claim inside an object. It must "
        "name a namespace the pool admits (others get 403); a token without it, or with "
        "a number, list or object there, gets 401. Use a claim the issuer sets and "
        "callers cannot choose.",
    )


class Gateway(SpecModel):
    """The pool's gateway: HAProxy, configured by Shoal, in front of the pool's models."""

    enabled: bool = Field(
        default=True,
        description="Whether the pool has a gateway. Without one, the pool's models are "
        "reached only from access.gatewayNamespaces (and their own namespace if allowed).",
    )
    replicas: int = Field(
        default=2, ge=1, le=32, description="Gateway replicas (HAProxy processes)."
    )
    cpu: ResourceQuantity = Field(default="500m", description="CPU requested per replica.")
    memory: ResourceQuantity = Field(
        default="256Mi", description="Memory requested (and the limit) per replica."
    )
    max_request_body: RequestBodySize = Field(
        default=DEFAULT_REQUEST_BODY,
        description=f"The largest request body the gateway passes to a model, e.g. "
        f"{DEFAULT_REQUEST_BODY}, from {REQUEST_BODY_MIN} to {REQUEST_BODY_MAX}. An HTTP "
        "request that declares a longer body (Content-Length) gets 413 before its body "
        "is read; an HTTP request with a body but no Content-Length (chunked) gets 411. "
        "A gRPC message longer than this (its length prefix) gets 413, and so does a "
        "compressed one, whose size once expanded cannot be known before the model "
        "expands it. Of a gRPC stream, its first message is checked.",
    )
    limits: GatewayLimits = Field(
        default_factory=GatewayLimits, description="Every tenant's limits, unless its own say."
    )
    tenants: Annotated[list[TenantLimits], unique_by("namespace")] = Field(
        default_factory=list,
        max_length=256,
        description="Tenants with limits of their own.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["namespace"],
        },
    )
    windows: Annotated[list[LimitWindow], unique_by("name")] = Field(
        default_factory=list,
        max_length=16,
        description="Time windows with other default limits; the first open one applies.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    oidc: Annotated[list[OidcIssuer], unique_by("issuer")] = Field(
        default_factory=list,
        max_length=MAX_OIDC_ISSUERS,
        description="OpenID Connect issuers whose tokens the gateway accepts beside "
        "ServiceAccount tokens, each naming the tenant in a claim. Empty: ServiceAccount "
        "tokens only.",
        json_schema_extra={
            "x-kubernetes-list-type": "map",
            "x-kubernetes-list-map-keys": ["issuer"],
        },
    )
