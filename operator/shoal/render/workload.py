"""The Triton serving stack of one InferenceModel: ConfigMap, Deployment, Service, PDB."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.common import parse_duration
from shoal.api.constants import KUEUE_QUEUE_LABEL
from shoal.api.inferencemodel import InferenceModel
from shoal.api.quantity import canonical_quantity, quantity_value
from shoal.api.scheduling import TopologySpreadConstraint
from shoal.api.tenantpool import TenantPoolSpec
from shoal.render import pod_overrides
from shoal.render.images import DEFAULT_IMAGES, ServingImages
from shoal.render.model_config import render_config_pbtxt, triton_completes_tensors
from shoal.render.model_fetch import MODEL_ROOT, fetch_plan, needs_network, repository_room
from shoal.render.names import (
    FETCH_CONTAINER,
    GRPC_PORT,
    HTTP_PORT,
    METRICS_PORT,
    MODEL_SOURCE_LABEL,
    SERVING_CONTAINER,
    config_map_name,
    model_labels,
    model_metadata,
    pool_priority_class,
    selector_labels,
)
from shoal.render.pool import priority_value
from shoal.render.security import container_security_context, pod_security_context

CHECKSUM_ANNOTATION = "shoal.dev/config-checksum"
STARTUP_PERIOD_SECONDS = 10
GRACE_SECONDS = 30
# Endpoints controllers and load balancers need a moment to stop sending new requests
# before Triton stops accepting them.
PRESTOP_SLEEP_SECONDS = 5
GPU = "nvidia.com/gpu"
# GPU Feature Discovery's label naming a node's GPU model (a pool's placement.gpuProduct).
GPU_PRODUCT_LABEL = "nvidia.com/gpu.product"
# A model's replicas spread over nodes where they can, unless the model says otherwise.
DEFAULT_SPREAD = (
    TopologySpreadConstraint(
        max_skew=1, topology_key="kubernetes.io/hostname", when_unsatisfiable="ScheduleAnyway"
    ),
)
# The response cache's size when the model does not say.
DEFAULT_CACHE_BYTES = 256 * 2**20


def config_map(model: InferenceModel, config_pbtxt: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": model_metadata(model, config_map_name(model)),
        "data": {"config.pbtxt": config_pbtxt},
    }


def checksum(*parts: object) -> str:
    blob = json.dumps(parts, sort_keys=True, default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def response_cache_bytes(model: InferenceModel) -> int | None:
    """Bytes of Triton's response cache; None when the model does not use the cache."""
    runtime = model.spec.runtime
    if not model.spec.model.response_cache:
        return None
    if runtime.response_cache_size is not None:
        return int(quantity_value(runtime.response_cache_size))
    return DEFAULT_CACHE_BYTES


def replica_memory(model: InferenceModel) -> str:
    """The memory a replica requests and is limited to: the spec's, plus the response
    cache, which Triton allocates on top of what the model needs."""
    memory = str(model.spec.runtime.memory)
    cache = response_cache_bytes(model)
    if cache is None:
        return memory
    total = quantity_value(memory) + cache
    return canonical_quantity(format(total.normalize(), "f"), resource_list=True)


def triton_args(model: InferenceModel) -> list[str]:
    cache = response_cache_bytes(model)
    # The model config's response_cache only marks the model as cacheable: the server
    # caches nothing unless it is started with a cache.
    cache_args = [f"--cache-config=local,size={cache}"] if cache is not None else []
    # Triton completes a config from the model's files unless told not to: only a model
    # that leaves its tensors to its files needs that (one model per server, so the
    # flag is the model's); every other loads exactly as rendered.
    strict = (
        [] if triton_completes_tensors(model.spec.model) else ["--disable-auto-complete-config"]
    )
    return [
        "tritonserver",
        f"--model-repository={MODEL_ROOT}",
        # Explicit control lets a later BatchPolicy change be loaded without a restart.
        "--model-control-mode=explicit",
        f"--load-model={model.spec.model.name}",
        *strict,
        "--strict-readiness=true",
        f"--http-port={HTTP_PORT}",
        f"--grpc-port={GRPC_PORT}",
        f"--metrics-port={METRICS_PORT}",
        "--allow-metrics=true",
        "--allow-gpu-metrics=true",
        "--metrics-config=summary_latencies=true",
        f"--exit-timeout-secs={GRACE_SECONDS - PRESTOP_SLEEP_SECONDS - 5}",
        *cache_args,
    ]


