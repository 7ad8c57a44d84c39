"""Changing the gateway's configuration under load, on the real engine: limits changed
by reloading lose no request and keep every tenant's counts; a configuration HAProxy
refuses changes nothing."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import httpx
import pytest
from e2e.linear_model import BODY

from e2e import gateway as gw
from e2e import gateway_scenarios as scenarios
from shoal.gateway import haproxy_runner as runner
from shoal.render.gateway_config import Limits, Server, SigningKey
from shoal.render.gateway_files import CONFIG_FILE


def test_limits_change_under_load_without_a_failed_request(tmp_path: Path) -> None:
    f = scenarios.limits_change(tmp_path, requests=10_000, clients=12, changes=3)
    print(json.dumps(f, indent=1))
    assert f["a_requests"] >= 10_000
    assert f["a_failed"] == 0
    for reload in f["reloads"]:
        assert reload["tables_handed_over"]
        assert reload["team_a_slots"] == reload["team_a_slots_wanted"]
    # B sent 20 a second under a limit of 50 for 10 s, then the limit became 10: its count
    # of the last 10 s survived the reload, so it is refused until that count falls below
    # 100 (not for 5 s at least), and then held to the new rate (under the old one it
    # would be served all 20 a second).
    assert set(f["b_before_last_change"]) == {"200"}
    assert set(f["b_while_counted"]) == {"429"}, f["b_while_counted"]
    assert f["b_admitted_rps_after"] <= 10 * 1.25, f["b_admitted_rps_after"]


def test_a_refused_or_unchanged_configuration_changes_nothing(tmp_path: Path) -> None:
    with gw.tritons(tmp_path / "triton", [gw.Model("linear")]) as servers:
        routes = [gw.route("team-a", "linear", gw.servers_of(servers))]
        with gw.gateway(tmp_path / "gw", {"team-a": Limits()}, routes) as gateway:
            replica = gateway.replicas[0]
            before = (replica.directory / CONFIG_FILE).read_text()
            reloads = runner.master_status(replica.runtime).reloads
            assert gateway.config is not None
            # A key whose file was never written: haproxy -c would accept it (and then
            # refuse every token signed with it); apply refuses it first.
            missing = SigningKey("gone", "RS256", str(gw.KEYS_DIR / "gone.pem"))
            broken = dataclasses.replace(gateway.config, keys=(*gateway.config.keys, missing))
            with pytest.raises(runner.InvalidConfigError, match=r"gone\.pem"):
                replica.apply(broken, {})
            # And one HAProxy itself refuses: a route whose server cannot be resolved.
            unresolvable = dataclasses.replace(
                gateway.config,
                routes=(gw.route("team-a", "linear", [Server("nowhere", "no-such-host.invalid")]),),
            )
            with pytest.raises(runner.InvalidConfigError, match="no-such-host"):
                replica.apply(unresolvable, {})
            assert (replica.directory / CONFIG_FILE).read_text() == before
            assert runner.master_status(replica.runtime).reloads == reloads
            # What is already there is not applied again: no reload.
            again = replica.apply(gateway.config, gateway.issuer.key_files())
            assert not again.reloaded
            assert runner.master_status(replica.runtime).reloads == reloads
            response = httpx.post(
                f"{replica.url}/v2/models/linear/infer",
                json=BODY,
                headers=gw.headers(gateway.token("team-a")),
                timeout=10,
            )
            assert response.status_code == 200
