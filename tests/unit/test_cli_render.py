"""``shoal render --cluster-cidr`` previews the policies the operator renders with
SHOAL_CLUSTER_CIDRS."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from shoal.cli import main
from shoal.render.tenancy import DEFAULT_CLUSTER_CIDRS

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _excepted(capsys: pytest.CaptureFixture[str], *extra: str) -> set[str]:
    assert main(["render", "-f", str(EXAMPLES), *extra]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    download = next(
        d
        for d in docs
        if d["kind"] == "NetworkPolicy" and "model-download" in d["metadata"]["name"]
    )
    return {
        cidr
        for rule in download["spec"]["egress"]
        for peer in rule.get("to", [])
        for cidr in (peer.get("ipBlock") or {}).get("except", [])
    }


def test_the_cluster_networks_given_are_the_ones_excepted(
    capsys: pytest.CaptureFixture[str],
) -> None:
    default = _excepted(capsys)
    assert set(DEFAULT_CLUSTER_CIDRS) <= default
    given = _excepted(capsys, "--cluster-cidr", "10.96.0.0/12", "--cluster-cidr", "10.244.0.0/16")
    assert {"10.96.0.0/12", "10.244.0.0/16"} <= given
    assert "192.168.0.0/16" not in given
    assert "169.254.0.0/16" in given  # link-local stays closed whatever is given
