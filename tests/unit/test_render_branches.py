"""Branches of the renderers that the examples (and the golden file) never take.

Each test pins down a value that a small change of the branch (a flipped comparison, a
constant off by one, a dropped key) would change: a mutation run over render/ with only
the older tests let such changes through.
"""

from __future__ import annotations

import copy
import dataclasses
from decimal import Decimal
from typing import Any

import pytest
from google.protobuf import text_format
from tritonclient.grpc import model_config_pb2 as pb

from shoal.api.batchpolicy import BatchPolicySpec
from shoal.api.inferencemodel import InferenceModel
from shoal.api.quantity import quantity_value
from shoal.api.tenantpool import TenantPool
from shoal.render import names
from shoal.render.access import (
    AccessProblem,
    access_condition,
    access_problems,
)
from shoal.render.autoscaler import horizontal_autoscaler, max_replicas, target_queue_depth
from shoal.render.batching import effective_batching
from shoal.render.desired import model_objects
from shoal.render.documents import RenderError, render_documents
from shoal.render.model_config import model_config, render_config_pbtxt
from shoal.render.model_fetch import fetch_plan, needs_network
from shoal.render.names import model_metadata, owner_references
from shoal.render.workload import deployment
from tests.support.resources import example, example_documents

UID = "00000000-0000-0000-0000-000000000001"


def model_doc(name: str = "search-ranker") -> dict[str, Any]:
    doc = example("InferenceModel", name)
    doc["metadata"]["uid"] = UID
    return doc


def parse_model(doc: dict[str, Any]) -> InferenceModel:
    return InferenceModel.model_validate(doc)


def tenant_pool(name: str = "critical", **quota: int) -> TenantPool:
    doc = example("TenantPool", name)
    doc["spec"]["quota"].update(quota)
    return TenantPool.model_validate(doc)


def batch_policy(**spec: Any) -> BatchPolicySpec:
    return BatchPolicySpec.model_validate(spec)


def hpa(
    im: InferenceModel,
    batching: BatchPolicySpec | None = None,
    tp: TenantPool | None = None,
    min_replicas: int | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = horizontal_autoscaler(
        im, batching or BatchPolicySpec(), (tp or tenant_pool()).spec, min_replicas
    )["spec"]
    return spec


def scaled(gpus: int, max_replicas: int = 6, min_replicas: int = 1) -> InferenceModel:
    doc = model_doc()
    doc["spec"]["runtime"] = {"gpus": gpus}
    doc["spec"]["scaling"] = {"minReplicas": min_replicas, "maxReplicas": max_replicas}
    return parse_model(doc)


# ------------------------------------------------------------------ maxReplicas


def test_a_cpu_only_model_is_not_capped_by_the_gpu_quota() -> None:
    im = scaled(gpus=0, max_replicas=50)
    assert max_replicas(im, tenant_pool(gpus=1).spec) == 50
    assert max_replicas(im, tenant_pool(gpus=0).spec) == 50


@pytest.mark.parametrize(
    ("gpus", "quota", "ceiling"),
    [
        (1, 8, 6),  # the quota holds more than the spec asks: the spec's maximum
        (1, 6, 6),  # exactly enough
        (1, 5, 5),  # one short
        (2, 7, 3),  # whole replicas only: 7 GPUs hold 3 replicas of 2
        (2, 8, 4),
        (3, 9, 3),
    ],
)
def test_max_replicas_is_capped_by_whole_replicas_of_the_quota(
    gpus: int, quota: int, ceiling: int
) -> None:
    im = scaled(gpus=gpus)
    got = max_replicas(im, tenant_pool(gpus=quota).spec)
    assert got == ceiling
    assert isinstance(got, int)
    assert hpa(im, tp=tenant_pool(gpus=quota))["maxReplicas"] == ceiling


def test_a_quota_smaller_than_one_replica_still_allows_one() -> None:
    """The HPA refuses maxReplicas 0; the quota then keeps the pod Pending, which the
    model's status reports."""
    assert max_replicas(scaled(gpus=2), tenant_pool(gpus=1).spec) == 1
    assert max_replicas(scaled(gpus=4), tenant_pool(gpus=0).spec) == 1


def test_the_warm_pool_wins_over_the_quota_cap() -> None:
    im = scaled(gpus=2, max_replicas=6, min_replicas=3)
    assert max_replicas(im, tenant_pool(gpus=2).spec) == 3
    spec = hpa(im, tp=tenant_pool(gpus=2))
    assert (spec["minReplicas"], spec["maxReplicas"]) == (3, 3)


def test_a_scheduled_floor_is_kept_within_the_ceiling() -> None:
    im = scaled(gpus=1, max_replicas=6, min_replicas=2)
    assert hpa(im, tp=tenant_pool(gpus=8), min_replicas=5)["minReplicas"] == 5
    assert hpa(im, tp=tenant_pool(gpus=4), min_replicas=5)["minReplicas"] == 4
    assert hpa(im, tp=tenant_pool(gpus=8))["minReplicas"] == 2


# ------------------------------------------------------------------ behaviour


def test_max_replicas_per_step_limits_each_direction_in_pods() -> None:
    doc = model_doc()
    doc["spec"]["scaling"]["scaleUp"] = {"stabilizationWindow": "30s", "maxReplicasPerStep": 3}
    doc["spec"]["scaling"]["scaleDown"] = {"stabilizationWindow": "10m", "maxReplicasPerStep": 1}
    behavior = hpa(parse_model(doc))["behavior"]
    assert behavior == {
        "scaleUp": {
            "stabilizationWindowSeconds": 30,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 3, "periodSeconds": 15}],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 600,
            "selectPolicy": "Max",
            "policies": [{"type": "Pods", "value": 1, "periodSeconds": 15}],
        },
    }


