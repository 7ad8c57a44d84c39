"""`shoal render` and the operator's status refuse a resource in the words of its CRD
(shoal.api.refusal_words): over the whole malformed corpus, every refusal names the
field the API server names and says what is expected in Shoal's own words, never a
regular expression, pydantic's wording or a link to its docs."""

from __future__ import annotations

import re

import pytest
from pydantic import ValidationError

from shoal.api.crd import KINDS
from shoal.api.inferencemodel import InferenceModel
from shoal.api.refusal_words import in_plain_words, invalid_message
from tests.support.malformed import CASES, Case
from tests.support.resources import example

MODELS = {kind.name: kind.model for kind in KINDS}
SPEC_CASES = [c for c in CASES if c.pool is None]

# What the API server says in its own words, which pydantic cannot say the same way:
# its messages for a schema's bounds and types, which the corpus also quotes.
SERVER_WORDS = (
    "should match",
    "Unsupported value",
    "Required value",
    "greater than",
    "less than or equal",
    "must not be null",
    "Duplicate value",
    "Invalid value",
    "unknown field",
    "positive_quantity",
    "must have at most",
    "chars long",
    "at least 1 items",
    "every key must be",
    "may not be more than",
    "at most 0",
    "must not validate",
    "Too many",
    "must be of type",
)
# Marks of the words this module replaces.
NOT_PLAIN = re.compile(r"\(\?P<|\^\(|errors\.pydantic\.dev|Input should|\[type=|Value error")


def _refused(case: Case) -> list[str]:
    with pytest.raises(ValidationError) as caught:
        MODELS[case.kind].model_validate(case.build())
    return in_plain_words(caught.value)


def _field(expected: str) -> str:
    """The path of the field the API server names in a case's first fragment."""
    quoted = re.match(r'unknown field "(.*)"', expected)
    return quoted.group(1) if quoted else expected.split(":")[0]


def test_the_corpus_has_refusals_of_every_kind_to_read() -> None:
    assert len(SPEC_CASES) >= 200
    assert {c.kind for c in SPEC_CASES} == set(MODELS)


@pytest.mark.parametrize("case", SPEC_CASES, ids=lambda c: c.id)
def test_a_refusal_names_the_field_and_says_what_it_expects(case: Case) -> None:
    lines = _refused(case)
    text = "\n".join(lines)
    assert not NOT_PLAIN.search(text), text
    paths = [line.split(": ", 1)[0] for line in lines]
    field = _field(case.expect[0])
    # The same field; or the list holding the entry the server names ([1]); or, where
    # the server names a map for one of its keys, that key of the map.
    assert any(
        field == path
        or (field.startswith(path) and field[len(path)] == "[")
        or path.startswith(f"{field}.")
        for path in paths
    ), (field, lines)
    own = [f for f in case.expect[1:] if not any(w in f for w in SERVER_WORDS) and f != "string"]
    for fragment in own:
        assert fragment in text, (fragment, lines)


def test_a_format_says_only_the_rules_the_value_breaks() -> None:
    doc = example("InferenceModel", "search-ranker")
    doc["spec"]["model"]["storageUri"] = "s3://models/ranker.tar.gz"
    with pytest.raises(ValidationError) as caught:
        InferenceModel.model_validate(doc)
    [line] = in_plain_words(caught.value)
    assert line.startswith("spec.model.storageUri: must name the directory"), line
    assert "printable ASCII" not in line  # the rule it keeps is not quoted


def test_a_status_message_is_one_line_and_a_terminal_gets_one_per_field() -> None:
    doc = example("InferenceModel", "search-ranker")
    doc["spec"]["runtime"] = {"cpu": "0", "memory": "lots"}
    with pytest.raises(ValidationError) as caught:
        InferenceModel.model_validate(doc)
    status = invalid_message("The spec", caught.value, one_line=True)
    assert "\n" not in status
    assert status == (
        "The spec is invalid: spec.runtime.cpu: must be a positive quantity such as 500m or "
        "8Gi; spec.runtime.memory: must be a positive quantity such as 500m or 8Gi"
    )
    terminal = invalid_message("InferenceModel team-search/ranker", caught.value)
    assert terminal.splitlines()[1:] == [
        "  spec.runtime.cpu: must be a positive quantity such as 500m or 8Gi",
        "  spec.runtime.memory: must be a positive quantity such as 500m or 8Gi",
    ]
