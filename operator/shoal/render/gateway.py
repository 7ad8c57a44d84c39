"""A TenantPool's gateway as Kubernetes objects (pure functions).

In the gateway namespace (one for all pools, ``shoal-gateways`` by default), each pool
with a gateway gets ``gw-<pool>``: a ConfigMap holding HAProxy's configuration (rendered
by shoal.render.haproxy_config) and the token signing keys (the cluster's, and those of
the OIDC issuers the pool trusts), a Deployment of HAProxy with Shoal's agent beside it
(it reloads HAProxy, without dropping a request, whenever the ConfigMap changes), a
Service, a PodDisruptionBudget and a NetworkPolicy that lets in only the pool's tenants,
its monitoring and the gateway's own replicas.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shoal.api.common import Toleration
from shoal.api.constants import GATEWAY_LABEL, GROUP, MANAGED_BY, MANAGED_BY_LABEL, POOL_LABEL
from shoal.api.tenantpool import TenantPool
from shoal.render.gateway_config import GRPC_PORT, HTTP_PORT, METRICS_PORT, PEERS_PORT
from shoal.render.gateway_files import (
    ALGORITHMS,
    CONFIG_FILE,
    LIVE_DIR,
    RUNTIME_DIR,
    RuntimePaths,
    command,
)
from shoal.render.keys import PublicKey, issuer_file_prefix
from shoal.render.names import owner_references
from shoal.render.security import container_security_context
from shoal.render.tenancy import namespace_peer

DEFAULT_GATEWAY_NAMESPACE = "shoal-gateways"
# Debian 12's HAProxy is 2.6.12, the version the tests run; the official image of it.
DEFAULT_GATEWAY_IMAGE = "docker.io/library/haproxy:2.6.12"
GATEWAY_SERVICE_ACCOUNT = "shoal-gateway"
# The official HAProxy image runs as its haproxy user.
HAPROXY_UID = 99
# Where the agent sidecar answers its liveness probe.
AGENT_HEALTH_PORT = 8406
# The gateway answers this itself, without a token: whether it is up (probes).
HEALTH_PATH = "/v2/health/ready"
_POD_NAME = {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}
# On the gateway's ConfigMap: which of its key files are which OIDC issuer's keys, as
# {issuer: [[kid, alg, file], ...]}, so that an operator that restarts while an issuer
# is unreachable keeps verifying with the keys the gateway has.
OIDC_KEYS_ANNOTATION = f"{GROUP}/oidc-keys"


@dataclass(frozen=True)
class GatewaySite:
    """Where and with what the cluster runs gateways (the operator's settings)."""

    namespace: str = DEFAULT_GATEWAY_NAMESPACE
    image: str = DEFAULT_GATEWAY_IMAGE
    # The image of the agent: the operator's own.
    agent_image: str = "ghcr.io/shoal-dev/shoal-operator:0.1.0"
    service_account: str = GATEWAY_SERVICE_ACCOUNT
    # Where the gateways' pods run (ingress or CPU nodes, say): node labels to match,
    # as (key, value) pairs, and the taints they tolerate, as the API stores them.
    node_selector: tuple[tuple[str, str], ...] = ()
    tolerations: tuple[Toleration, ...] = ()

    def placement(self) -> dict[str, Any]:
        """The pod spec fields that place a gateway pod; none when the site sets none."""
        placement: dict[str, Any] = {}
        if self.node_selector:
            placement["nodeSelector"] = dict(self.node_selector)
        if self.tolerations:
            placement["tolerations"] = [t.to_wire() for t in self.tolerations]
        return placement


def gateway_name(pool: str) -> str:
    return f"gw-{pool}"


def audience(pool: str) -> str:
    """The audience a caller's ServiceAccount token must carry for the pool's gateway:
    a token for one pool's gateway is no good at another's."""
    return f"{GROUP}/gateway/{pool}"


def gateway_host(pool: str, site: GatewaySite) -> str:
    return f"{gateway_name(pool)}.{site.namespace}.svc"


def gateway_labels(pool: str) -> dict[str, str]:
    return {
        "app.kubernetes.io/name": "haproxy",
        "app.kubernetes.io/instance": gateway_name(pool),
        "app.kubernetes.io/component": "gateway",
        MANAGED_BY_LABEL: MANAGED_BY,
        POOL_LABEL: pool,
        GATEWAY_LABEL: pool,
    }


def _meta(pool: TenantPool, site: GatewaySite) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "name": gateway_name(pool.metadata.name),
        "namespace": site.namespace,
        "labels": gateway_labels(pool.metadata.name),
    }
    owners = owner_references("TenantPool", pool.metadata.name, pool.metadata.uid)
    if owners:
        meta["ownerReferences"] = owners
    return meta


