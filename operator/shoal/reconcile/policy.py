"""Reconciling a BatchPolicy: it has no objects of its own, only a status; its models
re-render when its spec changes."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from shoal.api.batchpolicy import BatchPolicy
from shoal.api.common import parse_object
from shoal.api.conditions import Cond
from shoal.api.refusal_words import invalid_message
from shoal.reconcile.status import assemble, kstatus, write_status
from shoal.state import Operator


def models_using(op: Operator, namespace: str, policy: str) -> list[dict[str, Any]]:
    return [
        m
        for m in op.cache.all("InferenceModel", [namespace])
        if ((m.get("spec") or {}).get("batchPolicy") or {}).get("name") == policy
    ]


def reconcile_policy(op: Operator, namespace: str, name: str) -> None:
    users = models_using(op, namespace, name)
    body = op.cache.get("BatchPolicy", name, namespace)
    gone = body is None or bool(body["metadata"].get("deletionTimestamp"))
    changed = gone or (body or {}).get("status", {}).get("observedGeneration") != (body or {}).get(
        "metadata", {}
    ).get("generation")
    if changed:  # its models re-render their configs, or report it missing
        for model in users:
            op.request_model(namespace, model["metadata"]["name"])
    if body is None or gone:
        return
    try:
        parse_object(BatchPolicy, body)
    except ValidationError as exc:  # only an object stored under an older schema
        message = invalid_message("The spec", exc, one_line=True)
        ready = Cond("Ready", "False", "InvalidSpec", message)
        invalid = True
    else:
        ready = Cond("Ready", "True", "Accepted", f"Used by {len(users)} InferenceModel(s).")
        invalid = False
    status = assemble(body, [ready, *kstatus(ready, stalled=invalid)], models=len(users))
    write_status(op.kube, op.cache, body, status)
