"""What a model's spec.runtime adds to its pods (shoal.api.pod_overrides): it reaches the
pod in the Pod API's shape, after and apart from what Shoal sets; and every name Shoal
sets on a model's pods, for models of every shape, is one the API reserves, so no
override can replace it."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from shoal.api.inferencemodel import InferenceModel
from shoal.api.pod_overrides import (
    RESERVED_ANNOTATION_PREFIXES,
    RESERVED_ENV,
    RESERVED_LABEL_PREFIXES,
    RESERVED_LABELS,
    RESERVED_MOUNT_PATHS,
    RESERVED_TRITON_FLAGS,
    RESERVED_VOLUMES,
)
from shoal.api.tenantpool import TenantPool
from shoal.render.desired import model_objects
from shoal.render.model_plan import ModelFacts, PlanError, plan_model
from shoal.render.workload import CHECKSUM_ANNOTATION
from shoal.settings import Settings
from tests.support.resources import example

UID = "00000000-0000-0000-0000-000000000001"


def model_doc(name: str = "search-ranker", **runtime: Any) -> dict[str, Any]:
    doc = example("InferenceModel", name)
    doc["metadata"]["uid"] = UID
    doc["spec"].setdefault("runtime", {}).update(runtime)
    return doc


def pod_template(doc: dict[str, Any]) -> dict[str, Any]:
    model = InferenceModel.model_validate(doc)
    pool = TenantPool.model_validate(example("TenantPool", model.spec.pool))
    images = Settings.from_env({}).serving_images
    objects = model_objects(model, None, pool, None, images)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    template: dict[str, Any] = deployment["spec"]["template"]
    return template


def triton(template: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = template["spec"]["containers"][0]
    return container


def _shapes() -> dict[str, dict[str, Any]]:
    """Models whose pods differ in what Shoal sets on them."""
    vllm = model_doc("ads-ctr", gpus=1)
    vllm["spec"].pop("batchPolicy", None)
    vllm["spec"]["model"] = {
        "name": "chat",
        "backend": "vllm",
        "storageUri": "s3://models/chat",
    }
    cached = model_doc()
    cached["spec"]["model"]["responseCache"] = True
    claim = model_doc()
    claim["spec"]["model"]["storageUri"] = "pvc://model-store/ranker"
    s3 = model_doc()
    s3["spec"]["model"]["s3"] = {
        "endpoint": "http://minio.storage.svc:9000",
        "credentialsSecret": "store-keys",
    }
    archive = model_doc()
    archive["spec"]["model"].update(
        storageUri="https://files.example/ranker.tar.gz",
        size="12Gi",
        caBundle={"name": "corporate-ca"},
    )
    shapes = {
        f"example-{doc['metadata']['name']}": model_doc(doc["metadata"]["name"])
        for doc in (
            example("InferenceModel", n) for n in ("search-ranker", "ads-ctr", "labs-embedder")
        )
    }
    return shapes | {"vllm": vllm, "cache": cached, "claim": claim, "s3": s3, "archive": archive}


SHAPES = _shapes()


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_every_name_shoal_sets_on_a_models_pods_is_reserved(shape: str) -> None:
    template = pod_template(SHAPES[shape])
    server = triton(template)
    for key in template["metadata"]["labels"]:
        assert key in RESERVED_LABELS or key.startswith(RESERVED_LABEL_PREFIXES), key
    for key in template["metadata"]["annotations"]:
        assert key.startswith(RESERVED_ANNOTATION_PREFIXES), key
    flags = {arg.removeprefix("--").split("=", 1)[0] for arg in server["args"][1:]}
    assert flags <= set(RESERVED_TRITON_FLAGS), flags - set(RESERVED_TRITON_FLAGS)
    assert {e["name"] for e in server.get("env", [])} <= set(RESERVED_ENV)
    volumes = {v["name"] for v in template["spec"]["volumes"]}
    assert volumes <= set(RESERVED_VOLUMES), volumes - set(RESERVED_VOLUMES)
    for mount in server["volumeMounts"]:
        path = mount["mountPath"]
        assert any(path == p or path.startswith(f"{p}/") for p in RESERVED_MOUNT_PATHS), path


def test_a_kueue_queued_models_labels_are_reserved_too() -> None:
    doc = model_doc()
    model = InferenceModel.model_validate(doc)
    pool_doc = example("TenantPool", model.spec.pool)
    pool_doc["spec"]["capacity"] = {"gpus": 4}
    pool = TenantPool.model_validate(pool_doc)
    images = Settings.from_env({}).serving_images
    queue = "shoal-" + model.spec.pool
    objects = model_objects(model, None, pool, None, images, queue=queue)
    deployment = next(o for o in objects if o["kind"] == "Deployment")
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert any(k.startswith(RESERVED_LABEL_PREFIXES[1]) for k in labels)
    for key in labels:
        assert key in RESERVED_LABELS or key.startswith(RESERVED_LABEL_PREFIXES), key


OVERRIDES: dict[str, Any] = {
    "podLabels": {"example.com/team": "search", "tier": "gold"},
    "podAnnotations": {"example.com/cost-center": "42"},
    "env": [
        {"name": "LOG_LEVEL", "value": "1"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "keys", "key": "token"}}},
    ],
    "envFrom": [{"configMapRef": {"name": "model-env"}, "prefix": "MODEL_"}],
    "extraArgs": ["--log-verbose=1", "--backend-config=python,shm-default-byte-size=16777216"],
    "volumes": [
        {"name": "extra-config", "mountPath": "/etc/triton/extra", "configMap": {"name": "cfg"}},
        {"name": "scratch", "mountPath": "/scratch", "emptyDir": {"sizeLimit": "1Gi"}},
        {
            "name": "weights",
            "mountPath": "/opt/weights",
            "persistentVolumeClaim": {"claimName": "weights"},
            "readOnly": False,
        },
        {
            "name": "keys",
            "mountPath": "/etc/keys",
            "subPath": "tls",
            "secret": {"secretName": "keys"},
        },
    ],
}


def test_the_overrides_reach_the_pod_after_and_apart_from_shoals() -> None:
    plain = pod_template(model_doc())
    template = pod_template(model_doc(**OVERRIDES))
    labels, annotations = template["metadata"]["labels"], template["metadata"]["annotations"]
    assert labels == {**plain["metadata"]["labels"], **OVERRIDES["podLabels"]}
    assert annotations["example.com/cost-center"] == "42"
    assert CHECKSUM_ANNOTATION in annotations
    server, before = triton(template), triton(plain)
    assert server["args"] == [*before["args"], *OVERRIDES["extraArgs"]]
    assert server["env"] == OVERRIDES["env"]
    assert server["envFrom"] == OVERRIDES["envFrom"]
    assert "envFrom" not in before
    assert "env" not in before
    added = template["spec"]["volumes"][len(plain["spec"]["volumes"]) :]
    assert added == [
        {"name": "extra-config", "configMap": {"name": "cfg"}},
        {"name": "scratch", "emptyDir": {"sizeLimit": "1Gi"}},
        {"name": "weights", "persistentVolumeClaim": {"claimName": "weights", "readOnly": False}},
        {"name": "keys", "secret": {"secretName": "keys"}},
    ]
    mounts = server["volumeMounts"][len(before["volumeMounts"]) :]
    assert mounts == [
        {"name": "extra-config", "mountPath": "/etc/triton/extra", "readOnly": True},
        {"name": "scratch", "mountPath": "/scratch", "readOnly": False},  # scratch space
        {"name": "weights", "mountPath": "/opt/weights", "readOnly": False},
        {"name": "keys", "mountPath": "/etc/keys", "subPath": "tls", "readOnly": True},
    ]
    # Shoal's own are untouched, and a change of the pod's spec rolls its replicas.
    assert template["spec"]["volumes"][: len(plain["spec"]["volumes"])] == plain["spec"]["volumes"]
    assert annotations[CHECKSUM_ANNOTATION] != plain["metadata"]["annotations"][CHECKSUM_ANNOTATION]


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("podLabels", {"shoal.dev/gateway": "shared"}),
        ("podLabels", {"app.kubernetes.io/name": "x"}),
        ("podLabels", {"kueue.x-k8s.io/queue-name": "other"}),
        ("podAnnotations", {"shoal.dev/config-checksum": "x"}),
        ("env", [{"name": "HOME", "value": "/root"}]),
        ("extraArgs", ["--http-port=9000"]),
        ("extraArgs", ["--model-control-mode=poll"]),
        ("extraArgs", ["--strict-model-config"]),
        ("volumes", [{"name": "tmp", "mountPath": "/etc/x", "emptyDir": {"sizeLimit": "1Gi"}}]),
        ("volumes", [{"name": "x", "mountPath": "/models", "emptyDir": {"sizeLimit": "1Gi"}}]),
        ("volumes", [{"name": "x", "mountPath": "/dev", "emptyDir": {"sizeLimit": "1Gi"}}]),
        ("volumes", [{"name": "x", "mountPath": "/tmp/cache", "emptyDir": {"sizeLimit": "1Gi"}}]),
    ],
)
def test_what_shoal_sets_cannot_be_overridden(field: str, value: Any) -> None:
    with pytest.raises(ValueError, match=r"Shoal|Kueue"):
        InferenceModel.model_validate(model_doc(**{field: value}))


def test_flags_that_only_start_like_a_reserved_one_are_allowed() -> None:
    doc = model_doc(extraArgs=["--http-thread-count=8", "--model-load-thread-count=2"])
    server = triton(pod_template(doc))
    assert server["args"][-2:] == ["--http-thread-count=8", "--model-load-thread-count=2"]


def test_the_cpu_limit_is_tritons_alone() -> None:
    plain = pod_template(model_doc())
    template = pod_template(model_doc(cpu="2", cpuLimit="4"))
    server, before = triton(template), triton(plain)
    assert "cpu" not in before["resources"]["limits"]
    assert server["resources"]["limits"] == {**before["resources"]["limits"], "cpu": "4"}
    assert server["resources"]["requests"] == before["resources"]["requests"]
    assert template["spec"]["initContainers"] == plain["spec"]["initContainers"]


def test_the_cpu_limit_is_written_as_the_api_server_stores_it() -> None:
    server = triton(pod_template(model_doc(cpu=0.5, cpuLimit=1.5)))
    assert server["resources"]["limits"]["cpu"] == "1500m"
    server = triton(pod_template(model_doc(cpu="1", cpuLimit="1000m")))
    assert server["resources"]["limits"]["cpu"] == "1"


def _plan(doc: dict[str, Any]) -> Any:
    model = InferenceModel.model_validate(doc)
    pool = TenantPool.model_validate(example("TenantPool", model.spec.pool))
    return plan_model(model, pool, None, ModelFacts(now=dt.datetime(2026, 1, 5, tzinfo=dt.UTC)))


@pytest.mark.parametrize(
    ("runtime", "words"),
    [
        ({"cpu": "2", "cpuLimit": "1500m"}, "must be at least spec.runtime.cpu (2), not 1500m"),
        ({"cpu": 1.5, "cpuLimit": 1}, "must be at least spec.runtime.cpu (1500m), not 1"),
        ({"cpuLimit": "1"}, "(2)"),  # cpu's default
    ],
)
def test_a_cpu_limit_below_the_request_is_refused_before_rendering(
    runtime: dict[str, Any], words: str
) -> None:
    """The CRD cannot compare them (cpu also takes numbers, which CEL cannot type); the
    Pod API would refuse the Deployment, so the plan refuses the model, in its words."""
    with pytest.raises(PlanError) as err:
        _plan(model_doc(**runtime))
    assert err.value.reason == "InvalidResources"
    assert str(err.value).startswith("spec.runtime.cpuLimit: ")
    assert words in str(err.value)


def test_a_cpu_limit_equal_to_the_request_is_planned() -> None:
    assert _plan(model_doc(cpu="2", cpuLimit="2000m")).objects
