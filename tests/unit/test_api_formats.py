"""The string formats of the API agree with the tools that read the values: Go's
duration parser, croniter, the IANA zone database, the quantity grammar, rclone's paths."""

from __future__ import annotations

import re
import zoneinfo

import pytest
from croniter import croniter
from hypothesis import given, settings
from hypothesis import strategies as st

from shoal.api.admission import refusals
from shoal.api.common import (
    DURATION_PATTERN,
    QUANTITY_PATTERN,
    duration_nanoseconds,
    is_label_key,
)
from shoal.api.formats import CRON_PATTERN, STORAGE_URI_PATTERN, TIME_ZONE_PATTERN
from shoal.api.inferencemodel import InferenceModel
from shoal.api.quantity import canonical_quantity, parse_quantity
from shoal.api.tenantpool import TenantPool
from shoal.render.model_fetch import fetch_plan
from tests.support.resources import example


@pytest.mark.parametrize(
    ("text", "nanoseconds"),
    [
        ("5000000us", 5 * 10**9),
        ("1h30m", 5400 * 10**9),
        ("1.5h", 5400 * 10**9),
        ("0.1ns", 0),
        ("1.0000000001s", 10**9),
        # Go scales the fraction in float64: this is what duration() in CEL computes.
        ("0.3h", 1_080_000_000_000),
        ("59m59.999s", 3_599_999_000_000),
    ],
)
def test_durations_are_read_as_go_reads_them(text: str, nanoseconds: int) -> None:
    assert duration_nanoseconds(text) == nanoseconds


@settings(max_examples=300, derandomize=True)
@given(st.from_regex(re.compile(DURATION_PATTERN), fullmatch=True))
def test_no_duration_the_pattern_admits_overflows_go(text: str) -> None:
    """So the API server's duration() never fails on one: the bound is by value."""
    assert duration_nanoseconds(text) < 2**63


@settings(max_examples=300, derandomize=True)
@given(st.from_regex(re.compile(CRON_PATTERN), fullmatch=True))
def test_every_schedule_the_pattern_admits_is_read_by_croniter(text: str) -> None:
    croniter(text)


@pytest.mark.parametrize(
    "text",
    ["61 * * * *", "0 24 * * *", "0 0 0 * *", "0 0 * 13 *", "0 0 * * 8", "*/0 * * * *", "@daily"],
)
def test_out_of_range_schedules_are_refused(text: str) -> None:
    assert not re.fullmatch(CRON_PATTERN, text)


def test_every_iana_zone_is_admitted_and_made_up_ones_are_not() -> None:
    zones = zoneinfo.available_timezones() - {"Factory", "localtime"}
    assert [z for z in zones if not re.fullmatch(TIME_ZONE_PATTERN, z)] == []
    for made_up in ("Mars/Olympus", "UTC+2", "+02:00", "europe/paris", "Europe/", "Paris"):
        assert not re.fullmatch(TIME_ZONE_PATTERN, made_up), made_up


@settings(max_examples=300, derandomize=True)
@given(st.from_regex(re.compile(QUANTITY_PATTERN), fullmatch=True))
def test_every_quantity_the_pattern_admits_parses_positive_and_prints_stably(text: str) -> None:
    parsed = parse_quantity(text)
    assert parsed is not None
    assert parsed.value > 0
    once = canonical_quantity(text)
    assert canonical_quantity(once) == once
    rounded = canonical_quantity(text, resource_list=True)
    assert canonical_quantity(rounded, resource_list=True) == rounded


@pytest.mark.parametrize(
    ("key", "valid"),
    [
        ("shoal.dev/node-group", True),
        ("node-group", True),
        ("a" * 63, True),
        ("a" * 64, False),
        ("p" * 253 + "/n", True),
        ("p" * 254 + "/n", False),
        ("Example.com/x", False),
        ("example.com/", False),
        ("/x", False),
        ("a/b/c", False),
        ("node group", False),
        ("-x", False),
    ],
)
def test_label_keys_follow_the_api_servers_rules(key: str, valid: bool) -> None:
    assert is_label_key(key) == valid


@settings(max_examples=300, derandomize=True)
@given(st.from_regex(re.compile(STORAGE_URI_PATTERN), fullmatch=True))
def test_an_admitted_storage_uri_copies_from_within_its_source(uri: str) -> None:
    """Whatever the models accept renders a copy whose source stays in the bucket or
    claim and carries no credentials."""
    try:
        InferenceModel.model_validate(
            {
                "metadata": {"name": "m"},
                "spec": {
                    "pool": "p",
                    "model": {"name": "m", "backend": "python", "storageUri": uri},
                },
            }
        )
    except ValueError:
        return
    args = " ".join(fetch_plan(uri, "m").args)
    assert not re.search(r"(^|[/\\ ])\.\.?([/\\ ]|$)", args), args
    assert "@" not in uri.split("/")[2]


def test_refusals_mirror_the_admission_policy() -> None:
    pool = TenantPool.model_validate(example("TenantPool", "shared"))
    doc = example("InferenceModel", "ads-ctr")
    doc["metadata"]["namespace"] = "team-ads"
    doc["spec"]["runtime"] = {"gpus": 2}
    doc["spec"]["scaling"] = {
        "minReplicas": 2,
        "maxReplicas": 10,
        "schedules": [
            {"name": "day", "start": "0 8 * * *", "duration": "10h", "minReplicas": 3},
            {"name": "sale", "start": "0 0 1 11 *", "duration": "24h", "minReplicas": 9},
        ],
    }
    labels = {"kubernetes.io/metadata.name": "team-ads"}
    assert refusals(pool, InferenceModel.model_validate(doc), labels) == [
        "spec.scaling.schedules[1].minReplicas: the scheduled floor sale needs 18 GPUs; "
        "TenantPool shared allows 6 per namespace",
        "spec.scaling.schedules[1].minReplicas: the scheduled floor sale needs 9 replicas; "
        "TenantPool shared allows 8 per namespace",
    ]
    doc["metadata"]["namespace"] = "team-search"
    doc["spec"]["scaling"] = {"minReplicas": 1}
    assert refusals(pool, InferenceModel.model_validate(doc), {}) == [
        "spec.pool: TenantPool shared does not admit namespace team-search"
    ]