def config_map(
    pool: TenantPool,
    site: GatewaySite,
    config: str,
    keys: tuple[PublicKey, ...],
    oidc_keys: Sequence[tuple[str, Sequence[PublicKey]]] = (),
) -> dict[str, Any]:
    """HAProxy's configuration and every key file it names: the cluster's keys, and
    ``oidc_keys`` (issuer, keys) of the OIDC issuers the pool trusts."""
    data = {CONFIG_FILE: config, **{key.file_name: key.pem for key in keys}}
    meta = _meta(pool, site)
    if oidc_keys:
        index = {}
        for issuer, issued in sorted(oidc_keys, key=lambda pair: pair[0]):
            data.update({key.file_name: key.pem for key in issued})
            index[issuer] = [[k.kid, k.alg, k.file_name] for k in issued]
        meta["annotations"] = {
            OIDC_KEYS_ANNOTATION: json.dumps(index, sort_keys=True, separators=(",", ":"))
        }
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta, "data": data}


def oidc_keys_in(config_map_body: Mapping[str, Any]) -> dict[str, tuple[PublicKey, ...]]:
    """The OIDC issuers' keys a gateway's ConfigMap holds (what :func:`config_map`
    wrote); whatever does not read as such is left out."""
    annotations = (config_map_body.get("metadata") or {}).get("annotations") or {}
    data = config_map_body.get("data") or {}
    try:
        index = json.loads(annotations.get(OIDC_KEYS_ANNOTATION) or "{}")
    except ValueError:
        return {}
    out: dict[str, tuple[PublicKey, ...]] = {}
    if not isinstance(index, dict):
        return out
    for issuer, entries in index.items():
        keys = []
        for entry in entries if isinstance(entries, list) else []:
            if not (isinstance(entry, list) and len(entry) == 3):
                continue
            kid, alg, file_name = (str(part) for part in entry)
            pem = data.get(file_name)
            if isinstance(pem, str):
                key = PublicKey(kid, alg, pem, issuer_file_prefix(str(issuer)))
                if key.file_name == file_name and alg in ALGORITHMS:
                    keys.append(key)
        out[str(issuer)] = tuple(keys)
    return out


def _agent(pool: TenantPool, site: GatewaySite, *, once: bool) -> dict[str, Any]:
    args = [
        "gateway-agent",
        f"--namespace={site.namespace}",
        f"--configmap={gateway_name(pool.metadata.name)}",
        f"--dir={LIVE_DIR}",
        f"--runtime-dir={RUNTIME_DIR}",
        "--local-peer=$(POD_NAME)",
    ]
    # The sidecar's liveness: its watch loop still going round (shoal.gateway.agent).
    watching = {
        "args": [*args, f"--health-port={AGENT_HEALTH_PORT}"],
        "ports": [{"name": "agent-health", "containerPort": AGENT_HEALTH_PORT, "protocol": "TCP"}],
        "livenessProbe": {
            "httpGet": {"path": "/healthz", "port": "agent-health"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
    }
    return {
        "name": "write-config" if once else "agent",
        "image": site.agent_image,
        "imagePullPolicy": "IfNotPresent",
        **({"args": [*args, "--once"]} if once else watching),
        "env": [_POD_NAME],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": container_security_context(),
        "volumeMounts": [
            {"name": "live", "mountPath": LIVE_DIR},
            {"name": "run", "mountPath": RUNTIME_DIR},
        ],
    }


def deployment(pool: TenantPool, site: GatewaySite) -> dict[str, Any]:
    gateway = pool.spec.gateway
    labels = gateway_labels(pool.metadata.name)
    haproxy = {
        "name": "haproxy",
        "image": site.image,
        "imagePullPolicy": "IfNotPresent",
        # Master-worker: a reload starts new workers on the new configuration while the
        # old ones finish their requests. -L names this replica among the peers.
        "command": command(
            Path(LIVE_DIR) / CONFIG_FILE, RuntimePaths(RUNTIME_DIR), "$(POD_NAME)", "haproxy"
        ),
        "env": [_POD_NAME],
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
            {"name": "peers", "containerPort": PEERS_PORT, "protocol": "TCP"},
        ],
        "resources": {
            "requests": {"cpu": gateway.cpu, "memory": gateway.memory},
            "limits": {"memory": gateway.memory},
        },
        "readinessProbe": {
            "httpGet": {"path": HEALTH_PATH, "port": "http"},
            "periodSeconds": 2,
            "failureThreshold": 2,
        },
        "livenessProbe": {
            "httpGet": {"path": HEALTH_PATH, "port": "http"},
            "periodSeconds": 10,
            "failureThreshold": 3,
        },
        # Out of the Service's endpoints before HAProxy stops accepting.
        "lifecycle": {"preStop": {"sleep": {"seconds": 5}}},
        "securityContext": container_security_context(),
        "volumeMounts": [
            {"name": "live", "mountPath": LIVE_DIR, "readOnly": True},
            {"name": "run", "mountPath": RUNTIME_DIR},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(pool, site),
        "spec": {
            "replicas": gateway.replicas,
            "selector": {"matchLabels": {GATEWAY_LABEL: pool.metadata.name}},
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "serviceAccountName": site.service_account,
                    "enableServiceLinks": False,
                    "terminationGracePeriodSeconds": 30,
                    "securityContext": {
                        "runAsNonRoot": True,
                        "runAsUser": HAPROXY_UID,
                        "runAsGroup": HAPROXY_UID,
                        "fsGroup": HAPROXY_UID,
                        "seccompProfile": {"type": "RuntimeDefault"},
                    },
                    **site.placement(),
                    "initContainers": [_agent(pool, site, once=True)],
                    "containers": [haproxy, _agent(pool, site, once=False)],
                    "volumes": [
                        {"name": "live", "emptyDir": {}},
                        {"name": "run", "emptyDir": {"medium": "Memory"}},
                    ],
                    "topologySpreadConstraints": [
                        {
                            "maxSkew": 1,
                            "topologyKey": "kubernetes.io/hostname",
                            "whenUnsatisfiable": "ScheduleAnyway",
                            "labelSelector": {"matchLabels": {GATEWAY_LABEL: pool.metadata.name}},
                        }
                    ],
                },
            },
        },
    }