def triton_env(model: InferenceModel) -> list[dict[str, Any]]:
    """Triton's environment: the spec's, and for a vLLM engine HOME, under which it
    writes its caches (Triton kernels it compiles, Hugging Face and vLLM files); the
    image's home is on the read-only root filesystem, /tmp is the pod's own."""
    extra = [variable.to_wire() for variable in model.spec.runtime.env or ()]
    if model.spec.model.backend == "vllm":
        return [{"name": "HOME", "value": "/tmp"}, *extra]
    return extra


def triton_env_from(model: InferenceModel) -> list[dict[str, Any]]:
    return [source.to_wire() for source in model.spec.runtime.env_from or ()]


def proxy_env(pool: TenantPoolSpec) -> list[dict[str, str]]:
    """The fetch container's proxy settings in the pool's Proxy mode (rclone, like every
    Go program, reads HTTPS_PROXY, HTTP_PROXY and NO_PROXY); none otherwise."""
    download = pool.access.model_download
    if download.mode != "Proxy" or download.proxy is None:
        return []
    no_proxy = [
        "localhost",
        "127.0.0.1",
        "::1",
        *(d.cidr for d in download.extra_destinations),
        *download.proxy.no_proxy,
    ]
    return [
        {"name": "HTTPS_PROXY", "value": download.proxy.url},
        {"name": "HTTP_PROXY", "value": download.proxy.url},
        {"name": "NO_PROXY", "value": ",".join(dict.fromkeys(no_proxy))},
    ]


def _ephemeral_storage(request: str | None) -> dict[str, str]:
    """The ephemeral-storage request for the model's files, if they have a known size.
    No limit: the emptyDir's sizeLimit bounds the files, and a container's limit would
    also have to hold /tmp (a vLLM engine's caches) and its logs, which Shoal cannot
    size; exceeding it would evict the replica."""
    return {"ephemeral-storage": request} if request else {}


def _probe(path: str, period: int, failures: int) -> dict[str, Any]:
    return {
        "httpGet": {"path": path, "port": "http"},
        "periodSeconds": period,
        "failureThreshold": failures,
        "timeoutSeconds": 3,
    }