def test_default_policies_double_or_add_four_up_and_halve_down() -> None:
    doc = model_doc()
    doc["spec"]["scaling"] = {"minReplicas": 1, "maxReplicas": 6}
    behavior = hpa(parse_model(doc))["behavior"]
    assert behavior == {
        "scaleUp": {
            "stabilizationWindowSeconds": 0,
            "selectPolicy": "Max",
            "policies": [
                {"type": "Percent", "value": 100, "periodSeconds": 15},
                {"type": "Pods", "value": 4, "periodSeconds": 15},
            ],
        },
        "scaleDown": {
            "stabilizationWindowSeconds": 300,
            "selectPolicy": "Max",
            "policies": [{"type": "Percent", "value": 100, "periodSeconds": 15}],
        },
    }


def test_a_step_limit_in_one_direction_leaves_the_other_at_its_default() -> None:
    doc = model_doc()
    doc["spec"]["scaling"]["scaleDown"] = {"stabilizationWindow": "1m", "maxReplicasPerStep": 2}
    behavior = hpa(parse_model(doc))["behavior"]
    assert [p["type"] for p in behavior["scaleUp"]["policies"]] == ["Percent", "Pods"]
    assert behavior["scaleDown"]["policies"] == [{"type": "Pods", "value": 2, "periodSeconds": 15}]


# ------------------------------------------------------------------ metric targets


def queue_target(spec: dict[str, Any]) -> str:
    target: str = spec["metrics"][0]["pods"]["target"]["averageValue"]
    return target


@pytest.mark.parametrize(
    ("max_batch", "target"),
    [(1, 1), (2, 1), (3, 1), (4, 1), (7, 1), (8, 2), (10, 2), (11, 2), (12, 3), (64, 16)],
)
def test_the_default_queue_target_is_a_whole_quarter_batch_and_never_below_one(
    max_batch: int, target: int
) -> None:
    doc = model_doc()
    doc["spec"]["scaling"] = {"minReplicas": 1, "maxReplicas": 4}
    doc["spec"]["model"]["warmup"] = {"batchSizes": [1]}
    im = parse_model(doc)
    batching = batch_policy(maxBatchSize=max_batch)
    assert target_queue_depth(im, batching) == target
    assert queue_target(hpa(im, batching)) == str(target)


