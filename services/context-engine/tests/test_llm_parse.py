"""Reading JSON out of real model answers: reasoning blocks, fences, prose, bad shapes."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from context_engine.llm.errors import LLMOutputError
from context_engine.llm.parse import (
    as_list,
    parse_json_payload,
    remove_trailing_commas,
    strip_thinking,
)

ANSWER = {"entities": [{"type": "person", "name": "Priya", "confidence": 0.9}], "relations": []}
TEXT = json.dumps(ANSWER)


@pytest.mark.parametrize(
    "wrapped",
    [
        TEXT,
        f"  \n{TEXT}\n ",
        f"```json\n{TEXT}\n```",
        f"```\n{TEXT}\n```",
        f"```JSON {TEXT}```",
        f"Here is the JSON you asked for:\n```json\n{TEXT}\n```\nLet me know if you need more.",
        f"<think>The user wants entities. Priya is a person {{maybe}}.</think>\n{TEXT}",
        f"<think>\nreasoning [1] with brackets\n</think>\n\n```json\n{TEXT}\n```",
        # the chat template opened the block: only its end is in the answer
        f"Okay, let me look for names. </think>{TEXT}",
        # a block never closed: the answer follows the reasoning
        f"<think>Let me think. The answer is:\n{TEXT}",
        f"<THINKING>x</THINKING>{TEXT}",
        f"Sure! {TEXT} Hope this helps.",
        f"Entities [see below]: {TEXT}",
        TEXT.replace("]}]", "],}],").replace('"relations": []', '"relations": [],'),
    ],
)
def test_answer_found_in_every_wrapping(wrapped: str) -> None:
    assert parse_json_payload(wrapped) == ANSWER


def test_longest_value_wins_over_short_brackets_in_prose() -> None:
    assert parse_json_payload('See [1] and [2]: [{"a": 1}, {"b": [2, 3]}] (done)') == [
        {"a": 1},
        {"b": [2, 3]},
    ]


def test_a_bare_list_and_scalars_in_fences() -> None:
    assert parse_json_payload('[{"name": "Ravi"}]') == [{"name": "Ravi"}]
    assert parse_json_payload("```json\n42\n```") == 42
    assert parse_json_payload('```\n"just a string"\n```') == "just a string"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   \n", "empty"),
        (None, "empty"),
        ("<think>only thinking about it</think>", "only reasoning"),
        ("I could not find any entities in this transcript.", "no JSON"),
        ('{"entities": [{"type": "person", "name": "Pri', "cut off"),
        ("```json\n{not json at all}\n```", "no JSON"),
    ],
)
def test_garbage_raises_a_clear_error(text: str | None, message: str) -> None:
    with pytest.raises(LLMOutputError, match=message):
        parse_json_payload(text)


def test_error_quotes_a_short_snippet() -> None:
    garbage = "no json here " * 100
    with pytest.raises(LLMOutputError) as info:
        parse_json_payload(garbage)
    assert "no json here" in str(info.value)
    assert len(str(info.value)) < 300


def test_trailing_commas_removed_outside_strings_only() -> None:
    assert remove_trailing_commas('{"a": [1, 2,], "b": ",]",}') == '{"a": [1, 2], "b": ",]"}'
    assert remove_trailing_commas('{"a": "x\\",}"}') == '{"a": "x\\",}"}'


def test_strip_thinking() -> None:
    assert strip_thinking("<think>a</think>b<think>c</think>d") == "bd"
    assert strip_thinking("partial</think>answer") == "answer"
    assert strip_thinking("<think>never closed answer") == "never closed answer"


def test_as_list_shapes() -> None:
    item = {"type": "person", "name": "Priya"}
    keys = ("name", "type")
    assert as_list([item], "entities", item_keys=keys) == [item]
    assert as_list({"entities": [item]}, "entities", item_keys=keys) == [item]
    assert as_list({"entities": item}, "entities", item_keys=keys) == [item]
    assert as_list(item, "entities", item_keys=keys) == [item]
    assert as_list({"people": [item], "places": [{"name": "Pune"}], "n": 2}, "entities") == [
        item,
        {"name": "Pune"},
    ]
    assert as_list({"entities": None}, "entities") == []
    assert as_list(None, "entities") == []
    assert as_list("text", "entities") == []


# --- properties: any JSON value, however wrapped, comes back unchanged ---

# Strings without the wrappers' own markers (a think tag or a fence inside a string value is
# ambiguous by construction).
_text = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="<`"), max_size=12
)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(10**12), max_value=10**12)
    | st.floats(allow_nan=False, allow_infinity=False, width=32)
    | _text,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_text, children, max_size=4),
    max_leaves=12,
)
_containers = st.one_of(st.lists(_json, max_size=4), st.dictionaries(_text, _json, max_size=4))
# Prose has no brackets, braces or quotes: what they start would be a competing JSON value.
_prose = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ABC.,:;!?-\n", max_size=40)
_thinking = st.text(alphabet="abcdefghijklmnopqrstuvwxyz .,[]{}:\n0123", max_size=60)


def _dump(value: Any, indent: int | None) -> str:
    return json.dumps(value, indent=indent, ensure_ascii=False)


@settings(max_examples=150, deadline=None)
@given(value=_json, indent=st.sampled_from([None, 2]), lang=st.sampled_from(["json", "", "JSON"]))
def test_any_json_in_a_fence_round_trips(value: Any, indent: int | None, lang: str) -> None:
    assert parse_json_payload(f"```{lang}\n{_dump(value, indent)}\n```") == value


@settings(max_examples=150, deadline=None)
@given(value=_json, thinking=_thinking, fenced=st.booleans())
def test_any_json_after_thinking_round_trips(value: Any, thinking: str, fenced: bool) -> None:
    body = _dump(value, None)
    if fenced:
        body = f"```json\n{body}\n```"
    assert parse_json_payload(f"<think>{thinking}</think>\n{body}") == value


@settings(max_examples=150, deadline=None)
@given(value=_containers, before=_prose, after=_prose, indent=st.sampled_from([None, 2]))
def test_any_object_or_array_in_prose_round_trips(
    value: Any, before: str, after: str, indent: int | None
) -> None:
    assert parse_json_payload(f"{before} {_dump(value, indent)} {after}") == value


@settings(max_examples=100, deadline=None)
@given(value=_containers, thinking=_thinking, before=_prose)
def test_any_container_after_an_unopened_think_close_round_trips(
    value: Any, thinking: str, before: str
) -> None:
    assert parse_json_payload(f"{thinking}</think>{before} {_dump(value, None)}") == value


# --- answers cut off by the token limit ---


def test_cut_off_answer_keeps_its_complete_items() -> None:
    items = [{"type": "person", "name": "Priya"}, {"type": "place", "name": "Pune"}]
    full = json.dumps({"entities": items, "relations": []})
    cut = full[: full.index("Pune") + 2]  # inside the second item
    assert parse_json_payload(cut) == {"entities": items[:1]}
    assert parse_json_payload("```json\n" + cut) == {"entities": items[:1]}
    assert parse_json_payload(f"<think>ok</think>{cut}") == {"entities": items[:1]}


def test_cut_off_answer_with_nothing_complete_is_an_error() -> None:
    with pytest.raises(LLMOutputError, match="cut off"):
        parse_json_payload('{"entities": [{"type": "person", "name": "Pri')


@settings(max_examples=200, deadline=None)
@given(value=_containers, data=st.data())
def test_any_cut_of_json_parses_or_raises_the_output_error(value: Any, data: Any) -> None:
    text = _dump(value, None)
    cut = data.draw(st.integers(min_value=0, max_value=len(text)))
    try:
        parse_json_payload(text[:cut])
    except LLMOutputError:
        pass


@settings(max_examples=200, deadline=None)
@given(text=st.text(max_size=200))
def test_any_text_parses_or_raises_the_output_error(text: str) -> None:
    try:
        parse_json_payload(text)
    except LLMOutputError:
        pass


def test_cut_off_answer_after_prose_with_brackets() -> None:
    cut = 'Result [v2] (see {notes}): {"entities": [{"name": "Priya"}, {"name": "Pu'
    assert parse_json_payload(cut) == {"entities": [{"name": "Priya"}]}
