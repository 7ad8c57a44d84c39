from __future__ import annotations

import subprocess
import sys

import pytest

from shoal import __version__
from shoal.cli import main


def test_version_prints_the_package_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["version"]) == 0
    assert capsys.readouterr().out.strip() == f"shoal {__version__}"


def test_console_script_is_installed() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "shoal.cli", "version"], check=True, capture_output=True, text=True
    ).stdout
    assert out.startswith("shoal ")


def test_unknown_command_is_an_error() -> None:
    with pytest.raises(SystemExit) as exc:
        main(["nope"])
    assert exc.value.code == 2


def test_render_reads_a_directory_and_prints_a_yaml_stream(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import yaml

    assert main(["render", "-f", "examples/"]) == 0
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    kinds = [d["kind"] for d in docs]
    # Three models, and the two pools' gateways.
    assert kinds.count("Deployment") == 5
    assert kinds.count("NetworkPolicy") >= 10
    gateways = [d for d in docs if d["kind"] == "ConfigMap" and "haproxy.cfg" in d["data"]]
    assert len(gateways) == 2
    assert "backend m_team-search_search-ranker" in gateways[0]["data"]["haproxy.cfg"]


def test_render_explains_a_missing_reference(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["render", "-f", "examples/30-models.yaml"]) == 1
    assert "TenantPool 'critical' is not among the files" in capsys.readouterr().err
