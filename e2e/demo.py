"""``make demo``: Shoal running against a cluster, from nothing.

Uses the cluster $KUBECONFIG points at when it is reachable; otherwise starts (or
reuses) the local one. Installs the CRDs and admission policy with server-side apply,
and the gateways' namespace and identity, then runs the operator in the foreground
until Ctrl-C. The local cluster keeps running afterwards; stop it with
``make cluster-down``.

On the local cluster the demo also serves e2e/demo.yaml and sends a request through
the pool's gateway: KWOK's pods run nothing, so a real tritonserver stands for each of
the model's pods and a real haproxy, on the configuration the operator rendered, for
each of the gateway's pods (as in the tests).
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
from kubernetes import client

from e2e.cluster.target import Target, resolve_target
from e2e.gateway_pods import GatewayPods, service_account_token
from e2e.install import Kubectl, install_crds, kubectl_for
from e2e.linear_model import BODY
from e2e.monitoring import PodBackers, Prometheus
from e2e.process import stop
from shoal.render.gateway import DEFAULT_GATEWAY_NAMESPACE, GatewaySite, audience, gateway_host

REPO = Path(__file__).resolve().parent.parent
OBJECTS = REPO / "e2e" / "demo.yaml"
GATEWAYS = REPO / "manifests" / "base" / "gateways.yaml"
NAMESPACE, POOL, MODEL = "shoal-demo", "demo", "linear"
CALLER = "caller"


def say(message: str) -> None:
    print(f"shoal demo: {message}", flush=True)


def _until(what: str, probe: Any, timeout: float = 180) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = probe()
        except client.ApiException:
            value = None
        if value:
            return value
        time.sleep(1)
    raise TimeoutError(f"{what} did not happen within {timeout:.0f}s")


def _model_ready(custom: client.CustomObjectsApi) -> dict[str, Any] | None:
    model: dict[str, Any] = custom.get_namespaced_custom_object(  # type: ignore[assignment]
        "shoal.dev", "v1alpha1", NAMESPACE, "inferencemodels", MODEL
    )
    conditions = (model.get("status") or {}).get("conditions") or []
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)
    return model if ready else None


@contextmanager
def gateway_showcase(target: Target, kubectl: Kubectl, workdir: Path) -> Iterator[None]:
    """Serves e2e/demo.yaml on the local cluster and sends one request through the
    pool's gateway; the processes standing for the pods run until the block ends."""

    kubectl("apply", "--server-side", f"--filename={OBJECTS}")
    api = target.api_client()
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    say(f"applied {OBJECTS.relative_to(REPO)}; waiting for InferenceModel {MODEL} to be Ready")
    model = _until("the model to be Ready", lambda: _model_ready(custom))
    targets = Prometheus(workdir / "targets")  # its target files only: nothing scrapes here
    targets.workdir.mkdir(parents=True, exist_ok=True)
    with ExitStack() as stack:
        backers = PodBackers.for_rendered(core, NAMESPACE, MODEL, targets, workdir)
        stack.callback(backers.stop)
        gateways = GatewayPods(
            core, POOL, DEFAULT_GATEWAY_NAMESPACE, workdir / "gateways", [backers]
        ).start()
        stack.callback(gateways.stop)
        say("starting a tritonserver for the model's pod and a haproxy for the gateway's pod")
        bearer = service_account_token(core, NAMESPACE, audience(POOL), CALLER, seconds=3600)
        path = f"/v2/models/{MODEL}/infer"

        def served() -> httpx.Response | None:
            urls = gateways.urls()
            if not urls or not backers.http_urls():
                return None
            reply = httpx.post(
                urls[0] + path, json=BODY, headers={"Authorization": f"Bearer {bearer}"}
            )
            return reply if reply.status_code == 200 else None

        reply = _until("a request through the gateway", served)
        url = gateways.urls()[0]
        refused = httpx.post(url + path, json=BODY)
        host = gateway_host(POOL, GatewaySite())
        endpoint = model["status"]["endpoints"]["gateway"]
        say(f"InferenceModel {MODEL} says its gateway URL is {endpoint}")
        say(f"the haproxy standing for the gateway's pod ({host}:8000) listens on {url}")
        say(
            f"POST {path} with the token of ServiceAccount {NAMESPACE}/{CALLER} -> "
            f"{reply.status_code} {json.dumps(reply.json()['outputs'][0]['data'])} "
            f"X-Request-ID {reply.headers.get('X-Request-ID')}"
        )
        say(f"the same without a token -> {refused.status_code}")
        body = shlex.quote(json.dumps(BODY))
        kube = f"kubectl --kubeconfig={target.kubeconfig}"
        say("try it yourself, from another shell:")
        print(
            f"  TOKEN=$({kube} create token {CALLER} -n {NAMESPACE} --audience {audience(POOL)})\n"
            f'  curl -s {url}{path} -H "Authorization: Bearer $TOKEN" -d {body}',
            flush=True,
        )
        yield


def main() -> int:
    target = resolve_target()
    kubeconfig = str(target.kubeconfig)
    where = "local cluster" if target.local else "cluster from $KUBECONFIG"
    say(f"using the {where} ({kubeconfig})")
    kubectl = kubectl_for(target.kubeconfig)
    install_crds(kubectl)
    # The namespace the pools' gateways run in, their ServiceAccount and the rights the
    # operator has there (the rest of manifests/base is the operator's own Deployment,
    # which this demo runs in the foreground instead).
    kubectl("apply", "--server-side", "--force-conflicts", f"--filename={GATEWAYS}")
    say(f"CRDs, admission policy and {GATEWAYS.relative_to(REPO)} applied")
    env = dict(os.environ, KUBECONFIG=kubeconfig)
    env.setdefault("SHOAL_LIVENESS_ENDPOINT", "http://127.0.0.1:8080/healthz")
    shoal = Path(sys.executable).parent / "shoal"
    operator = subprocess.Popen([str(shoal), "run"], env=env)
    say(f"operator started; in another shell: export KUBECONFIG={kubeconfig}")
    # A supervisor's (or timeout's) SIGTERM stops the demo like Ctrl-C: the
    # tritonserver and haproxy it started go with it instead of outliving it.
    signal.signal(signal.SIGTERM, lambda *_: signal.raise_signal(signal.SIGINT))
    try:
        with ExitStack() as stack:
            if target.local:
                workdir = Path(tempfile.mkdtemp(prefix="shoal-demo-"))
                try:
                    stack.enter_context(gateway_showcase(target, kubectl, workdir))
                except Exception as error:  # the operator keeps running regardless
                    say(f"the gateway request did not go through: {error}")
            say("the operator runs until Ctrl-C")
            return operator.wait()
    except KeyboardInterrupt:
        return 0
    finally:
        stop(operator, grace=15)


if __name__ == "__main__":
    sys.exit(main())
