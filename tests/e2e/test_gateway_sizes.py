"""Request sizes at the gateway, on real haproxy and tritonserver: a body over the pool's
limit (spec.gateway.maxRequestBody) never reaches a model, whether it comes as HTTP
with a Content-Length, as HTTP without one, or as a gRPC message.

Each refusal is checked against its control: the same request under the default limit
(64Mi) reaches Triton, which answers it itself (about the input's shape, since these
bodies are larger than the linear model's input)."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from contextlib import contextmanager

import httpx
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from e2e import gateway as gw
from shoal.render.gateway_config import DEFAULT_MAX_REQUEST_BODY, Limits

LIMIT = 64 * 1024
INFER = "/v2/models/linear/infer"


@pytest.fixture(scope="module")
def gateway(tmp_path_factory: pytest.TempPathFactory) -> Iterator[gw.Gateway]:
    work = tmp_path_factory.mktemp("sizes")
    with gw.tritons(work / "t", [gw.Model("linear")]) as servers:
        routes = [gw.route("team-a", "linear", gw.servers_of(servers, "t"))]
        tenants = {"team-a": Limits(requests_per_second=1000, burst=100)}
        with gw.gateway(work / "gw", tenants, routes) as running:
            yield running


@contextmanager
def _limited(gateway: gw.Gateway) -> Iterator[None]:
    """The gateway reloaded with a 64 KiB limit, and back to the default after."""
    default = gateway.config
    assert default is not None
    assert default.max_request_body == DEFAULT_MAX_REQUEST_BODY
    gateway.apply(dataclasses.replace(default, max_request_body=LIMIT))
    try:
        yield
    finally:
        gateway.apply(default)


def _body(values: int) -> bytes:
    """An inference request whose input has ``values`` numbers (about 2 bytes each)."""
    request = {"inputs": [{"name": "INPUT0", "shape": [1, values], "datatype": "FP32"}]}
    request["inputs"][0]["data"] = [0] * values
    return json.dumps(request).encode()


def _padded(length: int) -> bytes:
    """A JSON body of exactly ``length`` bytes (an empty input list, padded)."""
    head, tail = b'{"inputs":[', b"]}"
    return head + b" " * (length - len(head) - len(tail)) + tail


def _post(gateway: gw.Gateway, content: bytes | Iterator[bytes]) -> httpx.Response:
    auth = {"Authorization": f"Bearer {gateway.token('team-a')}"}
    return httpx.post(gateway.replicas[0].url + INFER, content=content, headers=auth, timeout=10)


def _infer_grpc(gateway: gw.Gateway, values: int, compression: str | None = None) -> str:
    """What a gRPC inference with ``values`` numbers came back with: "ok" or the error."""
    client = grpcclient.InferenceServerClient(url=gateway.replicas[0].grpc_url)
    data = grpcclient.InferInput("INPUT0", [1, values], "FP32")
    data.set_data_from_numpy(np.ones((1, values), dtype=np.float32))
    auth = {"authorization": f"Bearer {gateway.token('team-a')}"}
    try:
        client.infer("linear", [data], headers=auth, compression_algorithm=compression)
    except InferenceServerException as exc:
        return str(exc)
    finally:
        client.close()
    return "ok"


def test_an_http_body_over_the_limit_gets_413_before_a_model_sees_it(
    gateway: gw.Gateway,
) -> None:
    over = _body(LIMIT // 2 + 1000)  # about 66 KiB
    assert len(over) > LIMIT
    control = _post(gateway, over)
    assert control.status_code == 400, control.text  # Triton's own answer, about the shape
    assert "unexpected shape" in control.text

    with _limited(gateway):
        refused = _post(gateway, over)
        assert refused.status_code == 413, refused.text
        assert refused.json() == {
            "error": f"the request body is over the gateway's limit of {LIMIT} bytes"
        }
        under = _post(gateway, _body(1000))
        assert under.status_code == 400, under.text
        assert "unexpected shape" in under.text
        assert _post(gateway, _padded(LIMIT)).status_code == 400  # Triton's: no inputs
        assert _post(gateway, _padded(LIMIT + 1)).status_code == 413


def test_an_http_body_without_a_length_gets_411(gateway: gw.Gateway) -> None:
    """Chunked: nothing declares the length, so nothing could stop it at the limit."""

    def chunks() -> Iterator[bytes]:
        yield _body(4)

    refused = _post(gateway, chunks())
    assert refused.status_code == 411, refused.text
    assert refused.json() == {"error": "a request body must declare its length (Content-Length)"}
    assert _post(gateway, _body(4)).status_code == 200


def test_a_grpc_message_over_the_limit_is_refused_and_one_under_it_is_not(
    gateway: gw.Gateway,
) -> None:
    values = LIMIT // 4 + 1000  # FP32: 4 bytes each, about 68 KiB of tensor
    control = _infer_grpc(gateway, values)
    assert "unexpected shape" in control, control  # Triton's own answer

    with _limited(gateway):
        refused = _infer_grpc(gateway, values)
        assert "413" in refused, refused
        assert "unexpected shape" not in refused
        assert _infer_grpc(gateway, 4) == "ok"


def test_a_compressed_grpc_message_is_refused(gateway: gw.Gateway) -> None:
    """Its length on the wire says nothing of its size once Triton expands it. (gRPC
    sends a message uncompressed where compressing would not shrink it: these 32 KiB of
    ones shrink.)"""
    refused = _infer_grpc(gateway, 8192, compression="gzip")
    assert "413" in refused, refused
    assert "unexpected shape" not in refused
    assert "unexpected shape" in _infer_grpc(gateway, 8192)  # uncompressed: Triton's answer
