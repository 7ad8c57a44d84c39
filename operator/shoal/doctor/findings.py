"""What a check found: one line of the doctor's report."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from enum import StrEnum

# The checks' groups, in the order they run (what ``shoal doctor --skip`` names).
CRDS, ADMISSION, OPERATOR = "crds", "admission", "operator"
GPUS, CAPACITY = "gpus", "capacity"
METRICS_API, AUTOSCALERS, PROMETHEUS = "metrics-api", "autoscalers", "prometheus"
CHECKS = (CRDS, ADMISSION, OPERATOR, GPUS, CAPACITY, METRICS_API, AUTOSCALERS, PROMETHEUS)


class Status(StrEnum):
    OK = "ok"
    WARN = "warn"  # works, but worth a look; never fails the run
    FAIL = "fail"  # broken: the run exits non-zero
    SKIP = "skip"  # could not be checked (nothing to check against, or no access)


@dataclass(frozen=True)
class Finding:
    """``check`` is the group (what ``--skip`` names), ``name`` the object or aspect
    checked, ``message`` what was found, ``fix`` how to put it right (empty when ok)."""

    check: str
    name: str
    status: Status
    message: str
    fix: str = ""

    def as_dict(self) -> dict[str, str]:
        return {key: str(value) for key, value in asdict(self).items()}


def failed(findings: list[Finding]) -> bool:
    return any(f.status is Status.FAIL for f in findings)
