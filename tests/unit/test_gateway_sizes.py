"""A pool's request-body limit (spec.gateway.maxRequestBody): bounded as the API server
bounds it, carried by the operator's plan into the gateway's configuration, and
rendered as HTTP and gRPC refusals (tests/e2e/test_gateway_sizes.py sends the bodies
through real haproxy)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from pydantic import ValidationError

from shoal.api.refusal_words import in_plain_words
from shoal.api.tenantpool import TenantPool
from shoal.render.gateway_config import DEFAULT_MAX_REQUEST_BODY
from shoal.render.gateway_plan import gateway_config
from shoal.render.haproxy_config import haproxy_config
from shoal.render.keys import Issuer
from tests.support.resources import example
from tests.unit.test_haproxy_config import config

pytestmark = pytest.mark.unit


def _pool(**gateway: Any) -> TenantPool:
    doc = example("TenantPool", "shared")
    doc["spec"].setdefault("gateway", {}).update(gateway)
    return TenantPool.model_validate(doc)


def _limit(pool: TenantPool) -> int:
    now = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    issuer = Issuer(url="https://kubernetes.default.svc", keys=())
    return gateway_config(pool, issuer, ["team-a"], (), (), now).max_request_body


@pytest.mark.parametrize(
    ("size", "limit"),
    [("1Ki", 1024), ("64Mi", 64 * 2**20), ("1M", 10**6), ("2Gi", 2**31), ("5000", 5000)],
)
def test_the_pools_limit_reaches_the_gateway_in_bytes(size: str, limit: int) -> None:
    assert _limit(_pool(maxRequestBody=size)) == limit


def test_unset_it_is_64mi() -> None:
    assert _limit(_pool()) == DEFAULT_MAX_REQUEST_BODY == 64 * 2**20


@pytest.mark.parametrize(
    ("size", "words"),
    [
        ("512", "must be from 1Ki to 2Gi"),
        ("3Gi", "must be from 1Ki to 2Gi"),
        ("0", "a whole number of bytes with an optional suffix, such as 64Mi"),
        ("1.5Mi", "a whole number of bytes with an optional suffix, such as 64Mi"),
        ("-1Ki", "a whole number of bytes with an optional suffix, such as 64Mi"),
    ],
)
def test_a_limit_out_of_bounds_is_refused_in_the_fields_words(size: str, words: str) -> None:
    with pytest.raises(ValidationError) as refused:
        _pool(maxRequestBody=size)
    said = " ".join(in_plain_words(refused.value))
    assert "maxRequestBody" in said, said
    assert words in said, said


def test_the_rendered_refusals_carry_the_limit() -> None:
    text = haproxy_config(config(max_request_body=5000))
    assert "if { req.hdr_val(content-length) gt 5000 }" in text
    assert "be2dec(:,4) -m int gt 5000 }" in text
    assert "deny_status 411" in text
