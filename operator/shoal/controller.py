"""Dispatch: each key the work queue hands out goes to its kind's reconciler.

Triggers (a watch event on the object, on a BatchPolicy or TenantPool it uses, on one
of its children, or the periodic resync) only *request* a pass: they put the object's
key on the work queue, which folds repeated requests into one. Each pass re-reads the
object, so whatever triggered it leads to the same level-triggered pass. A pass that
fails is retried with a per-key exponential backoff rather than waiting for the next
resync.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from typing import cast

from shoal.kube.client import TRANSIENT_STATUSES, ApiError
from shoal.reconcile.model import reconcile_model
from shoal.reconcile.policy import reconcile_policy
from shoal.reconcile.pool import reconcile_pool
from shoal.state import Operator
from shoal.telemetry import RECONCILE_SECONDS, RECONCILES, RETRIES

log = logging.getLogger(__name__)

RECONCILERS: dict[str, Callable[[Operator, str, str], None]] = {
    "InferenceModel": reconcile_model,
    "TenantPool": lambda op, _namespace, name: reconcile_pool(op, name),
    "BatchPolicy": reconcile_policy,
}


def dispatch(op: Operator, key: Hashable) -> None:
    """Run the pass ``key`` asks for; account for it; retry it later if it failed."""
    kind, namespace, name = cast(tuple[str, str, str], key)
    started = time.monotonic()
    result = "ok"
    try:
        RECONCILERS[kind](op, namespace, name)
    except ApiError as exc:
        result = "error"
        delay = op.queue.retry(key, transient=exc.status in TRANSIENT_STATUSES)
        log.warning(
            "%s %s/%s: API error %s %s; retrying in %.1fs",
            kind, namespace, name, exc.status, exc.reason, delay,
        )  # fmt: skip
    except Exception:
        result = "error"
        delay = op.queue.retry(key)
        log.exception("%s %s/%s: pass failed; retrying in %.1fs", kind, namespace, name, delay)
    else:
        op.queue.forget(key)
    finally:
        RECONCILES.labels(kind, result).inc()
        RECONCILE_SECONDS.labels(kind, result).observe(time.monotonic() - started)
        if result == "error":
            RETRIES.labels(kind).inc()