def test_an_explicit_queue_target_wins_over_the_batch() -> None:
    doc = model_doc()
    doc["spec"]["scaling"]["targetQueueDepth"] = 3
    im = parse_model(doc)
    assert target_queue_depth(im, batch_policy(maxBatchSize=64)) == 3
    assert queue_target(hpa(im, batch_policy(maxBatchSize=2))) == "3"


def p95_target(latency: str) -> str:
    doc = model_doc()
    doc["spec"]["scaling"]["targetP95Latency"] = latency
    metrics = hpa(parse_model(doc))["metrics"]
    assert [m["type"] for m in metrics] == ["Pods", "Object", "Object"]
    obj = metrics[1]["object"]
    assert obj["describedObject"] == {
        "apiVersion": "v1",
        "kind": "Service",
        "name": "search-ranker",
    }
    assert obj["metric"] == {"name": "shoal_request_p95_seconds"}
    assert obj["target"]["type"] == "Value"
    value: str = obj["target"]["value"]
    return value


@pytest.mark.parametrize(
    ("latency", "quantity", "seconds"),
    [
        # Canonical quantities: the API server stores 2000m as "2", 1500m as "1500m".
        ("2s", "2", Decimal(2)),
        ("1.5s", "1500m", Decimal("1.5")),
        ("1m30s", "90", Decimal(90)),
        ("1h", "3600", Decimal(3600)),
        ("50ms", "50m", Decimal("0.05")),
        ("1ms", "1m", Decimal("0.001")),
        ("1.001s", "1001m", Decimal("1.001")),
        ("999ms", "999m", Decimal("0.999")),
        # Sub-millisecond parts: the HPA works in milli-units; the part is dropped, so
        # the target is never looser than asked, and never below 1ms.
        ("1400us", "1m", Decimal("0.001")),
        ("1600us", "1m", Decimal("0.001")),
        ("2ms300us", "2m", Decimal("0.002")),
        ("2500us", "2m", Decimal("0.002")),
        ("3500us", "3m", Decimal("0.003")),
    ],
)
def test_p95_targets_are_exact_milliseconds(latency: str, quantity: str, seconds: Decimal) -> None:
    rendered = p95_target(latency)
    assert rendered == quantity
    assert quantity_value(rendered) == seconds


def test_without_a_p95_target_only_the_queues_are_watched() -> None:
    doc = model_doc()
    del doc["spec"]["scaling"]["targetP95Latency"]
    metrics = hpa(parse_model(doc))["metrics"]
    assert [m["type"] for m in metrics] == ["Pods", "Object"]
    assert metrics[1]["object"]["metric"] == {"name": "shoal_gateway_queue_depth"}


def test_the_gateways_queue_is_watched_per_replica_when_the_pool_has_one() -> None:
    doc = model_doc()
    doc["spec"]["scaling"]["targetQueueDepth"] = 6
    model = parse_model(doc)
    gateway = hpa(model)["metrics"][-1]["object"]
    assert gateway["describedObject"] == {
        "apiVersion": "v1",
        "kind": "Service",
        "name": "search-ranker",
    }
    assert gateway["metric"] == {"name": "shoal_gateway_queue_depth"}
    # Per replica, like Triton's own queue: the HPA divides by the replicas it has.
    assert gateway["target"] == {"type": "AverageValue", "averageValue": "6"}
    pool = example("TenantPool", "critical")
    pool["spec"]["gateway"] = {"enabled": False}
    without = hpa(model, tp=TenantPool.model_validate(pool))["metrics"]
    names = [(m.get("object") or m["pods"])["metric"]["name"] for m in without]
    assert names == ["shoal_queue_depth", "shoal_request_p95_seconds"]


# ------------------------------------------------------------------ priorities


def dynamic_batching(im: InferenceModel, policy: BatchPolicySpec | None) -> pb.ModelDynamicBatching:
    config = text_format.Parse(
        render_config_pbtxt(im, effective_batching(im, policy)), pb.ModelConfig()
    )
    batching: pb.ModelDynamicBatching = config.dynamic_batching
    return batching


