"""The doctor's findings for a person (one line each, the fix below each problem) or
for a program (JSON)."""

from __future__ import annotations

import json
import shutil
import textwrap

from shoal.doctor.findings import Finding, Status, failed

MARKS = {Status.OK: "ok", Status.WARN: "WARN", Status.FAIL: "FAIL", Status.SKIP: "skip"}
INDENT = " " * 6


def table(findings: list[Finding], width: int | None = None) -> str:
    """``<status>  <what>: <found>`` per finding, wrapped to the terminal's width, with
    ``fix:`` indented below each that is not ok; a summary line last."""
    if width is None:
        width = min(max(shutil.get_terminal_size((100, 24)).columns, 80), 140)
    lines: list[str] = []
    for finding in findings:
        head = f"{MARKS[finding.status]:<4}  "
        lines += _wrapped(head, f"{finding.name}: {finding.message}", INDENT, width)
        if finding.fix and finding.status is not Status.OK:
            lines += _wrapped(INDENT + "fix: ", finding.fix, INDENT + "     ", width)
    lines.append(summary(findings))
    return "\n".join(lines) + "\n"


def _wrapped(head: str, text: str, indent: str, width: int) -> list[str]:
    return textwrap.wrap(
        text,
        width=width,
        initial_indent=head,
        subsequent_indent=indent,
        break_on_hyphens=False,
        break_long_words=False,
    ) or [head.rstrip()]


def summary(findings: list[Finding]) -> str:
    counts = {status: sum(f.status is status for f in findings) for status in Status}
    verdict = "problems found" if failed(findings) else "no problems found"
    parts = ", ".join(f"{counts[s]} {s.value}" for s in Status if counts[s])
    return f"shoal doctor: {verdict} ({parts or 'nothing checked'})"


def as_json(findings: list[Finding]) -> str:
    return json.dumps(
        {"ok": not failed(findings), "findings": [f.as_dict() for f in findings]}, indent=2
    )
