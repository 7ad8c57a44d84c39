"""The docs' measured figures are the results files', never typed by hand."""

from __future__ import annotations

from pathlib import Path

from benchmarks.summary import (
    BEGIN,
    BENCHMARKS_DOC,
    ELASTIC_BEGIN,
    ELASTIC_END,
    END,
    GATEWAY_BEGIN,
    GATEWAY_DOC,
    GATEWAY_END,
    RELIABILITY_BEGIN,
    RELIABILITY_END,
    blocks,
    doc_block,
    elastic_block,
    gateway_doc_block,
    reliability_block,
    render,
)

REGENERATE = "run python -m benchmarks.summary --write"


def quoted(path: Path, begin: str, end: str) -> str:
    return doc_block(path.read_text(), begin, end)


def test_the_benchmarks_doc_quotes_the_committed_results() -> None:
    assert quoted(BENCHMARKS_DOC, BEGIN, END) == render(), (
        f"docs/benchmarks.md's benchmark block differs from benchmarks/results/: {REGENERATE}"
    )


def test_the_gateway_doc_quotes_the_committed_results() -> None:
    assert quoted(GATEWAY_DOC, GATEWAY_BEGIN, GATEWAY_END) == gateway_doc_block(), (
        f"docs/gateway.md's figures differ from benchmarks/results/gateway.json: {REGENERATE}"
    )


def test_the_chaos_figures_quote_the_chaos_results() -> None:
    assert quoted(BENCHMARKS_DOC, RELIABILITY_BEGIN, RELIABILITY_END) == reliability_block(), (
        "docs/benchmarks.md's chaos figures differ from benchmarks/results/chaos.json: "
        f"{REGENERATE}"
    )


def test_the_elastic_capacity_figures_quote_the_kueue_results() -> None:
    assert quoted(BENCHMARKS_DOC, ELASTIC_BEGIN, ELASTIC_END) == elastic_block(), (
        "docs/benchmarks.md's elastic-capacity figures differ from "
        f"benchmarks/results/elastic_capacity.json: {REGENERATE}"
    )


def test_write_refreshes_every_block_the_tests_check() -> None:
    """--write and these tests cover the same blocks: none is checked but never written."""
    written = {(path, begin) for path, begin, _, _ in blocks()}
    assert written == {
        (BENCHMARKS_DOC, BEGIN),
        (BENCHMARKS_DOC, RELIABILITY_BEGIN),
        (BENCHMARKS_DOC, ELASTIC_BEGIN),
        (GATEWAY_DOC, GATEWAY_BEGIN),
    }


def test_no_generated_block_is_left_in_the_readme() -> None:
    """The README stays short: measured figures live in docs/benchmarks.md."""
    readme = (BENCHMARKS_DOC.parents[1] / "README.md").read_text()
    for _, begin, _, _ in blocks():
        assert begin not in readme