def without_batch_overrides() -> dict[str, Any]:
    doc = model_doc()
    doc["spec"]["batchPolicy"] = {"name": "lanes"}
    doc["spec"]["model"]["warmup"] = {"batchSizes": [1]}
    return doc


def test_the_default_priority_is_the_lowest_level_unless_set() -> None:
    im = parse_model(without_batch_overrides())
    batching = dynamic_batching(im, batch_policy(priorityLevels=3))
    assert (batching.priority_levels, batching.default_priority_level) == (3, 3)
    batching = dynamic_batching(im, batch_policy(priorityLevels=3, defaultPriority=2))
    assert (batching.priority_levels, batching.default_priority_level) == (3, 2)
    batching = dynamic_batching(im, batch_policy(priorityLevels=3, defaultPriority=1))
    assert batching.default_priority_level == 1


def test_the_models_default_priority_overrides_its_policys() -> None:
    doc = without_batch_overrides()
    doc["spec"]["batchPolicy"]["defaultPriority"] = 1
    im = parse_model(doc)
    policy = batch_policy(priorityLevels=4, defaultPriority=3)
    assert effective_batching(im, policy).default_priority == 1
    assert dynamic_batching(im, policy).default_priority_level == 1
    # Unset on the model: the policy's.
    plain = parse_model(without_batch_overrides())
    assert effective_batching(plain, policy).default_priority == 3
    assert dynamic_batching(plain, policy).default_priority_level == 3


def test_without_priority_levels_no_priority_is_rendered() -> None:
    im = parse_model(without_batch_overrides())
    batching = dynamic_batching(im, batch_policy())
    assert batching.priority_levels == 0
    assert batching.default_priority_level == 0
    assert len(batching.priority_queue_policy) == 0


def test_priority_queue_policies_are_rendered_per_level() -> None:
    im = parse_model(without_batch_overrides())
    policy = batch_policy(
        priorityLevels=3,
        queuePolicy={"timeout": "1s", "timeoutAction": "Delay", "maxQueueSize": 10},
        priorityQueuePolicies=[
            {"priority": 3, "policy": {"timeout": "2s", "timeoutAction": "Delay"}},
            {
                "priority": 1,
                "policy": {"timeout": "750us", "maxQueueSize": 5, "allowTimeoutOverride": True},
            },
        ],
    )
    batching = dynamic_batching(im, policy)
    default = batching.default_queue_policy
    assert default.timeout_action == pb.ModelQueuePolicy.DELAY
    assert (default.default_timeout_microseconds, default.max_queue_size) == (1_000_000, 10)
    assert not default.allow_timeout_override
    assert sorted(batching.priority_queue_policy) == [1, 3]
    high, low = batching.priority_queue_policy[1], batching.priority_queue_policy[3]
    assert high.timeout_action == pb.ModelQueuePolicy.REJECT
    assert (high.default_timeout_microseconds, high.max_queue_size) == (750, 5)
    assert high.allow_timeout_override
    assert low.timeout_action == pb.ModelQueuePolicy.DELAY
    assert (low.default_timeout_microseconds, low.max_queue_size) == (2_000_000, 0)


def test_preferred_sizes_are_sorted_and_ordering_preserved_on_request() -> None:
    im = parse_model(without_batch_overrides())
    batching = dynamic_batching(
        im, batch_policy(preferredBatchSizes=[16, 4, 8], preserveOrdering=True)
    )
    assert list(batching.preferred_batch_size) == [4, 8, 16]
    assert batching.preserve_ordering


# ------------------------------------------------------------------ versions and warm-up


def config_of(doc: dict[str, Any]) -> pb.ModelConfig:
    im = parse_model(doc)
    config: pb.ModelConfig = model_config(im, BatchPolicySpec(max_batch_size=8))
    return config


