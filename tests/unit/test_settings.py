from __future__ import annotations

import kopf
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


def test_kopf_keeps_nothing_on_the_watched_objects() -> None:
    """GitOps: only indexing and event handlers, which keep no progress or last-handled
    state on the user's objects; daemons, timers and change handlers would (and would
    put a finalizer of kopf's on every model)."""
    import shoal.handlers  # noqa: F401  - registers the handlers

    registry = kopf.get_default_registry()
    assert registry._indexing._handlers
    assert registry._watching._handlers
    assert not registry._changing._handlers
    assert not registry._spawning._handlers
    settings = operator_settings(Settings())
    assert settings.watching.client_timeout
    assert settings.watching.server_timeout


def test_a_failed_watch_is_tried_again_within_5_seconds_for_a_minute() -> None:
    """An API server back from a restart is watched again within 5 s (kopf's default
    backoffs reach 13 and 21 s), and a request still gives up no sooner than kopf's."""
    ours = operator_settings(Settings()).networking.error_backoffs
    kopfs = kopf.OperatorSettings().networking.error_backoffs
    assert isinstance(ours, tuple)
    assert isinstance(kopfs, tuple)
    assert max(ours) <= 5
    assert sum(ours) >= sum(kopfs)


def test_an_idle_object_worker_lets_go_of_its_last_event_within_a_second() -> None:
    """kopf keeps a worker per object alive, holding the object's last event, for 5 s
    after it; Shoal's let go sooner, which lowers the peak memory of a burst."""
    assert operator_settings(Settings()).queueing.idle_timeout <= 1.0
    assert kopf.OperatorSettings().queueing.idle_timeout > 1.0


def test_log_format_is_text_or_json() -> None:
    assert Settings.from_env({}).log_format == "text"
    assert Settings.from_env({"SHOAL_LOG_FORMAT": "json"}).log_format == "json"
    with pytest.raises(ValidationError, match="'text' or 'json'"):
        Settings.from_env({"SHOAL_LOG_FORMAT": "xml"})
