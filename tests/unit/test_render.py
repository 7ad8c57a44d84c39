"""The pure renderers: custom resources in, Kubernetes objects and Triton configs out."""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import text_format
from pydantic import ValidationError
from tritonclient.grpc import model_config_pb2 as pb

from shoal.api.batchpolicy import BatchPolicy, BatchPolicySpec
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from shoal.render.batching import effective_batching
from shoal.render.desired import model_objects
from shoal.render.documents import RenderError, render_documents
from shoal.render.model_config import render_config_pbtxt
from shoal.render.model_fetch import fetch_plan
from shoal.render.workload import deployment
from shoal.settings import Settings
from tests.support.resources import example, example_documents

GOLDEN = Path(__file__).parent / "golden" / "examples.yaml"


def model(name: str = "search-ranker", **spec_changes: Any) -> InferenceModel:
    doc = example("InferenceModel", name)
    doc["metadata"]["uid"] = "00000000-0000-0000-0000-000000000001"
    doc["spec"].update(spec_changes)
    return InferenceModel.model_validate(doc)


def pool(name: str = "critical") -> TenantPool:
    return TenantPool.model_validate(example("TenantPool", name))


def policy(name: str = "interactive") -> BatchPolicySpec:
    return BatchPolicy.model_validate(example("BatchPolicy", name)).spec


