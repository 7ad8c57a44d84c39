"""A pool's gateway as Kubernetes objects, its tenants' limits in force, the signing
keys it verifies tokens with, and the agent that applies its configuration."""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path
from typing import Any

import httpx
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from shoal.api.tenantpool import TenantPool
from shoal.gateway.agent import (
    STALE_SECONDS,
    WATCH_READ_SECONDS,
    WATCH_SECONDS,
    Agent,
    Heartbeat,
    serve_health,
)
from shoal.gateway.haproxy_runner import InvalidConfigError
from shoal.render.gateway import GatewaySite, audience, gateway_objects
from shoal.render.gateway_config import Limits
from shoal.render.gateway_files import RuntimePaths
from shoal.render.gateway_plan import tenant_limits
from shoal.render.keys import PublicKey, issuer_from, public_key
from shoal.settings import Settings
from tests.support.resources import example


def pool(**gateway: Any) -> TenantPool:
    doc = example("TenantPool", "shared")
    doc["metadata"]["uid"] = "00000000-0000-0000-0000-00000000000a"
    doc["spec"]["gateway"] = gateway
    return TenantPool.model_validate(doc)


def by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


KEY = PublicKey("kid-1", "RS256", "-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n")


def test_the_gateway_runs_haproxy_with_its_agent_in_the_gateway_namespace() -> None:
    site = GatewaySite(namespace="gws", image="haproxy:test", agent_image="shoal:test")
    objs = by_kind(gateway_objects(pool(replicas=3), site, "global\n", (KEY,), ["team-ads"]))
    assert {o["metadata"]["namespace"] for o in objs.values()} == {"gws"}
    assert objs["ConfigMap"]["data"] == {"haproxy.cfg": "global\n", "kid-1.pem": KEY.pem}
    pod = objs["Deployment"]["spec"]["template"]["spec"]
    assert objs["Deployment"]["spec"]["replicas"] == 3
    assert [c["image"] for c in pod["containers"]] == ["haproxy:test", "shoal:test"]
    assert pod["initContainers"][0]["args"][-1] == "--once"
    assert "-L" in pod["containers"][0]["command"]
    assert pod["serviceAccountName"] == "shoal-gateway"
    assert pod["securityContext"]["runAsNonRoot"] is True
    for owner in (o["metadata"]["ownerReferences"][0] for o in objs.values()):
        assert owner["kind"] == "TenantPool"


def test_the_gateways_run_where_the_site_places_them_and_anywhere_without() -> None:
    """An admin's gateway placement (chart values gateway.nodeSelector/tolerations)
    reaches every gateway pod; unset, the pods carry neither field."""
    settings = Settings.from_env(
        {
            "SHOAL_GATEWAY_NODE_SELECTOR": '{"node-role/ingress": "true"}',
            "SHOAL_GATEWAY_TOLERATIONS": '[{"key": "node-role/ingress", "operator": "Exists"}]',
        }
    )
    placed = by_kind(gateway_objects(pool(), settings.gateway, "", (), ["a"]))
    pod = placed["Deployment"]["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"node-role/ingress": "true"}
    assert pod["tolerations"] == [{"key": "node-role/ingress", "operator": "Exists"}]
    anywhere = by_kind(gateway_objects(pool(), Settings.from_env({}).gateway, "", (), ["a"]))
    pod = anywhere["Deployment"]["spec"]["template"]["spec"]
    assert "nodeSelector" not in pod
    assert "tolerations" not in pod


def test_a_gateway_placement_the_api_would_refuse_is_refused_at_start_up() -> None:
    for env, said in (
        ({"SHOAL_GATEWAY_NODE_SELECTOR": '{"bad key!": "x"}'}, "gateway_node_selector"),
        (
            {"SHOAL_GATEWAY_TOLERATIONS": '[{"operator": "Equal", "value": "x"}]'},
            "operator must be Exists when key is empty",
        ),
        ({"SHOAL_GATEWAY_TOLERATIONS": "not json"}, "SHOAL_GATEWAY_TOLERATIONS is not JSON"),
    ):
        with pytest.raises(ValueError, match=said):
            Settings.from_env(env)


def test_only_the_pools_tenants_reach_the_gateway() -> None:
    objs = by_kind(gateway_objects(pool(), GatewaySite(), "", (), ["a", "b"]))
    ingress = objs["NetworkPolicy"]["spec"]["ingress"]
    tenants = next(r for r in ingress if {"protocol": "TCP", "port": 8000} in r["ports"])
    names = tenants["from"][0]["namespaceSelector"]["matchExpressions"][0]["values"]
    assert names == ["a", "b"]
    without = by_kind(gateway_objects(pool(), GatewaySite(), "", (), []))
    ports = [p["port"] for r in without["NetworkPolicy"]["spec"]["ingress"] for p in r["ports"]]
    assert 8000 not in ports  # no tenant: nobody on the inference ports
    assert 10000 in ports  # the peers


def test_each_pool_has_its_own_audience() -> None:
    assert audience("shared") == "shoal.dev/gateway/shared"
    assert audience("shared") != audience("critical")


NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)


