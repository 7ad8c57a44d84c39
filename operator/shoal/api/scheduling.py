"""Where a model's pods may run, beyond its pool's placement: affinity to nodes and to
other pods, and how the replicas spread over nodes or zones.

Each value is checked as the Pod API checks it, so that a Deployment rendered from an
admitted model is never refused for them. They compose with the pool's placement (its
nodeSelector, GPU product and tolerations): the scheduler requires both.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, Field

from shoal.api.common import (
    Check,
    DnsLabel,
    LabelKey,
    LabelSelector,
    LabelValue,
    Rule,
    SpecModel,
    UniqueList,
    matches,
)
from shoal.api.pod_overrides import RESERVED_LABEL_PREFIXES, RESERVED_LABELS

MAX_INT32 = 2**31 - 1
# Lists are bounded well above any real use (the Pod API sets no bound) and low enough
# that the API server's estimate of the cost of the rules on their items stays in budget.
# A value Gt and Lt compare a node label's with: a whole number (the scheduler parses
# it as an int64, and a label value cannot start with '-').
WHOLE_NUMBER_PATTERN = r"^[0-9]{1,18}$"

Weight = Annotated[int, Field(ge=1, le=100)]


class NodeSelectorRequirement(SpecModel):
    """One requirement on a node's labels."""

    key: LabelKey = Field(description="The node label's key.")
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"] = Field(
        description="In, NotIn: the label's value is (not) one of values; Exists, "
        "DoesNotExist: the node has (no) such label; Gt, Lt: its value, a whole number, is "
        "greater or less than the one in values."
    )
    values: Annotated[list[LabelValue], Field(max_length=64)] | None = Field(
        default=None,
        description="The values: some for In and NotIn, none for Exists and DoesNotExist, "
        "one whole number for Gt and Lt.",
    )

    rules = (
        Rule(
            cel="!(self.operator in ['In', 'NotIn']) || "
            "(has(self.values) && size(self.values) > 0)",
            check=lambda r: r.operator not in ("In", "NotIn") or bool(r.values),
            message="values must be given for operator In and NotIn",
            field=".values",
        ),
        Rule(
            cel="!(self.operator in ['Exists', 'DoesNotExist']) || !has(self.values) || "
            "size(self.values) == 0",
            check=lambda r: r.operator not in ("Exists", "DoesNotExist") or not r.values,
            message="values must be empty for operator Exists and DoesNotExist",
            field=".values",
        ),
        Rule(
            cel="!(self.operator in ['Gt', 'Lt']) || (has(self.values) && "
            f"size(self.values) == 1 && self.values[0].matches(r'{WHOLE_NUMBER_PATTERN}'))",
            check=lambda r: (
                r.operator not in ("Gt", "Lt")
                or (
                    r.values is not None
                    and len(r.values) == 1
                    and matches(WHOLE_NUMBER_PATTERN, r.values[0])
                )
            ),
            message="values must be one whole number, such as 8, for operator Gt and Lt",
            field=".values",
        ),
    )


class NodeSelectorTerm(SpecModel):
    """Requirements on a node's labels, all of which it must meet."""

    match_expressions: Annotated[
        list[NodeSelectorRequirement], Field(min_length=1, max_length=16)
    ] = Field(description="The requirements.")


class NodeSelector(SpecModel):
    """Terms on a node's labels, one of which it must meet."""

    node_selector_terms: Annotated[list[NodeSelectorTerm], Field(min_length=1, max_length=8)] = (
        Field(description="The terms; a node that meets any one of them qualifies.")
    )


class PreferredSchedulingTerm(SpecModel):
    """A term nodes are preferred for, by weight."""

    weight: Weight = Field(description="How much a node that meets it is preferred: 1 to 100.")
    preference: NodeSelectorTerm = Field(description="The term.")