def test_specific_versions_are_listed_in_order() -> None:
    doc = model_doc()
    doc["spec"]["model"]["versionPolicy"] = {"policy": "Specific", "versions": [7, 2, 3]}
    policy = config_of(doc).version_policy
    assert policy.WhichOneof("policy_choice") == "specific"
    assert list(policy.specific.versions) == [2, 3, 7]


def test_all_versions() -> None:
    doc = model_doc()
    doc["spec"]["model"]["versionPolicy"] = {"policy": "All"}
    policy = config_of(doc).version_policy
    assert policy.WhichOneof("policy_choice") == "all"
    assert "version_policy {\n  all {\n  }\n}" in text_format.MessageToString(config_of(doc))


@pytest.mark.parametrize(("latest", "expected"), [(None, 1), (1, 1), (3, 3)])
def test_latest_versions(latest: int | None, expected: int) -> None:
    doc = model_doc()
    doc["spec"]["model"]["versionPolicy"] = {"policy": "Latest"}
    if latest is not None:
        doc["spec"]["model"]["versionPolicy"]["latest"] = latest
    policy = config_of(doc).version_policy
    assert policy.WhichOneof("policy_choice") == "latest"
    assert policy.latest.num_versions == expected


def test_random_warmup_with_variable_dims_sends_one_element_there() -> None:
    doc = model_doc()
    doc["spec"]["model"]["inputs"] = [
        {"name": "tokens", "dataType": "INT64", "dims": [-1, 3]},
        {"name": "mask", "dataType": "BOOL", "dims": [2, -1, 1]},
    ]
    doc["spec"]["model"]["warmup"] = {"batchSizes": [2, 4], "data": "Random"}
    config = config_of(doc)
    # The model's own inputs keep -1: only the warm-up request needs a concrete shape.
    assert [list(i.dims) for i in config.input] == [[-1, 3], [2, -1, 1]]
    assert [(w.name, w.batch_size) for w in config.model_warmup] == [
        ("warmup-batch-2", 2),
        ("warmup-batch-4", 4),
    ]
    for warmup in config.model_warmup:
        tokens, mask = warmup.inputs["tokens"], warmup.inputs["mask"]
        assert list(tokens.dims) == [1, 3]
        assert list(mask.dims) == [2, 1, 1]
        assert tokens.data_type == pb.TYPE_INT64
        assert mask.data_type == pb.TYPE_BOOL
        for data in (tokens, mask):
            assert data.WhichOneof("input_data_type") == "random_data"
            assert data.random_data


def test_zero_warmup_is_the_default() -> None:
    doc = model_doc()
    doc["spec"]["model"]["warmup"] = {"batchSizes": [1]}
    (warmup,) = config_of(doc).model_warmup
    data = warmup.inputs["features"]
    assert data.WhichOneof("input_data_type") == "zero_data"
    assert list(data.dims) == [128]


def test_no_warmup_no_cache_no_parameters_unless_asked() -> None:
    doc = model_doc()
    del doc["spec"]["model"]["warmup"]
    config = config_of(doc)
    assert len(config.model_warmup) == 0
    assert not config.HasField("response_cache")
    assert len(config.parameters) == 0
    doc["spec"]["model"]["parameters"] = {"b": "2", "a": "1"}
    doc["spec"]["model"]["responseCache"] = True
    config = config_of(doc)
    assert config.response_cache.enable
    assert {k: v.string_value for k, v in config.parameters.items()} == {"a": "1", "b": "2"}


# ------------------------------------------------------------------ model files


COMMON = [
    "copy",
    "--config=/dev/null",
    "--retries=5",
    "--ignore-times",
    "--error-on-no-transfer",
    "--stats-one-line",
    "-v",
]


