"""An API server that cannot be reached is an API error like any other transient one:
the controller retries the pass with backoff and logs one line, not a traceback."""

from __future__ import annotations

import socket

import pytest
from kubernetes import client

from shoal.kube.client import ApiError, Kube


def _closed_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # nothing listens once the socket closes


def test_an_unreachable_api_server_raises_an_api_error() -> None:
    configuration = client.Configuration()
    configuration.host = f"http://127.0.0.1:{_closed_port()}"
    configuration.retries = 0
    kube = Kube(client.ApiClient(configuration))
    with pytest.raises(ApiError) as raised:
        kube.get("v1", "ConfigMap", "any", "default")
    assert raised.value.status == 0
    assert "unreachable" in str(raised.value.reason)