class NodeAffinity(SpecModel):
    """Which nodes the pods must, or would rather, run on."""

    required_during_scheduling_ignored_during_execution: NodeSelector | None = Field(
        default=None, description="Nodes the pods may run on only."
    )
    preferred_during_scheduling_ignored_during_execution: (
        Annotated[list[PreferredSchedulingTerm], Field(max_length=8)] | None
    ) = Field(
        default=None,
        description="Nodes the pods would rather run on.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


class PodAffinityTerm(SpecModel):
    """Pods, and the topology (a node, a zone) the model's pods share, or do not share,
    with them."""

    label_selector: LabelSelector | None = Field(
        default=None, description="The pods, by label. Unset: none."
    )
    namespace_selector: LabelSelector | None = Field(
        default=None,
        description="The namespaces the pods are in, by label, besides namespaces; {} is "
        "every namespace. Unset, with namespaces unset too: the model's namespace.",
    )
    namespaces: Annotated[list[DnsLabel], UniqueList, Field(max_length=64)] | None = Field(
        default=None,
        description="The namespaces the pods are in, by name. Unset, with namespaceSelector "
        "unset too: the model's namespace.",
        json_schema_extra={"x-kubernetes-list-type": "set"},
    )
    topology_key: LabelKey = Field(
        description="The node label whose value is the topology shared, such as "
        "kubernetes.io/hostname (a node) or topology.kubernetes.io/zone (a zone)."
    )


class WeightedPodAffinityTerm(SpecModel):
    """A term pods are preferred for, by weight."""

    weight: Weight = Field(description="How much meeting it is preferred: 1 to 100.")
    pod_affinity_term: PodAffinityTerm = Field(description="The term.")


class PodAffinity(SpecModel):
    """Pods the model's pods must, or would rather, share a topology with (podAffinity),
    or not share one with (podAntiAffinity)."""

    required_during_scheduling_ignored_during_execution: (
        Annotated[list[PodAffinityTerm], Field(max_length=8)] | None
    ) = Field(
        default=None,
        description="Terms every pod must meet.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )
    preferred_during_scheduling_ignored_during_execution: (
        Annotated[list[WeightedPodAffinityTerm], Field(max_length=8)] | None
    ) = Field(
        default=None,
        description="Terms pods would rather meet.",
        json_schema_extra={"x-kubernetes-list-type": "atomic"},
    )


class Affinity(SpecModel):
    """The pod's affinity, as a Pod's spec.affinity."""

    node_affinity: NodeAffinity | None = Field(
        default=None, description="Nodes the pods must, or would rather, run on."
    )
    pod_affinity: PodAffinity | None = Field(
        default=None, description="Pods the model's pods must, or would rather, run beside."
    )
    pod_anti_affinity: PodAffinity | None = Field(
        default=None, description="Pods the model's pods must, or would rather, run apart from."
    )


def _reserved_label(key: str) -> bool:
    return key in RESERVED_LABELS or key.startswith(RESERVED_LABEL_PREFIXES)


MatchLabelKey = Annotated[
    LabelKey,
    Check(
        cel=f"!(self in {list(RESERVED_LABELS)!r}) && "
        + " && ".join(f"!self.startsWith('{p}')" for p in RESERVED_LABEL_PREFIXES),
        check=lambda key: not _reserved_label(key),
        message="must not be a label Shoal sets: every replica of the model carries the "
        "same value of those, and the default labelSelector already selects on one",
    ),
]


def _selector_keys(selector: LabelSelector | None) -> set[str]:
    if selector is None:
        return set()
    return set(selector.match_labels) | {e.key for e in selector.match_expressions}


class TopologySpreadConstraint(SpecModel):
    """How the model's replicas spread over a topology: nodes, zones."""

    max_skew: int = Field(
        ge=1,
        le=MAX_INT32,
        description="The most by which the number of matching pods may differ between two "
        "domains of the topology (two nodes, two zones); at least 1.",
    )
    topology_key: LabelKey = Field(
        description="The node label whose values are the domains, such as "
        "kubernetes.io/hostname or topology.kubernetes.io/zone."
    )
    when_unsatisfiable: Literal["DoNotSchedule", "ScheduleAnyway"] = Field(
        description="DoNotSchedule: a replica that would exceed maxSkew stays pending; "
        "ScheduleAnyway: it is placed, preferring the domains that reduce the skew."
    )
    label_selector: LabelSelector | None = Field(
        default=None,
        description="The pods counted in each domain. Unset: the model's own replicas "
        "(Shoal fills in the selector of the model's Deployment), which is nearly always "
        "what is meant.",
    )
    min_domains: int | None = Field(
        default=None,
        ge=1,
        le=MAX_INT32,
        description="With DoNotSchedule: count fewer domains than this as if the missing ones "
        "held no pods, so that replicas stay pending until more domains (a new zone's "
        "nodes) exist.",
    )
    match_label_keys: Annotated[list[MatchLabelKey], UniqueList, Field(max_length=16)] | None = (
        Field(
            default=None,
            description="Pod labels whose values are also matched, such as pod-template-hash "
            "(only the pods of the same rollout count); none in labelSelector, none Shoal sets.",
            json_schema_extra={"x-kubernetes-list-type": "set"},
        )
    )

    rules = (
        Rule(
            cel="!has(self.minDomains) || self.whenUnsatisfiable == 'DoNotSchedule'",
            check=lambda c: c.min_domains is None or c.when_unsatisfiable == "DoNotSchedule",
            message="minDomains can only be used with whenUnsatisfiable DoNotSchedule",
            field=".minDomains",
        ),
        Rule(
            cel="!has(self.matchLabelKeys) || !has(self.labelSelector) || "
            "self.matchLabelKeys.all(k, "
            "!(has(self.labelSelector.matchLabels) && k in self.labelSelector.matchLabels) && "
            "!(has(self.labelSelector.matchExpressions) && "
            "self.labelSelector.matchExpressions.exists(e, e.key == k)))",
            check=lambda c: not (set(c.match_label_keys or ()) & _selector_keys(c.label_selector)),
            message="matchLabelKeys must not name a key labelSelector already selects on",
            field=".matchLabelKeys",
        ),
    )


def _unique_pairs(items: list[TopologySpreadConstraint]) -> list[TopologySpreadConstraint]:
    pairs = [(c.topology_key, c.when_unsatisfiable) for c in items]
    dupes = sorted({f"{k}, {w}" for k, w in pairs if pairs.count((k, w)) > 1})
    if dupes:
        raise ValueError(f"duplicate topologyKey and whenUnsatisfiable: {'; '.join(dupes)}")
    return items


SpreadConstraints = Annotated[
    list[TopologySpreadConstraint], AfterValidator(_unique_pairs), Field(max_length=8)
]
SPREAD_LIST_TYPE: dict[str, Any] = {
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["topologyKey", "whenUnsatisfiable"],
}
