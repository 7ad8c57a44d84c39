"""CustomResourceDefinitions generated from the pydantic models (pure functions).

Pydantic's JSON Schema is close to, but not, a Kubernetes structural schema: it uses
``$ref``/``$defs``, ``anyOf`` with ``null`` for optional fields, ``title`` and
``additionalProperties: false``. :func:`structural` turns one into the other; the
kinds' metadata (names, scope, printer columns) lives in :data:`KINDS`.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from shoal.api.batchpolicy import BatchPolicy, BatchPolicySpec, BatchPolicyStatus
from shoal.api.common import cel_string
from shoal.api.constants import GROUP, KEPT_ON_UNINSTALL, VERSION
from shoal.api.inferencemodel import InferenceModel, InferenceModelSpec, InferenceModelStatus
from shoal.api.tenantpool import TenantPool, TenantPoolSpec, TenantPoolStatus

Schema = dict[str, Any]


@dataclass(frozen=True)
class Kind:
    """One custom resource kind and how it is presented."""

    model: type[BaseModel]
    spec: type[BaseModel]
    status: type[BaseModel]
    plural: str
    short_names: tuple[str, ...]
    scope: str
    printer_columns: tuple[Schema, ...]
    # Fields a field selector may name (``kubectl get --field-selector``), besides
    # metadata.name and metadata.namespace.
    selectable_fields: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return self.model.__name__

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{GROUP}"


def _column(name: str, path: str, type_: str = "string", priority: int = 0, **extra: str) -> Schema:
    col: Schema = {"name": name, "type": type_, "jsonPath": path}
    if priority:
        col["priority"] = priority
    col.update(extra)
    return col


_AGE = _column("Age", ".metadata.creationTimestamp", "date")
_READY = _column("Ready", '.status.conditions[?(@.type=="Ready")].status')
_REASON = _column("Reason", '.status.conditions[?(@.type=="Ready")].reason', priority=1)

KINDS: tuple[Kind, ...] = (
    Kind(
        model=InferenceModel,
        spec=InferenceModelSpec,
        status=InferenceModelStatus,
        plural="inferencemodels",
        short_names=("im",),
        scope="Namespaced",
        # The operator lists a pool's models with it; admins can too.
        selectable_fields=(".spec.pool",),
        printer_columns=(
            _column("Pool", ".spec.pool"),
            _READY,
            _column("Replicas", ".status.replicas", "integer"),
            _column("Available", ".status.readyReplicas", "integer"),
            _column("Queue", ".status.queueDepth", "number", description="Requests waiting"),
            _column("P95", ".status.p95Latency"),
            _column("Batch", ".status.averageBatchSize", "number", priority=1),
            _column("Model", ".spec.model.name", priority=1),
            _REASON,
            _AGE,
        ),
    ),
    Kind(
        model=TenantPool,
        spec=TenantPoolSpec,
        status=TenantPoolStatus,
        plural="tenantpools",
        short_names=("tp",),
        scope="Cluster",
        printer_columns=(
            _column("Isolation", ".spec.isolation"),
            _READY,
            _column("GPUs", ".status.gpusUsed", "integer", description="GPUs requested"),
            _column("Quota", ".spec.quota.gpus", "integer", description="GPUs per tenant"),
            _column("Models", ".status.models", "integer"),
            _REASON,
            _AGE,
        ),
    ),
    Kind(
        model=BatchPolicy,
        spec=BatchPolicySpec,
        status=BatchPolicyStatus,
        plural="batchpolicies",
        short_names=("bp",),
        scope="Namespaced",
        printer_columns=(
            _column("Max Batch", ".spec.maxBatchSize", "integer"),
            _column("Delay", ".spec.maxQueueDelay"),
            _column("Priorities", ".spec.priorityLevels", "integer", priority=1),
            _column("Models", ".status.models", "integer"),
            _AGE,
        ),
    ),
)


# ----------------------------------------------------------------------------- schemas

_DROP = {"title"}
# Marks, while converting, a field whose pydantic default is None: it stays unset
# unless the user sets it, so it must not get a materialised default.
_UNSET_BY_DEFAULT = "x-shoal-unset-by-default"
NULL_RULE = "must not be null"


def structural(node: Any, defs: dict[str, Schema]) -> Any:
    """Rewrite a pydantic JSON Schema node into a Kubernetes structural schema node."""
    if isinstance(node, list):
        return [structural(item, defs) for item in node]
    if not isinstance(node, dict):
        return node
    node = dict(node)
    # Inline references, keeping the siblings (description, default) of the $ref.
    if "$ref" in node:
        target = copy.deepcopy(defs[node.pop("$ref").rsplit("/", 1)[-1]])
        target.update(node)
        node = target
    if "allOf" in node and len(node["allOf"]) == 1:
        inner = node.pop("allOf")[0]
        node = {**structural(inner, defs), **node}
    # Optional[X] is anyOf[X, null]: an optional field is simply X, left unset.
    if "anyOf" in node and not node.get("x-kubernetes-int-or-string"):
        options = [o for o in node.pop("anyOf") if o != {"type": "null"}]
        if len(options) != 1:
            raise ValueError(f"cannot express anyOf {options} structurally")
        node = {**structural(options[0], defs), **node, _UNSET_BY_DEFAULT: True}
        if node.get("type") == "object" and "properties" in node:
            # Server-side apply stores an object whose last field was removed as null
            # (affinity: {} once nodeAffinity goes): null means unset, as leaving the
            # object out does, so removing its last field removes its effect.
            node["nullable"] = True
    if "patternProperties" in node:
        raise ValueError("a map's key type may not carry a pattern: give it a Check instead")
    key_rules = _key_rules(node.pop("propertyNames", None))
    out: Schema = {}
    for key, value in node.items():
        if key in _DROP or key == "$defs":
            continue
        if key == "default" and value is None:
            continue
        if key == "additionalProperties" and isinstance(value, bool):
            continue  # false: the API server refuses unknown fields anyway (strict mode)
        if key == "properties":
            out[key] = {name: structural(sub, defs) for name, sub in value.items()}
        elif key in ("items", "additionalProperties", "anyOf"):
            out[key] = structural(value, defs)
        else:
            out[key] = value
    if out.get("x-kubernetes-preserve-unknown-fields") and out.get("type") == "object":
        out.pop("properties", None)
    if key_rules:
        out["x-kubernetes-validations"] = [*out.get("x-kubernetes-validations", []), *key_rules]
    _default_nested_objects(out)
    _refuse_null_for_defaults(out)
    return out


def _key_rules(names: Schema | None) -> list[Schema]:
    """A map's key constraints (pydantic's ``propertyNames``, which a structural schema
    lacks) as CEL rules over every key of the map."""
    if not names:
        return []
    rules = []
    bounds = []
    if "minLength" in names:
        bounds.append(f"size(key) >= {names['minLength']}")
    if "maxLength" in names:
        bounds.append(f"size(key) <= {names['maxLength']}")
    if bounds:
        words = f"of {names.get('minLength', 0)} to {names['maxLength']} characters"
        rules.append(
            {
                "rule": f"self.all(key, {' && '.join(bounds)})",
                "message": f"every key must be {words}",
            }
        )
    if "pattern" in names:
        rules.append(
            {
                "rule": f"self.all(key, key.matches({cel_string(names['pattern'])}))",
                "message": f"every key must match {names['pattern']}",
            }
        )
    for check in names.get("x-kubernetes-validations", []):
        # The check was written for one value, ``self``: here it is each key in turn.
        on_key = re.sub(r"\bself\b", "key", check["rule"])
        rules.append(
            {"rule": f"self.all(key, {on_key})", "message": f"every key {check['message']}"}
        )
    return rules


def _refuse_null_for_defaults(node: Schema) -> None:
    """Refuse an explicit null on every scalar field that has a default.

    The API server drops a null (``minReplicas:`` with nothing after it, a missing Helm
    value) and applies the default, so a mistake would pass silently. A nullable field
    keeps its null, and a rule on the object refuses it: CEL treats a null field as
    absent (``in`` does not find it), but iterating over the object still lists it. (An
    enum refuses a null itself, as "Unsupported value: null", before any rule runs.)

    Objects and lists are left alone: for them "nothing" means "the defaults", and a
    server-side apply sends an empty object (``versionPolicy: {}``) as null, so refusing
    null would refuse the plainest way to ask for the defaults.
    """
    for name, sub in node.get("properties", {}).items():
        if "default" not in sub or isinstance(sub["default"], dict | list):
            continue
        sub["nullable"] = True
        hint = f" ({json.dumps(sub['default'])})"
        rule = {
            # Also for a field CEL cannot type (a quantity): ``in`` finds it unless null.
            "rule": f"'{name}' in dyn(self) || !dyn(self).exists(k, k == '{name}')",
            "message": f"{NULL_RULE}: leave {name} out for its default{hint}",
            "fieldPath": f".{name}",
        }
        existing = node.get("x-kubernetes-validations", [])
        if rule not in existing:  # a node may pass through here twice (Optional[X])
            node["x-kubernetes-validations"] = [*existing, rule]


def _default_nested_objects(node: Schema) -> None:
    """Give optional object fields whose own fields are all optional a full default.

    The API server then fills them in even when the field is left out, as the pydantic
    models do with ``default_factory``. The default is materialised (``{}`` would be
    checked against the object's CEL rules before its nested defaults apply).
    """
    required = set(node.get("required", []))
    for name, sub in node.get("properties", {}).items():
        # Kept, not popped: an optional list's items are walked twice (once as the
        # anyOf's option, once as the result), and the second walk must see it too.
        if sub.get(_UNSET_BY_DEFAULT, False):
            continue
        if (
            name not in required
            and sub.get("type") == "object"
            and "properties" in sub
            and not sub.get("required")
            and "default" not in sub
            and name != "status"
        ):
            sub["default"] = _materialized(sub)


def _materialized(node: Schema) -> Schema:
    out: Schema = {}
    for name, sub in node.get("properties", {}).items():
        if "default" in sub:
            out[name] = copy.deepcopy(sub["default"])
    return out


def part_schema(model: type[BaseModel]) -> Schema:
    raw = model.model_json_schema(by_alias=True, mode="validation")
    defs = raw.pop("$defs", {})
    result: Schema = _without_marks(structural(raw, defs))
    return result


def _without_marks(node: Any) -> Any:
    """The schema without the conversion's own marks (``_UNSET_BY_DEFAULT``)."""
    if isinstance(node, list):
        return [_without_marks(item) for item in node]
    if isinstance(node, dict):
        return {k: _without_marks(v) for k, v in node.items() if k != _UNSET_BY_DEFAULT}
    return node


def crd(kind: Kind) -> Schema:
    """The CustomResourceDefinition of one kind."""
    spec = part_schema(kind.spec)
    status = part_schema(kind.status)
    description = (kind.model.__doc__ or "").strip()
    spec.pop("default", None)
    root: Schema = {
        "type": "object",
        "description": " ".join(description.split()),
        "properties": {
            "apiVersion": {"type": "string", "description": "shoal.dev/v1alpha1"},
            "kind": {"type": "string", "description": kind.name},
            # Only so that a rule on the name can report it as the field at fault.
            "metadata": {"type": "object", "properties": {"name": {"type": "string"}}},
            "spec": spec,
            "status": status,
        },
        "required": ["spec"],
    }
    root_rules = getattr(kind.model, "rules", ())
    if root_rules:
        root["x-kubernetes-validations"] = [rule.as_validation() for rule in root_rules]
    version: Schema = {
        "name": VERSION,
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "additionalPrinterColumns": [dict(c) for c in kind.printer_columns],
    }
    if kind.selectable_fields:
        version["selectableFields"] = [{"jsonPath": path} for path in kind.selectable_fields]
    version["schema"] = {"openAPIV3Schema": root}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {
            "name": kind.crd_name,
            "labels": {"app.kubernetes.io/name": "shoal", "app.kubernetes.io/part-of": "shoal"},
            "annotations": dict(KEPT_ON_UNINSTALL),
        },
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind.name,
                "listKind": f"{kind.name}List",
                "plural": kind.plural,
                "singular": kind.name.lower(),
                "shortNames": list(kind.short_names),
                "categories": ["shoal"],
            },
            "scope": kind.scope,
            "versions": [version],
        },
    }


def all_crds() -> list[Schema]:
    return [crd(kind) for kind in KINDS]
