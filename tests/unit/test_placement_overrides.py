"""Where a model's replicas run (spec.runtime.affinity, topologySpreadConstraints): each
reaches the pod in the Pod API's shape, apart from what Shoal sets, and a model that sets
neither gets exactly the pod it got before they existed."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from shoal.api.inferencemodel import InferenceModel
from tests.unit.test_pod_overrides import model_doc, pod_template

OWN_PODS = {"matchLabels": {"shoal.dev/model": "search-ranker"}}
HOST_SPREAD = {
    "maxSkew": 1,
    "topologyKey": "kubernetes.io/hostname",
    "whenUnsatisfiable": "ScheduleAnyway",
    "labelSelector": OWN_PODS,
}
AFFINITY: dict[str, Any] = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "example.com/gpu-memory-gb", "operator": "Gt", "values": ["40"]},
                        {"key": "example.com/spot", "operator": "DoesNotExist"},
                    ]
                }
            ]
        },
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 50,
                "preference": {
                    "matchExpressions": [
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]}
                    ]
                },
            }
        ],
    },
    "podAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "podAffinityTerm": {
                    "labelSelector": {"matchLabels": {"app": "feature-store"}},
                    "namespaces": ["features"],
                    "topologyKey": "topology.kubernetes.io/zone",
                },
            }
        ]
    },
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {
                    "matchExpressions": [{"key": "example.com/noisy", "operator": "Exists"}]
                },
                "namespaceSelector": {},
                "topologyKey": "kubernetes.io/hostname",
            }
        ]
    },
}


def test_unset_the_pod_is_todays_one_spread_by_node() -> None:
    spec = pod_template(model_doc())["spec"]
    assert spec["topologySpreadConstraints"] == [HOST_SPREAD]
    assert "affinity" not in spec


def test_the_affinity_reaches_the_pod_as_given() -> None:
    plain = pod_template(model_doc())
    template = pod_template(model_doc(affinity=AFFINITY))
    # Nothing filled in: no empty values, matchLabels or matchExpressions; the empty
    # namespaceSelector (every namespace) stays.
    assert template["spec"]["affinity"] == AFFINITY
    rest = {k: v for k, v in template["spec"].items() if k != "affinity"}
    assert rest == plain["spec"]
    assert template["metadata"]["annotations"] != plain["metadata"]["annotations"]


def test_the_affinity_composes_with_the_pools_placement() -> None:
    doc = model_doc(affinity=AFFINITY)
    plain = pod_template(model_doc())["spec"]
    spec = pod_template(doc)["spec"]
    assert spec["nodeSelector"] == plain["nodeSelector"]
    assert spec["tolerations"] == plain["tolerations"]


def test_an_empty_affinity_adds_nothing() -> None:
    plain = pod_template(model_doc())
    assert pod_template(model_doc(affinity={})) == plain
    assert pod_template(model_doc(affinity={"podAffinity": {}, "nodeAffinity": {}})) == plain


def test_the_models_spread_replaces_shoals() -> None:
    zones = {
        "maxSkew": 2,
        "topologyKey": "topology.kubernetes.io/zone",
        "whenUnsatisfiable": "DoNotSchedule",
        "minDomains": 3,
        "matchLabelKeys": ["pod-template-hash"],
    }
    others = {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"example.com/team": "search"}},
    }
    spec = pod_template(model_doc(topologySpreadConstraints=[zones, others]))["spec"]
    # Without a labelSelector, a constraint counts the model's own replicas.
    assert spec["topologySpreadConstraints"] == [{**zones, "labelSelector": OWN_PODS}, others]


def test_an_empty_spread_list_means_no_spread() -> None:
    spec = pod_template(model_doc(topologySpreadConstraints=[]))["spec"]
    assert "topologySpreadConstraints" not in spec


@pytest.mark.parametrize(
    ("runtime", "words"),
    [
        (
            {"topologySpreadConstraints": [HOST_SPREAD, {**HOST_SPREAD, "maxSkew": 2}]},
            "duplicate topologyKey and whenUnsatisfiable",
        ),
        (
            {"topologySpreadConstraints": [{**HOST_SPREAD, "minDomains": 2}]},
            "minDomains can only be used with whenUnsatisfiable DoNotSchedule",
        ),
        (
            {"topologySpreadConstraints": [{**HOST_SPREAD, "matchLabelKeys": ["shoal.dev/model"]}]},
            "must not be a label Shoal sets",
        ),
    ],
)
def test_what_the_pod_api_would_refuse_is_refused(runtime: dict[str, Any], words: str) -> None:
    with pytest.raises(ValidationError, match=words):
        InferenceModel.model_validate(model_doc(**runtime))
