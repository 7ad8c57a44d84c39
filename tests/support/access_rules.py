"""The rules of access.modelDownload, the access lists and runtime.responseCacheSize:
objects the API server and the models must refuse (naming the field), and objects both
must accept.

Kept apart from tests/support/malformed.py's corpus: these rules use the API server's
CIDR and quantity CEL libraries (Kubernetes 1.31 or later for CIDRs).
"""

from __future__ import annotations

from typing import Any

from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from tests.support.malformed import MATCH, Case
from tests.support.resources import example

TP, IM = "TenantPool", "InferenceModel"
DOWNLOAD = "spec.access.modelDownload"
PROXY = {
    "url": "http://egress-proxy.egress.svc.cluster.local:3128",
    "namespace": "egress",
    "podSelector": {"matchLabels": {"app": "egress-proxy"}},
    "port": 3128,
}
CANONICAL = "canonical form"

REFUSED: tuple[Case, ...] = (
    Case(
        "tp-proxy-mode-without-proxy",
        TP,
        "shared",
        ((f"{DOWNLOAD}.mode", "Proxy"),),
        (f"{DOWNLOAD}.proxy", "set proxy when, and only when, mode is Proxy"),
    ),
    Case(
        "tp-proxy-in-direct-mode",
        TP,
        "shared",
        ((f"{DOWNLOAD}.proxy", PROXY),),
        (f"{DOWNLOAD}.proxy", "set proxy when, and only when, mode is Proxy"),
    ),
    Case(
        "tp-mode-unknown",
        TP,
        "shared",
        ((f"{DOWNLOAD}.mode", "Open"),),
        (f"{DOWNLOAD}.mode", "Unsupported value"),
    ),
    Case(
        "tp-none-with-extra-destinations",
        TP,
        "shared",
        (
            (f"{DOWNLOAD}.mode", "None"),
            (f"{DOWNLOAD}.extraDestinations", [{"cidr": "169.254.170.23/32", "port": 80}]),
        ),
        (f"{DOWNLOAD}.extraDestinations", "mode None allows no download egress"),
    ),
    Case(
        "tp-cluster-cidr-host-bits",
        TP,
        "shared",
        ((f"{DOWNLOAD}.clusterCIDRs", ["10.0.0.0/8", "10.96.0.1/12"]),),
        (f"{DOWNLOAD}.clusterCIDRs", CANONICAL),
    ),
    Case(
        "tp-cluster-cidr-ipv6-not-compressed",
        TP,
        "shared",
        ((f"{DOWNLOAD}.clusterCIDRs", ["fd00:0::/8"]),),
        (f"{DOWNLOAD}.clusterCIDRs", CANONICAL),
    ),
    Case(
        "tp-cluster-cidr-prefix-too-long",
        TP,
        "shared",
        ((f"{DOWNLOAD}.clusterCIDRs", ["10.0.0.0/33"]),),
        (f"{DOWNLOAD}.clusterCIDRs", CANONICAL),
    ),
    Case(
        "tp-cluster-cidr-ipv4-mapped",
        TP,
        "shared",
        ((f"{DOWNLOAD}.clusterCIDRs", ["::ffff:10.0.0.0/104"]),),
        (f"{DOWNLOAD}.clusterCIDRs[0]", MATCH),
    ),
    Case(
        "tp-extra-destination-host-bits",
        TP,
        "shared",
        ((f"{DOWNLOAD}.extraDestinations", [{"cidr": "169.254.170.23/24", "port": 80}]),),
        (f"{DOWNLOAD}.extraDestinations[0].cidr", CANONICAL),
    ),
    Case(
        "tp-extra-destination-without-port",
        TP,
        "shared",
        ((f"{DOWNLOAD}.extraDestinations", [{"cidr": "169.254.170.23/32"}]),),
        (f"{DOWNLOAD}.extraDestinations[0].port", "Required value"),
    ),
    Case(
        "tp-proxy-url-with-credentials",
        TP,
        "shared",
        (
            (f"{DOWNLOAD}.mode", "Proxy"),
            (f"{DOWNLOAD}.proxy", {**PROXY, "url": "http://user:secret@proxy:3128"}),
        ),
        (f"{DOWNLOAD}.proxy.url", MATCH),
    ),
    Case(
        "tp-tenant-is-a-gateway",
        TP,
        "critical",
        (("spec.access.gatewayNamespaces", ["gateway", "team-search"]),),
        ("spec.access", "a tenant namespace may not also be a gateway or monitoring namespace"),
    ),
    Case(
        "tp-tenant-is-monitoring",
        TP,
        "critical",
        (("spec.access.monitoringNamespaces", ["team-search"]),),
        ("spec.access", "a tenant namespace may not also be a gateway or monitoring namespace"),
    ),
    Case(
        "im-cache-size-below-the-minimum",
        IM,
        "labs-embedder",
        (("spec.runtime.responseCacheSize", "512Ki"),),
        ("spec.runtime.responseCacheSize", "from 1Mi to 1Ti"),
    ),
    Case(
        "im-cache-size-fraction",
        IM,
        "labs-embedder",
        (("spec.runtime.responseCacheSize", "1.5Gi"),),
        ("spec.runtime.responseCacheSize", MATCH),
    ),
    Case(
        "im-cache-size-integer",
        IM,
        "labs-embedder",
        (("spec.runtime.responseCacheSize", 268435456),),
        ("spec.runtime.responseCacheSize", "string"),
    ),
    Case(
        "im-cache-with-memory-of-a-huge-exponent",
        IM,
        "labs-embedder",
        (("spec.runtime.memory", "1e-99999999"), ("spec.runtime.responseCacheSize", "1Mi")),
        # The quantity pattern allows at most three exponent digits.
        ("spec.runtime.memory", "a_positive_quantity"),
    ),
)


