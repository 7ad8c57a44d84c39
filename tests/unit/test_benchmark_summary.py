"""The README's benchmark figures are the results files', never typed by hand."""

from __future__ import annotations

from benchmarks.summary import README, readme_block, render


def test_the_readme_quotes_the_committed_results() -> None:
    assert readme_block(README.read_text()) == render(), (
        "README.md's benchmark block differs from benchmarks/results/: "
        "run python -m benchmarks.summary --write"
    )
