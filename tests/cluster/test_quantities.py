"""The models print a quantity in the canonical form the real API server stores, so that
a rendered Pod template reads back exactly as it was applied (no write on every pass)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from shoal.api.common import QUANTITY_PATTERN, quantity_text
from shoal.api.quantity import canonical_quantity, parse_quantity

SAMPLES = (
    "0.5", "2", "8Gi", "1024Mi", "1536Mi", "0.5Gi", "0.3Ki", "12000", "1500", "100k",
    "1000m", "100m", "1e3", "1E3", "1.5e3", "1e-7", "+1", "+8Gi", "07Gi", "08Gi", "1.", ".5",
    "2048Ki", "0.0000000001", "0.0001", "12G", "16384Mi", "1.000000001Gi", "1000E",
    "123456789012345678901", "9223372036854775807", "99999999999999999999Ei", "7.5Ei",
    "1e999", "1e-999", "0.1n", "1Pi", "1023", "1025Ki", "3000000000000000000000",
)  # fmt: skip
NUMBERS = (0.5, 2, 2.0, 1e-07, 1e21, 0.0001, 123456789, 8589934592, 1.5e-10, 3.14159)


def stored(api: client.ApiClient, namespace: str, value: Any) -> tuple[str, str]:
    """What the API server stores for ``value`` as a container's CPU request (a resource
    list) and as an emptyDir's size limit (a plain quantity), in a dry-run Pod."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "quantity"},
        "spec": {
            "containers": [
                {
                    "name": "c",
                    "image": "registry.invalid/x:1",
                    "resources": {"requests": {"cpu": value}},
                }
            ],
            "volumes": [{"name": "v", "emptyDir": {"sizeLimit": value}}],
        },
    }
    method, url, headers, body, _ = api.param_serialize(
        method="POST",
        resource_path=f"/api/v1/namespaces/{namespace}/pods",
        query_params=[("dryRun", "All")],
        header_params={"Accept": "application/json", "Content-Type": "application/json"},
        body=pod,
        auth_settings=["BearerToken"],
    )
    response = api.call_api(method, url, header_params=headers, body=body)
    raw = response.read()
    if not 200 <= response.status < 300:
        raise ApiException(http_resp=response)
    spec = json.loads(raw)["spec"]
    return spec["containers"][0]["resources"]["requests"]["cpu"], spec["volumes"][0]["emptyDir"][
        "sizeLimit"
    ]


def ours(text: str) -> tuple[str, str]:
    return canonical_quantity(text, resource_list=True), canonical_quantity(text)


@pytest.mark.parametrize("text", SAMPLES)
def test_canonical_form_is_the_api_servers(
    text: str, api: client.ApiClient, module_namespace: str
) -> None:
    assert stored(api, module_namespace, text) == ours(text)


@pytest.mark.parametrize("number", NUMBERS, ids=repr)
def test_a_number_means_what_the_api_server_reads(
    number: float, api: client.ApiClient, module_namespace: str
) -> None:
    """A number in a spec is held as the string of its value: it stands for what the API
    server reads in the same number."""
    for mine, theirs in zip(
        ours(str(quantity_text(number))), stored(api, module_namespace, number), strict=True
    ):
        mine_parsed, theirs_parsed = parse_quantity(mine), parse_quantity(theirs)
        assert mine_parsed is not None
        assert theirs_parsed is not None
        assert mine_parsed.value == theirs_parsed.value, (mine, theirs)


def test_generated_quantities(api: client.ApiClient, module_namespace: str) -> None:
    """Strings the schema's pattern admits: each parses, and prints as the server does."""
    checked = []

    @settings(max_examples=60, deadline=None, derandomize=True,
              suppress_health_check=[HealthCheck.too_slow])  # fmt: skip
    @given(text=st.from_regex(re.compile(QUANTITY_PATTERN), fullmatch=True))
    def check(text: str) -> None:
        if len(text) > 64:
            return
        try:
            server = stored(api, module_namespace, text)
        except ApiException as exc:
            pytest.fail(f"the API server refused {text!r}, which the pattern admits: {exc.body}")
        assert server == ours(text), text
        checked.append(text)

    check()
    assert len(checked) > 30
