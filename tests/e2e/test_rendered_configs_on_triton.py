"""Every config.pbtxt the operator renders loads into the real tritonserver.

Configs are rendered for the examples and for InferenceModels and BatchPolicies
generated from the CRD schemas, adapted for the CPU (e2e/triton_repo.py says
exactly how), and loaded with --disable-auto-complete-config.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import httpx
from e2e.triton_repo import add_model, for_cpu
from google.protobuf import text_format
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from pydantic import ValidationError
from tritonclient.grpc import model_config_pb2 as pb

from e2e import triton
from shoal.api.batchpolicy import BatchPolicy, BatchPolicySpec
from shoal.api.crd import KINDS, crd
from shoal.api.inferencemodel import InferenceModel
from shoal.render.batching import effective_batching
from shoal.render.model_config import render_config_pbtxt
from tests.cluster.test_schema_properties import generation_schema
from tests.support.resources import example_documents

GENERATED_MODELS = 25


def load_all(repo: Path, workdir: Path, expected: list[str]) -> None:
    with triton.running(repo, workdir, timeout=180) as server:
        index = httpx.post(f"{server.http_url}/v2/repository/index", json={}, timeout=10).json()
    states = {(m["name"], m.get("version")): m.get("state") for m in index}
    assert {name for name, _ in states} == set(expected), states
    assert all(state == "READY" for state in states.values()), states


def example_configs() -> list[str]:
    docs = example_documents()
    policies = {
        (d["metadata"]["namespace"], d["metadata"]["name"]): BatchPolicy.model_validate(d).spec
        for d in docs
        if d.get("kind") == "BatchPolicy"
    }
    configs = []
    for doc in docs:
        if doc.get("kind") != "InferenceModel":
            continue
        model = InferenceModel.model_validate(doc)
        ref = model.spec.batch_policy
        policy = policies[(model.metadata.namespace, ref.name)] if ref else None
        configs.append(render_config_pbtxt(model, effective_batching(model, policy)))
    return configs


def test_the_examples_configs_load(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    names = [add_model(repo, for_cpu(text)) for text in example_configs()]
    assert len(names) == 3
    load_all(repo, tmp_path / "work", names)


# The fields of an InferenceModel's spec that config.pbtxt is rendered from (with the
# BatchPolicy's); runtime only for whether it asks for GPUs.
CONFIG_FIELDS = ("pool", "batchPolicy", "model", "runtime")
# What the generated schema cannot say (the API's cross-field rules), drawn valid so few
# draws are rejected: one of backend and platform; each version field with its policy.
_VERSION_POLICIES = (
    {"policy": {"enum": ["Latest"]}, "latest": {"type": "integer", "minimum": 1, "maximum": 100}},
    {"policy": {"enum": ["All"]}},
    {
        "policy": {"enum": ["Specific"]},
        "versions": {
            "type": "array",
            "items": {"type": "integer", "minimum": 1, "maximum": 2147483647},
            "minItems": 1,
            "maxItems": 8,
            "uniqueItems": True,
        },
    },
)


def _spec_schema(kind_name: str) -> dict[str, Any]:
    """The kind's spec schema, with sizes bounded so that 25 models fit one CPU server:
    at most 2 instances, tensors of at most 3 dimensions of at most 16, batches and
    warm-up batches of at most 64. Of an InferenceModel, only the fields its
    config.pbtxt is rendered from (CONFIG_FIELDS), its storage a fixed valid URI, and
    the cross-field rules drawn valid (a draw the API refuses is thrown away: drawing
    the rest from the full schema threw away 97 in 100, at a second a draw). Every
    other value is drawn from the full schema."""
    kind = next(k for k in KINDS if k.name == kind_name)
    root = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec: dict[str, Any] = generation_schema(root["properties"]["spec"])
    props = spec["properties"]
    if kind_name == "InferenceModel":
        spec["properties"] = props = {k: v for k, v in props.items() if k in CONFIG_FIELDS}
        props["runtime"]["properties"] = {"gpus": props["runtime"]["properties"]["gpus"]}
        model = props["model"]["properties"]
        model["storageUri"] = {"enum": ["s3://models/m"]}
        model["instances"]["maximum"] = 2
        for tensors in ("inputs", "outputs"):
            dims = model[tensors]["items"]["properties"]["dims"]
            dims["maxItems"] = 3
            dims["items"] = {"enum": [-1, 1, 2, 3, 4, 8, 16]}  # 0 is refused
        model["warmup"]["properties"]["batchSizes"]["items"]["maximum"] = 64
        model["versionPolicy"] = {
            "anyOf": [
                {
                    "type": "object",
                    "properties": choice,
                    "required": list(choice),
                    "additionalProperties": False,
                }
                for choice in _VERSION_POLICIES
            ]
        }
        props["batchPolicy"]["properties"]["maxBatchSize"]["maximum"] = 64
    else:
        props["maxBatchSize"]["maximum"] = 64
        props["preferredBatchSizes"]["items"]["maximum"] = 64
    return spec


def _one_runner(spec: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Specs that name a backend or a platform, never both (the API's rule)."""
    ways = []
    for kept, dropped in (("backend", "platform"), ("platform", "backend")):
        way = {**spec, "properties": {**spec["properties"]}}
        model = {**way["properties"]["model"]}
        model["properties"] = {k: v for k, v in model["properties"].items() if k != dropped}
        model["required"] = sorted({*model.get("required", []), kept})
        way["properties"]["model"] = model
        ways.append(cast(st.SearchStrategy[dict[str, Any]], from_schema(way)))
    return st.one_of(ways)


def test_generated_specs_render_configs_triton_loads(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    names: list[str] = []

    @settings(
        max_examples=GENERATED_MODELS,
        deadline=None,
        derandomize=True,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
            HealthCheck.data_too_large,
        ],
    )
    @given(
        model_spec=_one_runner(_spec_schema("InferenceModel")),
        policy_spec=st.one_of(st.none(), from_schema(_spec_schema("BatchPolicy"))),
    )
    def render(model_spec: dict[str, Any], policy_spec: dict[str, Any] | None) -> None:
        try:
            model = InferenceModel.model_validate(
                {"metadata": {"name": "m", "namespace": "ns"}, "spec": model_spec}
            )
            policy = BatchPolicySpec.model_validate(policy_spec) if policy_spec else None
            batching = effective_batching(model, policy)
        except (ValidationError, ValueError):
            assume(False)
            return
        text = render_config_pbtxt(model, batching)
        text_format.Parse(text, pb.ModelConfig())  # parses as Triton's own message
        names.append(add_model(repo, for_cpu(text, name=f"generated_{len(names)}")))

    render()
    assert len(names) >= GENERATED_MODELS // 2, names
    load_all(repo, tmp_path / "work", names)