@pytest.mark.parametrize(
    ("uri", "args"),
    [
        ("s3://bucket/a/b", [*COMMON, "--s3-env-auth", ":s3:bucket/a/b", "/models/m"]),
        ("s3://bucket", [*COMMON, "--s3-env-auth", ":s3:bucket/", "/models/m"]),
        ("gs://bucket/x/", [*COMMON, "--gcs-env-auth", ":gcs:bucket/x", "/models/m"]),
        (
            "https://h.example/r",
            [*COMMON, "--http-url=https://h.example/r/", ":http:", "/models/m"],
        ),
        ("https://h.example", [*COMMON, "--http-url=https://h.example/", ":http:", "/models/m"]),
    ],
)
def test_fetch_commands_per_scheme(uri: str, args: list[str]) -> None:
    plan = fetch_plan(uri, "m")
    assert plan.args == args
    # rclone runs in an emptied model directory.
    assert plan.command[:2] == ["sh", "-c"]
    assert plan.command[3:] == ["fetch-model", "/models/m"]
    assert 'rm -rf "$dest" && exec rclone "$@"' in plan.command[2]
    assert needs_network(uri)
    assert (plan.volumes, plan.mounts, plan.serving_mounts) == ([], [], [])


@pytest.mark.parametrize(
    ("uri", "source"),
    [("pvc://claim/p/q", "/models/.source/p/q"), ("pvc://claim", "/models/.source")],
)
def test_a_claims_model_is_linked_not_copied(uri: str, source: str) -> None:
    plan = fetch_plan(uri, "m")
    assert plan.args == []
    assert plan.command[3:] == ["link-model", source, "/models/m", uri]
    assert "rclone" not in plan.command[2]
    assert not needs_network(uri)


def test_a_pvc_model_mounts_its_claim_read_only() -> None:
    plan = fetch_plan("pvc://models-claim/ranker", "m")
    assert plan.volumes == [
        {
            "name": "model-source",
            "persistentVolumeClaim": {"claimName": "models-claim", "readOnly": True},
        }
    ]
    mount = {"name": "model-source", "mountPath": "/models/.source", "readOnly": True}
    assert plan.mounts == plan.serving_mounts == [mount]
    # ... in both containers of the Deployment: Triton reads the files from the claim.
    doc = model_doc()
    doc["spec"]["model"]["storageUri"] = "pvc://models-claim/ranker"
    pod = deployment(parse_model(doc), tenant_pool().spec, "config")["spec"]["template"]["spec"]
    assert plan.volumes[0] in pod["volumes"]
    assert mount in pod["initContainers"][0]["volumeMounts"]
    assert mount in pod["containers"][0]["volumeMounts"]
    assert "args" not in pod["initContainers"][0]
    assert (
        pod["initContainers"][0]["command"]
        == fetch_plan("pvc://models-claim/ranker", "ranker").command
    )


def test_an_s3_compatible_store_is_named_in_flags_and_its_keys_come_from_the_secret() -> None:
    """The endpoint, region and addressing style reach rclone as flags; the keys reach it
    only through the environment, from the Secret, so no pod reader sees them."""
    doc = model_doc()
    doc["spec"]["model"]["s3"] = {
        "endpoint": "http://minio.storage.svc:9000",
        "region": "us-east-1",
        "credentialsSecret": "store-keys",
    }
    pod = deployment(parse_model(doc), tenant_pool().spec, "config")["spec"]["template"]["spec"]
    [fetch] = pod["initContainers"]
    assert fetch["args"][-2:] == [":s3:models/search/ranker", "/models/ranker"]
    flags = fetch["args"][:-2]
    for flag in (
        "--s3-env-auth",
        "--s3-provider=Other",
        "--s3-endpoint=http://minio.storage.svc:9000",
        "--s3-region=us-east-1",
        "--s3-force-path-style=true",
    ):
        assert flag in flags
    keys = {e["name"]: e.get("valueFrom") for e in fetch["env"]}
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        assert keys[key] == {"secretKeyRef": {"name": "store-keys", "key": key}}
    # Without s3: AWS with the pods' identity, as before; no key from any Secret.
    plain = fetch_plan("s3://models/search/ranker", "ranker")
    assert not any(a.startswith(("--s3-endpoint", "--s3-provider")) for a in plain.args)
    assert plain.env == []


def test_an_unknown_scheme_is_refused() -> None:
    with pytest.raises(ValueError, match="unsupported storage URI scheme in 'ftp://h/m'"):
        fetch_plan("ftp://h/m", "m")