def objects_by_kind(objs: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {o["kind"]: o for o in objs}


def test_render_of_the_examples_matches_the_golden_file() -> None:
    """Review changes to rendered objects here; UPDATE_GOLDEN=1 rewrites the file."""
    rendered = yaml.safe_dump_all(render_documents(example_documents()), sort_keys=False)
    if os.environ.get("UPDATE_GOLDEN"):
        GOLDEN.write_text(rendered)
    assert rendered == GOLDEN.read_text()


def test_config_pbtxt_parses_into_tritons_model_config() -> None:
    im = model()
    text = render_config_pbtxt(im, effective_batching(im, policy()))
    config = text_format.Parse(text, pb.ModelConfig())
    assert config.name == "ranker"
    assert config.platform == "onnxruntime_onnx"
    assert config.max_batch_size == 8
    batching = config.dynamic_batching
    assert list(batching.preferred_batch_size) == [4, 8]
    assert batching.max_queue_delay_microseconds == 500
    assert batching.priority_levels == 2
    assert batching.default_priority_level == 2
    assert batching.default_queue_policy.default_timeout_microseconds == 200_000
    assert batching.default_queue_policy.max_queue_size == 256
    assert batching.default_queue_policy.timeout_action == pb.ModelQueuePolicy.REJECT
    high = batching.priority_queue_policy[1]
    assert high.default_timeout_microseconds == 50_000
    assert high.allow_timeout_override
    assert config.instance_group[0].kind == pb.ModelInstanceGroup.KIND_GPU
    assert config.instance_group[0].count == 2
    assert [w.batch_size for w in config.model_warmup] == [1, 8]
    assert config.version_policy.latest.num_versions == 1


def test_overrides_win_over_the_policy_and_are_checked() -> None:
    im = model(batchPolicy={"name": "interactive", "maxQueueDelay": "3ms", "maxBatchSize": 16})
    merged = effective_batching(im, policy())
    assert (merged.max_queue_delay, merged.max_batch_size) == ("3ms", 16)
    doc = example("InferenceModel", "search-ranker")
    doc["spec"]["batchPolicy"] = {"name": "interactive", "maxBatchSize": 2}
    del doc["spec"]["model"]["warmup"]
    with pytest.raises(ValueError, match="preferred batch size"):
        effective_batching(InferenceModel.model_validate(doc), policy())


def test_without_a_policy_the_defaults_apply() -> None:
    im = model("labs-embedder")
    config = text_format.Parse(
        render_config_pbtxt(im, effective_batching(im, None)), pb.ModelConfig()
    )
    assert config.max_batch_size == BatchPolicySpec().max_batch_size == 32
    assert config.dynamic_batching.max_queue_delay_microseconds == 2000
    assert config.response_cache.enable


def test_cpu_only_models_get_cpu_instances() -> None:
    im = model(runtime={"gpus": 0})
    config = text_format.Parse(render_config_pbtxt(im, policy()), pb.ModelConfig())
    assert config.instance_group[0].kind == pb.ModelInstanceGroup.KIND_CPU


def test_deployment_leaves_replicas_to_the_autoscaler() -> None:
    objs = objects_by_kind(model_objects(model(), policy(), pool()))
    assert "replicas" not in objs["Deployment"]["spec"]
    hpa = objs["HorizontalPodAutoscaler"]["spec"]
    assert (hpa["minReplicas"], hpa["maxReplicas"]) == (2, 6)


def test_deployment_is_placed_in_its_pool_with_priority_and_gpus() -> None:
    deployment = objects_by_kind(model_objects(model(), policy(), pool()))["Deployment"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {
        "shoal.dev/node-group": "dedicated-gpu",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    }
    assert {
        "key": "shoal.dev/dedicated",
        "operator": "Equal",
        "value": "true",
        "effect": "NoSchedule",
    } in pod["tolerations"]
    assert pod["priorityClassName"] == "shoal-pool-critical"
    triton = pod["containers"][0]
    assert triton["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert {p["name"]: p["containerPort"] for p in triton["ports"]} == {
        "http": 8000,
        "grpc": 8001,
        "metrics": 8002,
    }
    assert triton["readinessProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert triton["livenessProbe"]["httpGet"]["path"] == "/v2/health/live"
    assert triton["startupProbe"]["httpGet"]["path"] == "/v2/health/ready"
    assert "--disable-auto-complete-config" in triton["args"]  # its tensors are declared
    assert "--metrics-config=summary_latencies=true" in triton["args"]
    assert triton["lifecycle"]["preStop"]["sleep"]["seconds"] > 0
    owner = deployment["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["controller"]) == ("InferenceModel", True)


def test_every_container_is_restricted() -> None:
    pod = objects_by_kind(model_objects(model(), policy(), pool()))["Deployment"]["spec"][
        "template"
    ]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert pod["automountServiceAccountToken"] is False
    for container in pod["containers"] + pod["initContainers"]:
        ctx = container["securityContext"]
        assert ctx["allowPrivilegeEscalation"] is False
        assert ctx["capabilities"] == {"drop": ["ALL"]}
        assert ctx["runAsNonRoot"] is True


def test_a_config_change_changes_the_checksum_and_nothing_else_does() -> None:
    def checksum(spec: BatchPolicySpec) -> str:
        deployment = objects_by_kind(model_objects(model(), spec, pool()))["Deployment"]
        return str(
            deployment["spec"]["template"]["metadata"]["annotations"]["shoal.dev/config-checksum"]
        )

    same = checksum(policy())
    assert checksum(policy()) == same
    changed = policy().model_copy(update={"max_queue_delay": "1ms"})
    assert checksum(changed) != same


@pytest.mark.parametrize(
    ("uri", "expected"),
    [
        ("s3://models/search/ranker", [":s3:models/search/ranker", "/models/ranker"]),
        ("gs://labs/embedder", [":gcs:labs/embedder", "/models/ranker"]),
        ("https://host.example/models/r", ["--http-url=https://host.example/models/r/", ":http:"]),
    ],
)
def test_fetch_plans(uri: str, expected: list[str]) -> None:
    plan = fetch_plan(uri, "ranker")
    assert plan.args[0] == "copy"
    for part in expected:
        assert part in plan.args
    assert not plan.volumes


def test_render_reports_missing_references_by_name() -> None:
    docs = [d for d in example_documents() if d.get("kind") != "TenantPool"]
    with pytest.raises(RenderError, match="TenantPool 'critical' is not among the files"):
        render_documents(docs)
    docs = [d for d in example_documents() if d.get("kind") != "BatchPolicy"]
    with pytest.raises(RenderError, match="BatchPolicy team-search/interactive"):
        render_documents(docs)


def test_render_names_an_invalid_document() -> None:
    docs = copy.deepcopy(example_documents())
    for doc in docs:
        if doc.get("kind") == "InferenceModel":
            doc["spec"]["scaling"] = {"minReplicas": 9, "maxReplicas": 2}
            break
    with pytest.raises(RenderError, match="minReplicas must not exceed maxReplicas"):
        render_documents(docs)


def test_a_warmup_batch_above_the_maximum_is_refused() -> None:
    """Triton would refuse to load such a model. Where the model's own override decides
    the maximum, the API refuses it; where its BatchPolicy does, the operator says why."""
    doc = model().model_dump(by_alias=True)
    doc["spec"]["model"]["warmup"] = {"batchSizes": [1, 16]}
    with pytest.raises(
        ValueError, match="warmup batch sizes \\[16\\] exceed the maxBatchSize of 8"
    ):
        effective_batching(InferenceModel.model_validate(doc), policy())
    doc["spec"]["batchPolicy"]["maxBatchSize"] = 8
    with pytest.raises(ValidationError, match="warm-up batch sizes must be at most"):
        InferenceModel.model_validate(doc)


def test_autoscaler_targets_are_canonical_quantities() -> None:
    """The API server stores "1000m" as "1" and 1000 as "1k": rendering anything else
    would differ from the live HPA on every pass."""
    im = model(scaling={"maxReplicas": 4, "targetP95Latency": "1s", "targetQueueDepth": 1000})
    objs = objects_by_kind(model_objects(im, policy(), pool()))
    metrics = objs["HorizontalPodAutoscaler"]["spec"]["metrics"]
    assert metrics[0]["pods"]["target"]["averageValue"] == "1k"
    assert metrics[1]["object"]["target"]["value"] == "1"


def test_a_models_service_account_and_pull_secrets_reach_its_pods() -> None:
    """A cloud identity for the model's storage, a private registry's secrets; unset,
    neither appears (the namespace's default account, no token mounted)."""
    base = example("InferenceModel", "search-ranker")["spec"]["runtime"]
    runtime = {
        **base,
        "serviceAccountName": "model-reader",
        "imagePullSecrets": [{"name": "mirror"}],
    }
    pod = deployment(model(runtime=runtime), pool().spec, "")["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "model-reader"
    assert pod["imagePullSecrets"] == [{"name": "mirror"}]
    assert pod["automountServiceAccountToken"] is False
    plain = deployment(model(), pool().spec, "")["spec"]["template"]["spec"]
    assert "serviceAccountName" not in plain
    assert "imagePullSecrets" not in plain


def test_the_model_images_come_from_the_settings_where_a_model_names_none() -> None:
    """An air-gapped cluster points the defaults at its mirror once: the Triton image of
    a model without spec.runtime.image, and rclone's for every model; a model's own
    image still wins. A malformed reference is refused at start-up, naming the setting."""
    settings = Settings.from_env(
        {
            "SHOAL_TRITON_IMAGE": "mirror.internal/nvidia/tritonserver:24.10-py3",
            "SHOAL_FETCH_IMAGE": "mirror.internal/rclone/rclone:1.68.2",
        }
    )

    def pod(**runtime: object) -> dict[str, object]:
        objects = model_objects(model(runtime=runtime), None, pool(), None, settings.serving_images)
        deployment = next(o for o in objects if o["kind"] == "Deployment")
        spec: dict[str, object] = deployment["spec"]["template"]["spec"]
        return spec

    plain = pod()
    assert plain["containers"][0]["image"] == "mirror.internal/nvidia/tritonserver:24.10-py3"  # type: ignore[index]
    assert plain["initContainers"][0]["image"] == "mirror.internal/rclone/rclone:1.68.2"  # type: ignore[index]
    own = pod(image="registry.example/triton:custom")
    assert own["containers"][0]["image"] == "registry.example/triton:custom"  # type: ignore[index]
    with pytest.raises(ValidationError, match="fetch_image"):
        Settings.from_env({"SHOAL_FETCH_IMAGE": "not an image"})
