from __future__ import annotations

import pytest
from pydantic import ValidationError

from shoal.runtime import operator_settings
from shoal.settings import Settings


def test_defaults_watch_the_whole_cluster() -> None:
    s = Settings.from_env({})
    assert s.namespaces == ()
    assert s.resync_seconds == 60


def test_env_overrides_are_parsed_and_validated() -> None:
    s = Settings.from_env(
        {"SHOAL_NAMESPACES": "a, b,,", "SHOAL_RESYNC_SECONDS": "5", "SHOAL_PROMETHEUS_URL": ""}
    )
    assert s.namespaces == ("a", "b")
    assert s.resync_seconds == 5.0
    assert s.prometheus_url is None


def test_bad_env_value_names_the_setting() -> None:
    with pytest.raises(ValidationError, match="resync_seconds"):
        Settings.from_env({"SHOAL_RESYNC_SECONDS": "-1"})


def test_kopf_keeps_its_bookkeeping_out_of_annotations() -> None:
    """GitOps: kopf must not write annotations onto the user's objects."""
    settings = operator_settings(Settings())
    progress = settings.persistence.progress_storage
    diffbase = settings.persistence.diffbase_storage
    assert type(progress).__name__ == "StatusProgressStorage"
    assert type(diffbase).__name__ == "StatusDiffBaseStorage"
    assert settings.persistence.finalizer == "shoal.dev/finalizer"
    assert settings.watching.client_timeout
    assert settings.watching.server_timeout