def accepted_pool(download: dict[str, Any]) -> dict[str, Any]:
    doc = example("TenantPool", "shared")
    doc["spec"]["access"]["modelDownload"] = download
    return doc


def accepted_model(runtime: dict[str, Any]) -> dict[str, Any]:
    doc = example("InferenceModel", "labs-embedder")
    doc["spec"]["runtime"] = runtime
    # A pool that does not exist: the admission policy has nothing to judge (another
    # test may have applied the examples' pools, which do not admit this namespace).
    doc["spec"]["pool"] = "no-such-pool"
    return doc


ACCEPTED: dict[str, dict[str, Any]] = {
    "tp-proxy": accepted_pool(
        {
            "mode": "Proxy",
            "proxy": {**PROXY, "noProxy": [".corp.example", "10.1.0.0/16", "*.svc"]},
            "extraDestinations": [{"cidr": "169.254.170.23/32", "port": 80}],
        }
    ),
    "tp-direct-with-ranges": accepted_pool(
        {
            "clusterCIDRs": [
                "10.0.0.0/8",
                "0.0.0.0/0",
                "::/0",
                "fd00:ec2::254/128",
                "2001:db8::/32",
            ],
            "extraDestinations": [
                {"cidr": "169.254.169.254/32", "port": 80},
                {"cidr": "169.254.169.252/32", "port": 988},
                {"cidr": "169.254.20.10/32", "port": 53, "protocol": "UDP"},
            ],
        }
    ),
    "tp-none": accepted_pool({"mode": "None"}),
    "im-cache-as-large-as-memory": accepted_model({"memory": "16Gi", "responseCacheSize": "16Gi"}),
    "im-cache-memory-in-bytes": accepted_model({"memory": 17179869184, "responseCacheSize": "8Gi"}),
    "im-cache-memory-with-exponent": accepted_model({"memory": "16e9", "responseCacheSize": "8G"}),
    "im-cache-decimal-suffix": accepted_model({"memory": "16Gi", "responseCacheSize": "500M"}),
}
MODELS: dict[str, Any] = {TP: TenantPool, IM: InferenceModel}
