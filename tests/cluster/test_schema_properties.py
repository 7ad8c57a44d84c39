"""Property tests: the API server and the models agree on what is valid.

Specs are generated from each CRD's own schema (hypothesis-jsonschema). The schema
cannot express the CEL rules, so some generated specs break them; for every spec the
real API server's verdict (on a dry-run create, which stores nothing) must equal the
models' verdict, and an accepted spec, as the server would store it, must parse back
into the same model (the server's defaults are the models').
"""

from __future__ import annotations

import copy
import re
import uuid
from collections.abc import Iterator
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_jsonschema import from_schema
from kubernetes import client
from pydantic import BaseModel, ValidationError

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.crd import KINDS, Kind, crd
from shoal.api.inferencemodel import InferenceModel
from shoal.api.tenantpool import TenantPool
from tests.support.resources import Rejected, create, example

EXAMPLES_PER_KIND = 75
# Specs drawn whole from the schema break some CEL rule far more often than not: for
# InferenceModel some sets of 75 hold no spec the server accepts. Half the examples
# therefore start from an example resource and redraw one optional field from its
# schema, so both verdicts come up whatever the draw (and whatever the source of check()).
BASE_EXAMPLES = {
    "InferenceModel": "search-ranker",
    "TenantPool": "shared",
    "BatchPolicy": "interactive",
}


_MATCHES = re.compile(r"^(?:self|self\.all\(key, key)\.matches\(r'([^']*)'\)")


def _rule_pattern(node: dict[str, Any], prefix: str) -> str | None:
    """The regular expression a CEL rule of ``node`` starts by matching, if any."""
    for rule in node.get("x-kubernetes-validations", []):
        found = _MATCHES.match(rule["rule"])
        if found and rule["rule"].startswith(prefix):
            return found.group(1)
    return None


def generation_schema(node: Any) -> Any:
    """A CRD schema as plain JSON Schema: no Kubernetes extensions, no extra keys.

    Where only a CEL rule states a string's form (a label key, a map's keys), its regular
    expression guides the generator too; the rule itself is the API server's to check.
    """
    if isinstance(node, list):
        return [generation_schema(n) for n in node]
    if not isinstance(node, dict):
        return node
    if node.get("x-kubernetes-preserve-unknown-fields") and "pattern" in node:
        # A quantity: a string of the pattern, or any number (negative ones are refused).
        string = {"type": "string", "pattern": node["pattern"], "maxLength": node["maxLength"]}
        return {"anyOf": [string, {"type": "number"}, {"type": "integer"}]}
    out = {
        k: generation_schema(v)
        for k, v in node.items()
        if not k.startswith("x-kubernetes-")
        and k not in ("default", "example", "description", "nullable")
    }
    if node.get("x-kubernetes-list-type") == "set":
        out["uniqueItems"] = True
    if out.get("type") == "object" and "properties" in out:
        out["additionalProperties"] = False
    if out.get("type") == "string" and "pattern" not in out:
        pattern = _rule_pattern(node, "self.matches")
        if pattern:
            out["pattern"] = pattern
    if out.get("type") == "object" and "additionalProperties" in node:
        pattern = _rule_pattern(node, "self.all(key, key.matches")
        if pattern:
            out["propertyNames"] = {"pattern": pattern}
    if node.get("x-kubernetes-preserve-unknown-fields"):
        return {"type": "object", "maxProperties": 0}
    return out


def spec_strategy(kind: Kind) -> st.SearchStrategy[dict[str, Any]]:
    """Whole specs drawn from the schema, or an example's spec with one field redrawn."""
    root = crd(kind)["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec_schema = root["properties"]["spec"]
    # from_schema is typed for any JSON value; the spec's schema is an object's.
    whole = cast("st.SearchStrategy[dict[str, Any]]", from_schema(generation_schema(spec_schema)))
    base = example(kind.name, BASE_EXAMPLES[kind.name])["spec"]
    if kind.name == "InferenceModel":
        # The example's pool may exist on a shared cluster, where the admission policy
        # would refuse this namespace (the models cannot know): name one that does not.
        base["pool"] = "no-such-pool"

    def with_field(name: str) -> st.SearchStrategy[dict[str, Any]]:
        field = from_schema(generation_schema(spec_schema["properties"][name]))
        return field.map(lambda value: {**copy.deepcopy(base), name: value})

    one_field = st.sampled_from(sorted(spec_schema["properties"])).flatmap(with_field)
    return st.one_of(whole, one_field)


def parsed_spec(kind: Kind, obj: dict[str, Any]) -> BaseModel:
    """``obj`` parsed by its kind's model, and that model's spec. Kind.model is typed
    ``type[BaseModel]``; every kind's model is one of these three."""
    parsed = cast("InferenceModel | TenantPool | BatchPolicy", kind.model.model_validate(obj))
    return parsed.spec


@pytest.fixture(scope="module")
def property_namespace(core: client.CoreV1Api, crds: list[str]) -> Iterator[str]:
    name = f"t-properties-{uuid.uuid4().hex[:5]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core.delete_namespace(name)


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_api_server_and_models_agree(
    kind: Kind, api: client.ApiClient, property_namespace: str
) -> None:
    verdicts = {"accepted": 0, "rejected": 0}

    @settings(
        max_examples=EXAMPLES_PER_KIND,
        deadline=None,
        derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(spec=spec_strategy(kind))
    def check(spec: dict[str, Any]) -> None:
        name = f"p{uuid.uuid4().hex[:12]}"
        obj: dict[str, Any] = {
            "apiVersion": "shoal.dev/v1alpha1",
            "kind": kind.name,
            "metadata": {"name": name, "namespace": property_namespace},
            "spec": copy.deepcopy(spec),
        }
        if kind.scope == "Cluster":
            del obj["metadata"]["namespace"]
        model_spec: BaseModel | None
        model_error: str | None
        server_error: str | None
        try:
            model_spec = parsed_spec(kind, obj)
            model_error = None
        except ValidationError as exc:
            model_spec, model_error = None, str(exc)
        try:
            # A dry-run create: judged, defaulted and pruned as a create, nothing stored.
            stored = create(api, obj, namespace=property_namespace, dry_run=True)
        except Rejected as rejected:
            server_error = rejected.message
        else:
            server_error = None
        if server_error is not None:
            assert model_error is not None, (
                f"the API server rejected a spec the models accept:\n{spec}\n{server_error}"
            )
            verdicts["rejected"] += 1
            return
        assert model_error is None, (
            f"the API server accepted a spec the models reject:\n{spec}\n{model_error}"
        )
        assert parsed_spec(kind, stored) == model_spec, stored
        verdicts["accepted"] += 1

    check()
    # Both outcomes must have been exercised, or the agreement proves little.
    assert verdicts["accepted"] > 0, verdicts
    assert verdicts["rejected"] > 0, verdicts
    print(f"{kind.name}: {verdicts}")
