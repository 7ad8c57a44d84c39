"""Custom resources in tests: loading the examples, sending objects to the API server."""

from __future__ import annotations

import copy
import functools
import json
from pathlib import Path
from typing import Any, cast

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from shoal.api.crd import KINDS, Kind

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
GROUP, VERSION = "shoal.dev", "v1alpha1"


def kind_named(name: str) -> Kind:
    return next(k for k in KINDS if k.name == name)


@functools.cache
def _parsed_examples() -> tuple[dict[str, Any], ...]:
    """The examples, parsed once: YAML parsing, not the tests, dominated a corpus
    test's time (every case builds from an example)."""
    docs: list[dict[str, Any]] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs += [d for d in yaml.safe_load_all(path.read_text()) if d]
    return tuple(docs)


def example_documents() -> list[dict[str, Any]]:
    """Every example document, a fresh copy the caller may change."""
    return copy.deepcopy(list(_parsed_examples()))


def example(kind: str, name: str) -> dict[str, Any]:
    for doc in _parsed_examples():
        if doc["kind"] == kind and doc["metadata"]["name"] == name:
            return copy.deepcopy(doc)
    raise KeyError(f"no example {kind}/{name}")


class Rejected(Exception):  # noqa: N818 - it names the outcome, as the server words it
    """The API server refused an object; ``message`` is what it said."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status}: {message}")
        self.status = status
        self.message = message


def create(
    api: client.ApiClient,
    obj: dict[str, Any],
    namespace: str | None = None,
    *,
    dry_run: bool = False,
) -> dict[str, Any]:
    """Create a shoal.dev object with strict field validation, as `kubectl apply` does.

    With ``dry_run`` the server judges the object as it would a create (schema, CEL
    rules, admission policies, defaulting and pruning) and answers with the object it
    would store, storing nothing: no name to clash with, nothing to delete."""
    kind = kind_named(obj["kind"])
    custom = client.CustomObjectsApi(api)
    mode = "All" if dry_run else None
    try:
        if kind.scope == "Namespaced":
            ns = namespace or obj["metadata"].get("namespace") or "default"
            body = copy.deepcopy(obj)
            body["metadata"]["namespace"] = ns
            result = custom.create_namespaced_custom_object(
                GROUP, VERSION, ns, kind.plural, body, field_validation="Strict", dry_run=mode
            )
        else:
            result = custom.create_cluster_custom_object(
                GROUP, VERSION, kind.plural, obj, field_validation="Strict", dry_run=mode
            )
    except ApiException as exc:
        raise Rejected(exc.status, _server_message(exc.body)) from None
    # The client types the result `object`: it is the created object, a JSON mapping.
    return dict(cast("dict[str, Any]", result))


def _server_message(body: str | None) -> str:
    """The message of the Status the API server answered with, else the body as it came."""
    if body is not None:
        try:
            return json.loads(body)["message"]
        except (TypeError, ValueError, KeyError):
            pass
    return str(body)


def delete(api: client.ApiClient, obj: dict[str, Any]) -> None:
    kind = kind_named(obj["kind"])
    custom = client.CustomObjectsApi(api)
    try:
        if kind.scope == "Namespaced":
            custom.delete_namespaced_custom_object(
                GROUP, VERSION, obj["metadata"]["namespace"], kind.plural, obj["metadata"]["name"]
            )
        else:
            custom.delete_cluster_custom_object(
                GROUP, VERSION, kind.plural, obj["metadata"]["name"]
            )
    except ApiException as exc:
        if exc.status != 404:
            raise
