"""An OIDC issuer a pool trusts, end to end on the local cluster: the real operator
fetches the issuer's keys over HTTPS (the pool's certificateAuthority), writes them into
the gateway's ConfigMap and the pool's status, and the gateway's real haproxy (one per
gateway pod, e2e/gateway_pods.py) admits the issuer's tokens beside real ServiceAccount
tokens. The issuer rotates its key and the new one works after a resync; the issuer goes
down and the pool says so (condition and Event) while the last keys keep working.

The token checks themselves are tests/e2e/test_gateway_oidc.py's.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from e2e.gateway_pods import GatewayPods, service_account_token
from e2e.linear_model import BODY, linear_model
from e2e.monitoring import PodBackers, Prometheus
from e2e.oidc_issuer import AUDIENCE, TENANT_CLAIM, oidc_issuer
from e2e.operator import OperatorProcess
from kubernetes import client

from e2e import gateway as gw
from shoal.render.gateway import DEFAULT_GATEWAY_NAMESPACE, audience, gateway_name
from shoal.render.keys import issuer_file_prefix
from tests.support.shoal_objects import Shoal, condition, wait_ready
from tests.support.wait import wait_for


def _oidc_status(shoal: Shoal, pool: str) -> list[dict[str, Any]]:
    return list(
        ((shoal.get("TenantPool", pool).get("status") or {}).get("gateway") or {}).get("oidc") or []
    )


def test_the_operator_loads_an_issuers_keys_and_its_tokens_reach_the_model(
    api: client.ApiClient,
    operator: OperatorProcess,
    core: client.CoreV1Api,
    namespace: str,
    tmp_path: Path,
) -> None:
    shoal = Shoal(api)
    first, second = gw.rsa_pair("cluster-rsa-1"), gw.ec_pair("cluster-ec-2")
    with (
        oidc_issuer(tmp_path / "issuer", [first]) as issuer,
        shoal.pool([namespace], gpus=8) as pool,
    ):
        trust = {
            "issuer": issuer.url,
            "audience": AUDIENCE,
            "tenantClaim": TENANT_CLAIM,
            "certificateAuthority": issuer.ca_pem,
        }
        shoal.patch("TenantPool", pool, {"spec": {"gateway": {"replicas": 1, "oidc": [trust]}}})
        loaded = wait_for(
            "the pool's status to list the issuer's key",
            lambda: _oidc_status(shoal, pool),
            lambda found: [s.get("keys") for s in found] == [["cluster-rsa-1"]],
            timeout=60,
        )
        assert loaded == [
            {"issuer": issuer.url, "jwksURI": issuer.jwks_uri, "keys": ["cluster-rsa-1"]}
        ]
        said = condition(shoal.get("TenantPool", pool), "IssuerKeysLoaded")
        assert (said["status"], said["reason"]) == ("True", "Loaded"), said
        config_map = core.read_namespaced_config_map(gateway_name(pool), DEFAULT_GATEWAY_NAMESPACE)
        prefix = issuer_file_prefix(issuer.url)
        assert f"{prefix}cluster-rsa-1.pem" in (config_map.data or {})

        model = linear_model(5, 0.2, pool=pool)
        del model["metadata"]["namespace"]
        shoal.create(model, namespace)
        wait_ready(shoal, namespace, "linear")
        # Backers list their pods in a target file no Prometheus reads here.
        (tmp_path / "prometheus").mkdir()
        backers = PodBackers.for_rendered(
            core, namespace, "linear", Prometheus(tmp_path / "prometheus"), tmp_path / "linear"
        )
        gateways = GatewayPods(
            core, pool, DEFAULT_GATEWAY_NAMESPACE, tmp_path / "gateways", [backers]
        ).start()
        try:
            wait_for(
                "the gateway to serve the model",
                lambda: (gateways.urls(), backers.http_urls()),
                lambda seen: all(len(urls) == 1 for urls in seen),
                timeout=120,
                interval=1,
            )

            def post(token: str) -> int:
                url = gateways.urls()[0] + "/v2/models/linear/infer"
                headers = {"Authorization": f"Bearer {token}"}
                return httpx.post(url, json=BODY, headers=headers, timeout=10).status_code

            old = issuer.token(namespace, key=first)
            wait_for(
                "the issuer's token to be admitted",
                lambda: post(old),
                lambda s: s == 200,
                timeout=60,
            )
            service_account = service_account_token(core, namespace, audience(pool))
            assert post(service_account) == 200
            assert post(issuer.token("kube-system", key=first)) == 403
            assert post(issuer.token(namespace, key=first, audience="another-app")) == 401

            # The issuer rotates to a new key: it works after the next resync, the old
            # one (withdrawn) no more.
            issuer.published.keys = [second]
            new = issuer.token(namespace, key=second)
            wait_for(
                "the pool's status to list the new key",
                lambda: _oidc_status(shoal, pool),
                lambda found: [s.get("keys") for s in found] == [["cluster-ec-2"]],
                timeout=60,
            )
            wait_for(
                "the new key's token to be admitted",
                lambda: post(new),
                lambda s: s == 200,
                timeout=60,
            )
            assert post(old) == 401

            # The issuer goes down: the pool says so, once, and the last keys keep working.
            issuer.published.failing = 503
            failing = wait_for(
                "IssuerKeysLoaded False",
                lambda: condition(shoal.get("TenantPool", pool), "IssuerKeysLoaded"),
                lambda c: c.get("status") == "False",
                timeout=60,
            )
            assert failing["reason"] == "JWKSUnavailable", failing
            assert "HTTP 503" in failing["message"]
            assert "verified with the 1 key(s) fetched before" in failing["message"]
            (down,) = _oidc_status(shoal, pool)
            assert down["keys"] == ["cluster-ec-2"]
            assert "HTTP 503" in down["error"]
            events = wait_for(
                "a Warning Event about the pool",
                lambda: [
                    e
                    for e in core.list_namespaced_event("default").items
                    if e.involved_object.name == pool and e.reason == "JWKSUnavailable"
                ],
                lambda found: len(found) >= 1,
                timeout=30,
            )
            assert events[0].type == "Warning"
            assert post(new) == 200
            issuer.published.failing = None
            wait_for(
                "IssuerKeysLoaded True again",
                lambda: condition(shoal.get("TenantPool", pool), "IssuerKeysLoaded"),
                lambda c: c.get("status") == "True",
                timeout=60,
            )
            assert not gateways.errors, gateways.errors
        finally:
            gateways.stop()
            backers.stop()
            shoal.delete("InferenceModel", "linear", namespace)
