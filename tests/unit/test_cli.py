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