def service(pool: TenantPool, site: GatewaySite) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(pool, site),
        "spec": {
            "type": "ClusterIP",
            "selector": {GATEWAY_LABEL: pool.metadata.name},
            "ports": [
                {"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"},
                {
                    "name": "grpc",
                    "port": GRPC_PORT,
                    "targetPort": "grpc",
                    "protocol": "TCP",
                    "appProtocol": "grpc",
                },
                {
                    "name": "metrics",
                    "port": METRICS_PORT,
                    "targetPort": "metrics",
                    "protocol": "TCP",
                },
            ],
        },
    }


def disruption_budget(pool: TenantPool, site: GatewaySite) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": _meta(pool, site),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {GATEWAY_LABEL: pool.metadata.name}},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def network_policy(pool: TenantPool, site: GatewaySite, tenants: list[str]) -> dict[str, Any]:
    """Who reaches the pool's gateway: its admitted tenants on the inference ports, its
    monitoring on the metrics port, and its own replicas on the peers port."""
    pods = {"matchLabels": {GATEWAY_LABEL: pool.metadata.name}}
    ingress: list[dict[str, Any]] = [
        {
            "from": [{"podSelector": pods}],
            "ports": [{"protocol": "TCP", "port": PEERS_PORT}],
        }
    ]
    if tenants:
        ingress.append(
            {
                "from": [namespace_peer(tenants)],
                "ports": [
                    {"protocol": "TCP", "port": HTTP_PORT},
                    {"protocol": "TCP", "port": GRPC_PORT},
                ],
            }
        )
    monitoring = list(pool.spec.access.monitoring_namespaces)
    if monitoring:
        ingress.append(
            {
                "from": [namespace_peer(monitoring)],
                "ports": [{"protocol": "TCP", "port": METRICS_PORT}],
            }
        )
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(pool, site),
        "spec": {"podSelector": pods, "policyTypes": ["Ingress"], "ingress": ingress},
    }


def gateway_objects(
    pool: TenantPool,
    site: GatewaySite,
    config: str,
    keys: tuple[PublicKey, ...],
    tenants: list[str],
    oidc_keys: Sequence[tuple[str, Sequence[PublicKey]]] = (),
) -> list[dict[str, Any]]:
    """Every object of the pool's gateway, in apply order (the configuration first, so a
    new replica's agent finds it)."""
    return [
        config_map(pool, site, config, keys, oidc_keys),
        network_policy(pool, site, tenants),
        service(pool, site),
        disruption_budget(pool, site),
        deployment(pool, site),
    ]