def test_plans_and_problems_are_values() -> None:
    """Frozen: a plan or a problem handed out cannot be changed under its other users."""
    plan = fetch_plan("s3://b/m", "m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        plan.args = []  # type: ignore[misc]
    problem = AccessProblem("gatewayNamespaces", "g", "AccessNamespaceMissing", "m")
    with pytest.raises(dataclasses.FrozenInstanceError):
        problem.namespace = "other"  # type: ignore[misc]
    assert len({problem, copy.copy(problem)}) == 1


# ------------------------------------------------------------------ pods without GPUs


def test_a_cpu_only_model_on_a_plain_pool_gets_no_gpu_scheduling() -> None:
    doc = model_doc("ads-ctr")
    doc["spec"]["runtime"] = {"gpus": 0}
    plain = example("TenantPool", "shared")
    plain["spec"]["placement"] = {}
    pod = deployment(parse_model(doc), TenantPool.model_validate(plain).spec, "c")["spec"][
        "template"
    ]["spec"]
    assert "nodeSelector" not in pod
    assert "tolerations" not in pod
    assert "nvidia.com/gpu" not in pod["containers"][0]["resources"]["limits"]
    # With GPUs, the GPU taint is tolerated even on a pool without tolerations.
    doc["spec"]["runtime"] = {"gpus": 2}
    pod = deployment(parse_model(doc), TenantPool.model_validate(plain).spec, "c")["spec"][
        "template"
    ]["spec"]
    assert pod["tolerations"] == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    assert pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "2"


# ------------------------------------------------------------------ names


def test_the_owner_reference_is_the_controller_reference() -> None:
    assert owner_references("InferenceModel", "m", "u-1") == [
        {
            "apiVersion": "shoal.dev/v1alpha1",
            "kind": "InferenceModel",
            "name": "m",
            "uid": "u-1",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    assert owner_references("TenantPool", "p", None) == []
    assert owner_references("TenantPool", "p", "") == []


def test_objects_of_a_model_without_uid_have_no_owner() -> None:
    doc = model_doc()
    del doc["metadata"]["uid"]
    im = parse_model(doc)
    assert "ownerReferences" not in model_metadata(im, "x")
    for obj in model_objects(im, None, tenant_pool()):
        assert "ownerReferences" not in obj["metadata"], obj["kind"]
    owned = model_metadata(parse_model(model_doc()), "x")
    assert owned["ownerReferences"] == owner_references("InferenceModel", "search-ranker", UID)


def test_names_reexports_the_label_constants() -> None:
    """Other modules import the label names from shoal.render.names; mypy (strict, no
    implicit re-export) accepts that only for the names in ``__all__``."""
    assert set(names.__all__) == {"MANAGED_BY", "MODEL_LABEL", "MODEL_SOURCE_LABEL", "POOL_LABEL"}
    star: dict[str, Any] = {}
    exec("from shoal.render.names import *", star)
    assert {k for k in star if not k.startswith("__")} == set(names.__all__)


# ------------------------------------------------------------------ access verdicts


def test_a_listed_namespace_is_known_by_its_name_even_without_the_label() -> None:
    """The API server sets kubernetes.io/metadata.name on every namespace; a listing that
    leaves it out still names the namespace, and a selector on it still matches."""
    doc = example("TenantPool", "critical")
    doc["spec"]["access"]["monitoringNamespaces"] = ["team-ads"]
    tp = TenantPool.model_validate(doc)
    shared = TenantPool.model_validate(example("TenantPool", "shared"))
    cluster = [{"metadata": {"name": n}} for n in ("gateway", "team-ads", "team-search")]
    problems = access_problems(tp, cluster, [tp, shared])
    assert [(p.namespace, p.reason) for p in problems] == [("team-ads", "AccessNamespaceIsTenant")]


def test_the_condition_names_the_first_problem_and_every_message() -> None:
    problems = [
        AccessProblem("gatewayNamespaces", "a", "AccessNamespaceIsTenant", "first."),
        AccessProblem("monitoringNamespaces", "b", "AccessNamespaceMissing", "second."),
    ]
    assert access_condition(problems) == {
        "type": "AccessNamespacesVerified",
        "status": "False",
        "reason": "AccessNamespaceIsTenant",
        "message": "first. second.",
    }
    assert access_condition(problems[1:])["reason"] == "AccessNamespaceMissing"


# ------------------------------------------------------------------ shoal render


def docs_without(kind: str, name: str) -> list[dict[str, Any]]:
    return [
        d
        for d in copy.deepcopy(example_documents())
        if not (d.get("kind") == kind and d["metadata"]["name"] == name)
    ]


def test_an_invalid_document_is_named_with_its_namespace_when_it_has_one() -> None:
    docs = copy.deepcopy(example_documents())
    pool_doc = next(d for d in docs if d["kind"] == "TenantPool")
    pool_doc["spec"]["quota"]["gpus"] = -1
    said = r"^TenantPool critical is invalid: spec.quota.gpus: must be greater than or equal to 0$"
    with pytest.raises(RenderError, match=said):
        render_documents(docs)
    docs = copy.deepcopy(example_documents())
    bp = next(d for d in docs if d["kind"] == "BatchPolicy")
    bp["spec"]["maxBatchSize"] = 0
    said = r"^BatchPolicy team-search/interactive is invalid: spec.maxBatchSize: must be greater"
    with pytest.raises(RenderError, match=said):
        render_documents(docs)
    unnamed = {"apiVersion": "shoal.dev/v1alpha1", "kind": "Gizmo"}
    with pytest.raises(RenderError, match=r"^Gizmo \?: unknown kind$"):
        render_documents([unnamed])


def test_a_model_without_a_namespace_is_rendered_into_default() -> None:
    doc = model_doc("ads-ctr")
    del doc["metadata"]["namespace"]
    doc["spec"]["batchPolicy"] = None
    docs = [*docs_without("InferenceModel", "ads-ctr"), doc]
    rendered = [o for o in render_documents(docs) if o["metadata"]["name"].startswith("ads-ctr")]
    assert [o["kind"] for o in rendered] == [
        "ConfigMap",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "HorizontalPodAutoscaler",
    ]
    assert {o["metadata"]["namespace"] for o in rendered} == {"default"}
    # So is a BatchPolicy, and a model in default finds it there.
    bp = example("BatchPolicy", "offline")
    del bp["metadata"]["namespace"]
    doc["spec"]["batchPolicy"] = {"name": "offline"}
    objs = render_documents([*docs_without("InferenceModel", "ads-ctr"), doc, bp])
    config = next(o for o in objs if o["metadata"]["name"] == "ads-ctr-model-config")
    assert "max_batch_size: 64" in config["data"]["config.pbtxt"]


def tenant_namespaces(objs: list[dict[str, Any]], pool_name: str) -> set[str]:
    return {
        o["metadata"]["namespace"]
        for o in objs
        if o["kind"] == "ResourceQuota" and o["metadata"]["name"] == f"shoal-pool-{pool_name}"
    }


def test_only_v1_namespaces_are_matched_and_with_their_labels() -> None:
    docs = docs_without("Namespace", "team-labs")
    # Not a Namespace: a ConfigMap of that name, and a Namespace of another API.
    docs.append({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "team-labs"}})
    docs.append({"apiVersion": "example.com/v1", "kind": "Namespace", "metadata": {"name": "x"}})
    assert tenant_namespaces(render_documents(docs), "shared") == {"team-ads"}
    # A pool that selects by another label sees the Namespace's labels.
    labelled = example("TenantPool", "shared")
    labelled["metadata"]["name"] = "labelled"
    labelled["spec"]["tenants"] = {"selector": {"matchLabels": {"tier": "batch"}}}
    docs.append(
        {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": "team-batch", "labels": {"tier": "batch"}},
        }
    )
    docs.append({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "bare"}})
    assert tenant_namespaces(render_documents([*docs, labelled]), "labelled") == {"team-batch"}
