"""kopf handlers: thin glue from watch events and a periodic resync to the Controller.

Handlers only put the affected object's key on the controller's work queue, whose
worker threads run the (blocking) reconciles; a burst of events for one object costs
one pass. No handler raises for bad input: reconcilers report problems in status
conditions and Events instead.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf
import prometheus_client

from shoal import __version__
from shoal.controller import Controller
from shoal.kube.client import Kube, load_api_client
from shoal.metrics.reader import MetricsReader
from shoal.settings import Settings
from shoal.telemetry import MANAGED, STALE_WATCH, stale_keys
from shoal.watch_filter import WatchFilter

GROUP, VERSION = "shoal.dev", "v1alpha1"
MANAGED_LABELS = {"app.kubernetes.io/managed-by": "shoal"}
_settings = Settings.from_env()
_controller: Controller | None = None
_changes = WatchFilter()
_resync_task: asyncio.Task[None] | None = None


def controller() -> Controller:
    assert _controller is not None, "the operator has not started"
    return _controller


@kopf.on.startup()
async def start(logger: logging.Logger | logging.LoggerAdapter[Any], **_: Any) -> None:
    global _controller, _resync_task
    if _settings.metrics_port:
        prometheus_client.start_http_server(_settings.metrics_port)
    reader = MetricsReader(_settings.prometheus_url) if _settings.prometheus_url else None
    kube = Kube(load_api_client(), known=_changes)
    _controller = Controller(kube, reader, workers=_settings.workers)
    _controller.start()
    _resync_task = asyncio.create_task(_resync_forever())
    logger.info(
        "shoal operator %s started (resync every %ss)", __version__, _settings.resync_seconds
    )


@kopf.on.cleanup()
async def stop(**_: Any) -> None:
    if _resync_task is not None:
        _resync_task.cancel()
    if _controller is not None:
        _controller.stop()


async def _resync_forever() -> None:
    """The level-triggered backstop: every object is re-checked periodically even when
    no event arrives. One loop for the whole operator, not a kopf timer per object:
    per-object timers make kopf put a finalizer on every model, which would block
    namespace deletion whenever the operator is down."""
    loop = asyncio.get_running_loop()
    while True:
        # Wake early when a scheduled window opens or closes, to move the HPA's floor
        # on time (a second after the boundary, so the window is seen open or closed).
        delay = _settings.resync_seconds
        boundary = controller().seconds_to_next_window_change()
        if boundary is not None:
            delay = min(delay, boundary + 1.0)
        await asyncio.sleep(delay)
        try:
            await loop.run_in_executor(None, controller().resync_all)
        except Exception:
            logging.getLogger(__name__).exception("periodic resync failed")


@kopf.on.probe(id="version")
def version_probe(**_: Any) -> str:
    return __version__


@kopf.index(GROUP, VERSION, "inferencemodels")
def watched_models(
    namespace: str | None, name: str, meta: kopf.Meta, **_: Any
) -> dict[tuple[str, str], str]:
    """What the watch has delivered: each model's latest resourceVersion."""
    return {(namespace or "", name): str(meta.get("resourceVersion", ""))}


_behind: dict[tuple[str, str], float] = {}


@kopf.on.probe(id="watch")  # type: ignore[arg-type]  # kopf passes indexes by name
def watch_freshness(watched_models: kopf.Index[tuple[str, str], str], **_: Any) -> int:
    """Liveness that proves the watch is fresh, not just that the process lives: models
    the API server lists at a version the watch never delivered, for longer than the
    allowance, fail the probe and so restart the operator."""
    listed = {
        (m["metadata"]["namespace"], m["metadata"]["name"]): m["metadata"]["resourceVersion"]
        for m in controller().kube.list_metadata("shoal.dev/v1alpha1", "InferenceModel")
    }
    watched = {key: next(iter(versions)) for key, versions in watched_models.items()}
    behind = stale_keys(listed, watched, _behind)
    late = {key: age for key, age in behind.items() if age > _settings.watch_stale_seconds}
    STALE_WATCH.set(len(late))
    MANAGED.labels("InferenceModel").set(len(listed))
    if late:
        raise kopf.PermanentError(f"the watch missed {len(late)} model update(s): {sorted(late)}")
    return len(listed)


# ---------------------------------------------------------------------- InferenceModel
@kopf.on.event(GROUP, VERSION, "inferencemodels")
def model_event(
    type: str, namespace: str | None, name: str, spec: kopf.Spec, body: kopf.Body, **_: Any
) -> None:
    if not _changes.relevant(type, "InferenceModel", dict(body)):
        return
    if type == "DELETED":
        # Its pool may be waiting for its last model before it can go.
        controller().request_pool(str(spec.get("pool", "")))
    else:
        controller().request_model(namespace or "", name)


# ---------------------------------------------------------------------- BatchPolicy
@kopf.on.event(GROUP, VERSION, "batchpolicies")
def policy_event(type: str, namespace: str | None, name: str, body: kopf.Body, **_: Any) -> None:
    if not _changes.relevant(type, "BatchPolicy", dict(body)):
        return
    # A deleted policy leaves its models without one: they report it in status.
    controller().request_policy(namespace or "", name)


# ---------------------------------------------------------------------- TenantPool
@kopf.on.event(GROUP, VERSION, "tenantpools")
def pool_event(type: str, name: str, body: kopf.Body, **_: Any) -> None:
    if not _changes.relevant(type, "TenantPool", dict(body)):
        return
    controller().request_pool(name)


@kopf.on.event("", "v1", "namespaces")
def namespace_event(type: str | None, **_: Any) -> None:
    # Pools admit namespaces by name and by label: any change may admit or release one.
    # The models there are re-checked by their own resync.
    if type in ("ADDED", "MODIFIED", "DELETED"):
        controller().request_all_pools()


# ---------------------------------------------------------------------- children
def _child_handler(kind: str) -> Any:
    def on_child_event(type: str | None, body: kopf.Body, **_: Any) -> None:
        if _changes.relevant(type, kind, dict(body)):
            controller().owner_of({"metadata": dict(body.get("metadata", {}))})

    return on_child_event


for _group_version, _plural, _kind in (
    ("apps/v1", "deployments", "Deployment"),
    ("v1", "services", "Service"),
    ("v1", "configmaps", "ConfigMap"),
    ("policy/v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    ("autoscaling/v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
):
    _group, _, _version = _group_version.rpartition("/")
    kopf.on.event(_group, _version, _plural, labels=MANAGED_LABELS, id=f"child-{_plural}")(
        _child_handler(_kind)
    )
