"""The operator's ClusterRole, written from the table of kinds (shoal.api.kinds).

Least privilege by construction: a rule per kind, with exactly the verbs its entry
names and the reason it is there as the rule's comment. The cluster tier runs the
operator with this ServiceAccount's token and nothing else, so a verb missing here
fails a test."""

from __future__ import annotations

import textwrap
from typing import Any

import yaml

from shoal.api.kinds import EXTRA_RULES, KINDS

ROLE = "shoal-operator"
SERVICE_ACCOUNT_NAMESPACE = "shoal-system"


def rules() -> list[tuple[str, dict[str, Any]]]:
    """(comment, rule) for every rule of the ClusterRole, in the table's order (pure)."""
    out: list[tuple[str, dict[str, Any]]] = []
    for kind in KINDS:
        out.append(
            (
                kind.why,
                {"apiGroups": [kind.group], "resources": [kind.plural], "verbs": list(kind.verbs)},
            )
        )
        if kind.status_verbs:
            out.append(
                (
                    f"A {kind.kind}'s status: the only part of it the operator writes.",
                    {
                        "apiGroups": [kind.group],
                        "resources": [f"{kind.plural}/status"],
                        "verbs": list(kind.status_verbs),
                    },
                )
            )
    out.extend(EXTRA_RULES)
    return out


def _comment(text: str, indent: str) -> str:
    return "".join(f"{indent}# {line}\n" for line in textwrap.wrap(text, 84))


def _rule(rule: dict[str, Any]) -> str:
    """One rule in flow style (``resources: [configmaps]``), as admins read RBAC."""
    lines = []
    for key, values in rule.items():
        flow = yaml.safe_dump(values, default_flow_style=True, width=200).strip()
        lines.append(f"{key}: {flow}")
    return "  - " + "\n    ".join(lines) + "\n"


def manifest(header: str) -> str:
    """manifests/base/rbac.yaml: the ClusterRole and its binding (pure)."""
    body = [
        header,
        "# Least privilege: exactly the verbs the operator uses, no wildcards, no Secrets.\n",
        "apiVersion: rbac.authorization.k8s.io/v1\n",
        "kind: ClusterRole\n",
        "metadata:\n",
        f"  name: {ROLE}\n",
        "  labels:\n",
        "    app.kubernetes.io/name: shoal\n",
        "rules:\n",
    ]
    for comment, rule in rules():
        body.append(_comment(comment, "  "))
        body.append(_rule(rule))
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": ROLE, "labels": {"app.kubernetes.io/name": "shoal"}},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ROLE},
        "subjects": [
            {"kind": "ServiceAccount", "name": ROLE, "namespace": SERVICE_ACCOUNT_NAMESPACE}
        ],
    }
    body.append("---\n" + yaml.safe_dump(binding, sort_keys=False, width=100))
    return "".join(body)


def chart_rules(header: str) -> str:
    """The chart's copy of the rules (Helm cannot read files outside the chart) (pure)."""
    return header + yaml.safe_dump([rule for _, rule in rules()], sort_keys=False, width=100)