def deployment(
    model: InferenceModel,
    pool: TenantPoolSpec,
    config_pbtxt: str,
    images: ServingImages = DEFAULT_IMAGES,
    queue: str | None = None,
    parked: bool = False,
) -> dict[str, Any]:
    """The Triton Deployment. ``replicas`` is left out: the HPA owns it, except while
    the model is ``parked`` (its pool has fewer GPUs now than one replica needs): then
    it is 0, which also stops the HPA (it does not scale a target at zero). Unparked,
    the field is left out again, the server-side apply drops it with its last owner, the
    API server defaults it to 1 and the HPA scales from there.

    ``queue``: the Kueue LocalQueue of a pool with elastic capacity. Its pods then name
    the queue and carry no pool placement: Kueue admits each on a flavor of the pool's
    cohort and gives it that flavor's node labels and tolerations (shoal.render.elastic).
    """
    spec = model.spec
    runtime = spec.runtime
    name = model.metadata.name
    source = spec.model
    fetch = fetch_plan(source.storage_uri, source.name, source.s3, source.ca_bundle)
    room = repository_room(source.storage_uri, source.size)
    remote = needs_network(source.storage_uri)
    memory = replica_memory(model)
    limits: dict[str, Any] = {"memory": memory}
    if runtime.cpu_limit is not None:
        limits["cpu"] = runtime.cpu_limit
    if runtime.gpus:
        limits[GPU] = str(runtime.gpus)
    node_selector: dict[str, str] = {}
    tolerations: list[dict[str, Any]] = []
    if queue is None:
        node_selector.update(pool.placement.node_selector)
        if pool.placement.gpu_product:
            node_selector[GPU_PRODUCT_LABEL] = pool.placement.gpu_product
        tolerations += [t.to_wire() for t in pool.placement.tolerations]
    if runtime.gpus:
        # GPU nodes are commonly tainted so that only GPU workloads land there.
        tolerations.append({"key": GPU, "operator": "Exists", "effect": "NoSchedule"})

    model_mounts = [
        {"name": "model-repository", "mountPath": MODEL_ROOT},
        *fetch.serving_mounts,
        {
            "name": "model-config",
            "mountPath": f"{MODEL_ROOT}/{spec.model.name}/config.pbtxt",
            "subPath": "config.pbtxt",
            "readOnly": True,
        },
        {"name": "dshm", "mountPath": "/dev/shm"},
        {"name": "tmp", "mountPath": "/tmp"},
        *(pod_overrides.mount(extra) for extra in runtime.volumes or ()),
    ]
    triton = {
        "name": SERVING_CONTAINER,
        "image": runtime.image or images.triton_for(spec.model.backend),
        "imagePullPolicy": runtime.image_pull_policy,
        "args": [*triton_args(model), *(runtime.extra_args or ())],
        **({"env": env} if (env := triton_env(model)) else {}),
        **({"envFrom": env_from} if (env_from := triton_env_from(model)) else {}),
        "ports": [
            {"name": "http", "containerPort": HTTP_PORT, "protocol": "TCP"},
            {"name": "grpc", "containerPort": GRPC_PORT, "protocol": "TCP"},
            {"name": "metrics", "containerPort": METRICS_PORT, "protocol": "TCP"},
        ],
        "resources": {
            "requests": {
                "cpu": runtime.cpu,
                "memory": memory,
                **_ephemeral_storage(room.serving_request),
            },
            "limits": limits,
        },
        # Loading a large model can take minutes: the startup probe allows the model's
        # startupTimeout before the kubelet restarts the container.
        "startupProbe": _probe(
            "/v2/health/ready",
            STARTUP_PERIOD_SECONDS,
            math.ceil(parse_duration(runtime.startup_timeout) / STARTUP_PERIOD_SECONDS),
        ),
        "readinessProbe": _probe("/v2/health/ready", 5, 3),
        "livenessProbe": _probe("/v2/health/live", 10, 3),
        "lifecycle": {"preStop": {"sleep": {"seconds": PRESTOP_SLEEP_SECONDS}}},
        "securityContext": container_security_context(),
        # A Triton that exits on a model it cannot load says why in its last log lines:
        # they become the termination message the model's status quotes.
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": model_mounts,
    }
    fetch_container = {
        "name": FETCH_CONTAINER,
        "image": images.fetch,
        "imagePullPolicy": "IfNotPresent",
        "command": fetch.command,
        **({"args": fetch.args} if fetch.args else {}),
        "env": [
            {"name": "HOME", "value": "/tmp"},
            *(proxy_env(pool) if remote else []),
            *fetch.env,
        ],
        "resources": {
            "requests": {
                "cpu": "100m",
                "memory": "128Mi",
                **_ephemeral_storage(room.fetch_request),
            },
            "limits": {"memory": "1Gi"},
        },
        "securityContext": container_security_context(),
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": [
            {"name": "model-repository", "mountPath": MODEL_ROOT},
            {"name": "tmp", "mountPath": "/tmp"},
            *fetch.mounts,
        ],
    }
    volumes = [
        {
            "name": "model-repository",
            "emptyDir": {"sizeLimit": room.size_limit} if room.size_limit else {},
        },
        {"name": "model-config", "configMap": {"name": config_map_name(model)}},
        {"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": runtime.shm_size}},
        {"name": "tmp", "emptyDir": {}},
        *fetch.volumes,
        *(pod_overrides.volume(extra) for extra in runtime.volumes or ()),
    ]
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "enableServiceLinks": False,
        "priorityClassName": pool_priority_class(spec.pool),
        "securityContext": pod_security_context(),
        "terminationGracePeriodSeconds": GRACE_SECONDS,
        "initContainers": [fetch_container],
        "containers": [triton],
        "volumes": volumes,
    }
    spread = (
        DEFAULT_SPREAD
        if runtime.topology_spread_constraints is None
        else runtime.topology_spread_constraints
    )
    if spread:
        pod_spec["topologySpreadConstraints"] = pod_overrides.spread(spread, selector_labels(model))
    if (affinity := pod_overrides.affinity(runtime.affinity)) is not None:
        pod_spec["affinity"] = affinity
    if runtime.service_account_name:
        pod_spec["serviceAccountName"] = runtime.service_account_name
    if runtime.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [ref.to_wire() for ref in runtime.image_pull_secrets]
    if node_selector:
        pod_spec["nodeSelector"] = node_selector
    if tolerations:
        pod_spec["tolerations"] = tolerations
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": model_metadata(model, name),
        "spec": {
            **({"replicas": 0} if parked else {}),
            "selector": {"matchLabels": selector_labels(model)},
            "revisionHistoryLimit": 3,
            # Keep serving through config changes: add a replica, then retire one.
            "strategy": {
                "type": "RollingUpdate",
                "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
            },
            "template": {
                "metadata": {
                    # The spec's own first: none of Shoal's keys is allowed there.
                    "labels": {
                        **(runtime.pod_labels or {}),
                        **model_labels(model),
                        MODEL_SOURCE_LABEL: "network" if remote else "volume",
                        **({KUEUE_QUEUE_LABEL: queue} if queue else {}),
                    },
                    # The pool's priority is stamped on each pod when it is created: a
                    # change of it rolls the pods, like a change of their spec.
                    "annotations": {
                        **(runtime.pod_annotations or {}),
                        CHECKSUM_ANNOTATION: checksum(
                            config_pbtxt,
                            pod_spec,
                            priority_value(pool),
                            pool.priority.preemption_policy,
                        ),
                    },
                },
                "spec": pod_spec,
            },
        },
    }


