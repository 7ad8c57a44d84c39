"""Which namespaces a TenantPool admits (pure), shared by the operator and the
ValidatingAdmissionPolicy that enforces the same rule in the API server."""

from __future__ import annotations

from collections.abc import Mapping

from shoal.api.common import LabelSelector
from shoal.api.tenantpool import TenantPool


def selector_matches(selector: LabelSelector, labels: Mapping[str, str]) -> bool:
    if any(labels.get(k) != v for k, v in selector.match_labels.items()):
        return False
    for req in selector.match_expressions:
        present = req.key in labels
        if req.operator == "In" and not (present and labels[req.key] in req.values):
            return False
        if req.operator == "NotIn" and present and labels[req.key] in req.values:
            return False
        if req.operator == "Exists" and not present:
            return False
        if req.operator == "DoesNotExist" and present:
            return False
    return True


def admits(pool: TenantPool, namespace: str, labels: Mapping[str, str]) -> bool:
    """Whether ``pool`` admits the namespace named ``namespace`` with ``labels``."""
    tenants = pool.spec.tenants
    if namespace in tenants.namespaces:
        return True
    return tenants.selector is not None and selector_matches(tenants.selector, labels)
