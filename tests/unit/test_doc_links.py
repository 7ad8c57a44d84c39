"""Every relative link in the README, the changelog and docs/ leads somewhere: the file
exists, and a #fragment into a Markdown file names one of its headings (as GitHub
derives heading anchors)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DOCS = [
    REPO / "README.md",
    REPO / "CHANGELOG.md",
    *sorted((REPO / "docs").rglob("*.md")),
]

FENCE = re.compile(r"^(```|~~~).*?^\1", re.MULTILINE | re.DOTALL)
CODE_SPAN = re.compile(r"(`+).+?\1", re.DOTALL)
# [text](target) and ![alt](target), with an optional "title".
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*#*\s*$", re.MULTILINE)
EXTERNAL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def prose(text: str) -> str:
    """The text with code blocks and code spans removed: what they hold is not a link."""
    return CODE_SPAN.sub("", FENCE.sub("", text))


def anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lower case, punctuation dropped, spaces as hyphens,
    a repeated anchor numbered -1, -2, ..."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", markdown)):
        text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link: its text
        slug = re.sub(r"[^\w\- ]", "", text.replace("`", "").lower()).replace(" ", "-")
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        out.add(slug if count == 0 else f"{slug}-{count}")
    return out


def broken_links(doc: Path) -> list[str]:
    broken = []
    for target in LINK.findall(prose(doc.read_text())):
        if EXTERNAL.match(target):
            continue
        path, _, fragment = target.partition("#")
        dest = (doc.parent / path).resolve() if path else doc
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif fragment and dest.suffix == ".md" and fragment not in anchors(dest.read_text()):
            where = os.path.relpath(dest, doc.parent)
            broken.append(f"{target}: no heading #{fragment} in {where}")
    return broken


@pytest.mark.parametrize("doc", DOCS, ids=lambda doc: str(doc.relative_to(REPO)))
def test_relative_links_resolve(doc: Path) -> None:
    assert doc.exists(), f"{doc.relative_to(REPO)} is missing"
    assert broken_links(doc) == []


def test_the_checker_finds_a_broken_link(tmp_path: Path) -> None:
    (tmp_path / "there.md").write_text(
        "# There\n\n## A `code` heading, twice\n\n## A `code` heading, twice\n"
    )
    doc = tmp_path / "doc.md"
    doc.write_text(
        "[ok](there.md) [ok](there.md#a-code-heading-twice-1) [web](https://example.org/x)\n"
        "`[in code](nowhere.md)`\n\n```\n[in a block](nowhere.md)\n```\n"
        "[missing](nowhere.md) [bad anchor](there.md#elsewhere) [self](#there-is-none)\n"
    )
    assert broken_links(doc) == [
        "nowhere.md: no such file",
        "there.md#elsewhere: no heading #elsewhere in there.md",
        "#there-is-none: no heading #there-is-none in doc.md",
    ]