def test_a_tenants_own_limits_win_field_by_field() -> None:
    p = pool(
        limits={"requestsPerSecond": 100, "burst": 10, "concurrency": 8},
        tenants=[{"namespace": "b", "concurrency": 2}],
    )
    limits = dict(tenant_limits(p, ["a", "b"], NOW))
    assert limits["a"] == Limits(100, 10, 8, 1000)
    assert limits["b"] == Limits(100, 10, 2, 1000)


def test_an_open_window_replaces_the_default_limits() -> None:
    window = {
        "name": "noon",
        "start": "0 12 * * *",
        "duration": "1h",
        "limits": {"requestsPerSecond": 5},
    }
    p = pool(limits={"requestsPerSecond": 100}, windows=[window])
    assert dict(tenant_limits(p, ["a"], NOW))["a"].requests_per_second == 5
    later = NOW + dt.timedelta(hours=1)  # the window closed at 13:00 exactly
    assert dict(tenant_limits(p, ["a"], later))["a"].requests_per_second == 100


def _b64(number: int) -> str:
    raw = number.to_bytes((number.bit_length() + 7) // 8, "big")
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def test_the_clusters_signing_keys_become_pem_files() -> None:
    rsa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key()
    ec_key = ec.generate_private_key(ec.SECP256R1()).public_key()
    numbers = rsa_key.public_numbers()
    points = ec_key.public_numbers()
    jwks = {
        "keys": [
            {
                "kty": "RSA",
                "kid": "r/1",
                "alg": "RS256",
                "use": "sig",
                "n": _b64(numbers.n),
                "e": _b64(numbers.e),
            },
            {"kty": "EC", "kid": "e1", "crv": "P-256", "x": _b64(points.x), "y": _b64(points.y)},
            {"kty": "oct", "kid": "secret", "k": "c2VjcmV0"},  # no use to a gateway
        ]
    }
    issuer = issuer_from({"issuer": "https://kubernetes.default.svc"}, jwks)
    assert issuer.url == "https://kubernetes.default.svc"
    assert [(k.kid, k.alg, k.file_name) for k in issuer.keys] == [
        ("e1", "ES256", "e1.pem"),
        ("r/1", "RS256", "r_1.pem"),
    ]
    loaded = serialization.load_pem_public_key(issuer.keys[1].pem.encode())
    assert isinstance(loaded, rsa.RSAPublicKey)
    assert loaded.public_numbers() == numbers
    assert public_key({"kty": "RSA", "use": "enc", "kid": "x", "n": "AQ", "e": "AQAB"}) is None


def test_the_agent_applies_each_version_once_and_keeps_a_refused_one_out(tmp_path: Path) -> None:
    calls: list[dict[str, Any]] = []

    def applier(directory: Path, config: str, runtime: RuntimePaths, peer: str, **kw: Any) -> None:
        calls.append({"config": config, "files": kw["files"], "reload": kw["reload_running"]})
        if config == "bad":
            raise InvalidConfigError("[ALERT] parsing")

    agent = Agent(tmp_path, RuntimePaths(str(tmp_path / "run")), "gw-0", applier=applier)
    assert agent.apply({"haproxy.cfg": "one", "k.pem": "key"}, reload_haproxy=False)
    assert calls[-1] == {"config": "one", "files": {"k.pem": b"key"}, "reload": False}
    assert not agent.apply({"haproxy.cfg": "one", "k.pem": "key"})  # nothing new
    assert not agent.apply({"haproxy.cfg": "bad"})  # refused: logged, not applied
    assert not agent.apply({"haproxy.cfg": "bad"})  # and not tried again
    assert agent.apply({"haproxy.cfg": "two"})
    assert [c["config"] for c in calls] == ["one", "bad", "two"]
    assert calls[-1]["reload"] is True


def test_the_agent_sidecar_is_alive_while_its_loop_goes_round() -> None:
    """Its liveness probe answers 200 while the watch loop beats, 500 once the loop has
    been still longer than one whole silent watch (then the kubelet restarts it)."""
    now = [0.0]
    heartbeat = Heartbeat(clock=lambda: now[0])
    server = serve_health(heartbeat, 0)
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        assert httpx.get(f"{url}/healthz").status_code == 200
        now[0] = STALE_SECONDS - 1
        assert httpx.get(f"{url}/healthz").status_code == 200
        now[0] = STALE_SECONDS + 1
        assert httpx.get(f"{url}/healthz").status_code == 500
        heartbeat.beat()
        assert httpx.get(f"{url}/healthz").status_code == 200
        assert httpx.get(f"{url}/other").status_code == 404
    finally:
        server.shutdown()
    # Every call in the loop gives up before the probe would call it stuck.
    assert WATCH_SECONDS < WATCH_READ_SECONDS < STALE_SECONDS


def test_the_agent_sidecar_has_a_liveness_probe_and_its_init_container_none() -> None:
    objs = by_kind(gateway_objects(pool(), GatewaySite(), "", (), ["a"]))
    pod = objs["Deployment"]["spec"]["template"]["spec"]
    [init] = pod["initContainers"]
    agent = next(c for c in pod["containers"] if c["name"] == "agent")
    probe = agent["livenessProbe"]["httpGet"]
    port = next(p for p in agent["ports"] if p["name"] == probe["port"])
    assert f"--health-port={port['containerPort']}" in agent["args"]
    assert "livenessProbe" not in init
    assert not any(a.startswith("--health-port") for a in init["args"])
