"""The README's benchmark figures are the results files', never typed by hand."""

from __future__ import annotations

from benchmarks.summary import (
    ELASTIC_BEGIN,
    ELASTIC_END,
    GATEWAY_BEGIN,
    GATEWAY_DOC,
    GATEWAY_END,
    README,
    RELIABILITY_BEGIN,
    RELIABILITY_END,
    elastic_block,
    gateway_doc_block,
    readme_block,
    reliability_block,
    render,
)


def test_the_readme_quotes_the_committed_results() -> None:
    assert readme_block(README.read_text()) == render(), (
        "README.md's benchmark block differs from benchmarks/results/: "
        "run python -m benchmarks.summary --write"
    )


def test_the_gateway_doc_quotes_the_committed_results() -> None:
    doc = GATEWAY_DOC.read_text()
    assert readme_block(doc, GATEWAY_BEGIN, GATEWAY_END) == gateway_doc_block(), (
        "docs/gateway.md's figures differ from benchmarks/results/gateway.json: "
        "run python -m benchmarks.summary --write"
    )


def test_the_reliability_section_quotes_the_chaos_results() -> None:
    assert (
        readme_block(README.read_text(), RELIABILITY_BEGIN, RELIABILITY_END) == reliability_block()
    ), (
        "README.md's reliability section differs from benchmarks/results/chaos.json: "
        "run python -m benchmarks.summary --write"
    )


def test_the_elastic_capacity_section_quotes_the_kueue_results() -> None:
    assert readme_block(README.read_text(), ELASTIC_BEGIN, ELASTIC_END) == elastic_block(), (
        "README.md's elastic-capacity figures differ from "
        "benchmarks/results/elastic_capacity.json: run python -m benchmarks.summary --write"
    )