def service(model: InferenceModel) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": model_metadata(model, model.metadata.name),
        "spec": {
            "type": "ClusterIP",
            "selector": selector_labels(model),
            "ports": [
                {"name": "http", "port": HTTP_PORT, "targetPort": "http", "protocol": "TCP"},
                {
                    "name": "grpc",
                    "port": GRPC_PORT,
                    "targetPort": "grpc",
                    "protocol": "TCP",
                    "appProtocol": "grpc",
                },
                {
                    "name": "metrics",
                    "port": METRICS_PORT,
                    "targetPort": "metrics",
                    "protocol": "TCP",
                },
            ],
        },
    }


def disruption_budget(model: InferenceModel) -> dict[str, Any]:
    """At most one replica down to voluntary disruptions (drains), never blocking them."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": model_metadata(model, model.metadata.name),
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": selector_labels(model)},
            "unhealthyPodEvictionPolicy": "AlwaysAllow",
        },
    }


def serving_stack(
    model: InferenceModel,
    batching: BatchPolicySpec,
    pool: TenantPoolSpec,
    images: ServingImages = DEFAULT_IMAGES,
    queue: str | None = None,
    parked: bool = False,
) -> list[dict[str, Any]]:
    """Every object of the model's serving stack except the autoscaler."""
    config_pbtxt = render_config_pbtxt(model, batching)
    return [
        config_map(model, config_pbtxt),
        deployment(model, pool, config_pbtxt, images, queue, parked),
        service(model),
        disruption_budget(model),
    ]
