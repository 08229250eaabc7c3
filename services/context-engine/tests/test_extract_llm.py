"""The LLM extractor against the scripted test double (real HTTP): the request, reading the
answer item by item, gates, dedup, linking, windows, retries and the Claude fallback."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from scripted_llm_server import (
    ScriptedError,
    ScriptedLLMServer,
    request_schema,
    schema_name,
    scripted_llm_server,
)

from context_engine.config import Settings
from context_engine.extract.llm import (
    EXTRACTION_SCHEMA,
    PREDICATES,
    SCHEMA_NAME,
    LLMExtractor,
    format_transcript,
)
from context_engine.extract.schema import ENTITY_TYPES, SegmentText
from context_engine.llm import LLMOutputError, LLMUnavailableError, OpenAICompatibleClient
from context_engine.llm.claude import ClaudeClient
from context_engine.llm.fallback import FallbackClient

SEGMENTS = [
    SegmentText("s1", "Asha", "My wife Priya and I are moving to Pune next month."),
    SegmentText("s2", "Priya", "I'll call the movers tomorrow morning."),
    SegmentText("s3", "Asha", "I love jazz but I avoid coffee now."),
]


def entity(
    type_: str, name: str, confidence: float = 0.9, segment_id: str = "", evidence: str = "",
    **extra: Any,
) -> dict[str, Any]:  # fmt: skip
    return {
        "segment_id": segment_id, "type": type_, "name": name, "evidence": evidence,
        "properties": [], "sensitivity": "open", "confidence": confidence, **extra,
    }  # fmt: skip


def relation(
    subject: str, predicate: str, obj: str, confidence: float = 0.9, segment_id: str = "",
    evidence: str = "",
) -> dict[str, Any]:  # fmt: skip
    return {
        "segment_id": segment_id, "subject": subject, "predicate": predicate, "object": obj,
        "evidence": evidence, "confidence": confidence,
    }  # fmt: skip


def answer(entities: list[Any], relations: list[Any] | None = None) -> dict[str, Any]:
    return {"entities": entities, "relations": relations or []}


def lines_of(request: dict[str, Any]) -> list[str]:
    return request["messages"][1]["content"].splitlines()[1:]


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with scripted_llm_server() as s:
        yield s


@pytest.fixture
async def client(server: ScriptedLLMServer) -> AsyncIterator[OpenAICompatibleClient]:
    c = OpenAICompatibleClient(server.url, "test-model", max_retries=0)
    yield c
    await c.aclose()


@pytest.fixture
def extractor(client: OpenAICompatibleClient) -> LLMExtractor:
    return LLMExtractor(client, window_segments=40)


def always(value: Any) -> Callable[[dict[str, Any]], Any]:
    return lambda request: value


async def test_request_and_a_full_answer(
    server: ScriptedLLMServer, extractor: LLMExtractor
) -> None:
    server.reply(
        always(
            answer(
                [
                    entity(
                        "person",
                        "Priya",
                        0.95,
                        "s1",
                        "My wife Priya",
                        properties=[{"key": "relation", "value": "wife"}],
                        sensitivity="private",
                    ),
                    entity("place", "Pune", 0.9, "s1", "moving to Pune"),
                    entity("promise", "call the movers", 0.85, "s2", "I'll call the movers"),
                ],
                [relation("Asha", "spouse", "Priya", 0.9, "s1", "My wife Priya")],
            )
        )
    )
    result = await extractor.extract(SEGMENTS)

    (request,) = server.chat_requests()
    assert schema_name(request) == SCHEMA_NAME
    assert request_schema(request) == EXTRACTION_SCHEMA
    assert request["response_format"]["json_schema"]["strict"] is True
    assert lines_of(request) == [
        "[s1] Asha: My wife Priya and I are moving to Pune next month.",
        "[s2] Priya: I'll call the movers tomorrow morning.",
        "[s3] Asha: I love jazz but I avoid coffee now.",
    ]
    assert [(e.type, e.name, e.segment_id) for e in result.entities] == [
        ("person", "Priya", "s1"),
        ("place", "Pune", "s1"),
        ("promise", "call the movers", "s2"),
    ]
    priya = result.entities[0]
    assert priya.properties == {"relation": "wife"}
    assert priya.sensitivity == "private"
    assert priya.evidence == "My wife Priya"
    (rel,) = result.relations
    assert (rel.subject, rel.predicate, rel.object, rel.segment_id) == (
        "Asha",
        "spouse",
        "Priya",
        "s1",
    )
    assert extractor.label == "llm@1"


def _walk(schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    yield schema
    for sub in schema.get("properties", {}).values():
        yield from _walk(sub)
    if "items" in schema:
        yield from _walk(schema["items"])


def test_schema_is_strict_mode_compatible_with_enums() -> None:
    for node in _walk(EXTRACTION_SCHEMA):
        if node.get("type") == "object":
            assert node["additionalProperties"] is False
            assert node["required"] == list(node["properties"])
    item = EXTRACTION_SCHEMA["properties"]["entities"]["items"]["properties"]
    assert item["type"]["enum"] == list(ENTITY_TYPES)
    assert item["sensitivity"]["enum"] == ["open", "private", "sensitive"]
    rel = EXTRACTION_SCHEMA["properties"]["relations"]["items"]["properties"]
    assert rel["predicate"]["enum"] == list(PREDICATES)
    assert {"likes", "avoids", "spouse", "lives_in", "works_at"} <= set(PREDICATES)


async def test_gates_drop_what_is_below_its_type(
    server: ScriptedLLMServer, extractor: LLMExtractor
) -> None:
    server.reply(
        always(
            answer(
                [
                    entity("person", "Priya", 0.59),  # person gate 0.6
                    entity("place", "Pune", 0.6),
                    entity("promise", "call the movers", 0.69),  # promise gate 0.7
                    entity("decision", "move to Pune", 0.7),
                    entity("question", "when do we move", 0.5),
                ]
            )
        )
    )
    result = await extractor.extract(SEGMENTS)
    assert sorted(e.name for e in result.entities) == ["Pune", "move to Pune", "when do we move"]


async def test_windows_and_dedup_across_them(
    server: ScriptedLLMServer, client: OpenAICompatibleClient
) -> None:
    def reply(request: dict[str, Any]) -> Any:
        if lines_of(request)[0].startswith("[s1]"):
            return answer([entity("person", "Priya", 0.7, "s1"), entity("place", "Pune", 0.8)])
        return answer([entity("person", " priya ", 0.95, "s3"), entity("person", "PRIYA", 0.8)])

    server.reply(reply)
    result = await LLMExtractor(client, window_segments=2).extract(SEGMENTS)
    windows = [lines_of(r) for r in server.chat_requests()]
    assert [[line.split("]")[0] for line in w] for w in windows] == [["[s1", "[s2"], ["[s3"]]
    people = [e for e in result.entities if e.type == "person"]
    assert len(people) == 1
    assert (people[0].confidence, people[0].segment_id) == (0.95, "s3")
    assert [e.type for e in result.entities] == ["person", "place"]  # first-seen order


async def test_linking_by_evidence_unless_a_valid_segment_is_cited(
    server: ScriptedLLMServer, extractor: LLMExtractor
) -> None:
    server.reply(
        always(
            answer(
                [
                    entity("place", "Pune", 0.9, "", "moving to Pune next month"),
                    entity("event", "jazz night", 0.9, "s9", "I love jazz"),  # no such segment
                    entity("promise", "call the movers", 0.9, "[s2]", "irrelevant words"),
                    entity("emotion", "calm", 0.9, "", "nothing overlaps here"),
                    entity("habit", "coffee", 0.9, 3, "avoid coffee"),  # a number, not an id
                ]
            )
        )
    )
    result = await extractor.extract(SEGMENTS)
    assert {e.name: e.segment_id for e in result.entities} == {
        "Pune": "s1",
        "jazz night": "s3",
        "call the movers": "s2",
        "calm": None,
        "coffee": "s3",
    }


async def test_each_item_is_checked_on_its_own(
    server: ScriptedLLMServer, extractor: LLMExtractor
) -> None:
    server.reply(
        always(
            answer(
                [
                    entity("person", "Priya"),
                    entity("spaceship", "Enterprise"),  # unknown type
                    entity("organisation", "Acme Movers"),  # a synonym
                    entity("Places", "Pune"),  # case and plural
                    {"type": "person", "confidence": 0.9},  # no name
                    entity("person", "   "),  # empty name
                    entity("person", "Ravi", "high"),  # type: ignore[arg-type]
                    entity("person", "Meera", float("nan")),
                    "Asha",  # not an object
                    None,
                    [1, 2],
                ]
            )
        )
    )
    result = await extractor.extract(SEGMENTS)
    assert [(e.type, e.name) for e in result.entities] == [
        ("person", "Priya"),
        ("organization", "Acme Movers"),
        ("place", "Pune"),
    ]


async def test_confidence_clamped_and_sensitivity_defaulted(
    server: ScriptedLLMServer, extractor: LLMExtractor
) -> None:
    server.reply(
        always(
            answer(
                [
                    entity("person", "Priya", 1.7, sensitivity="SENSITIVE"),
                    entity("person", "Ravi", 85, sensitivity="secret"),  # a percentage
                    entity("person", "Meera", -0.3),  # clamped to 0, then gated
                    {"type": "place", "name": "Pune", "confidence": "0.8"},  # minimal, as text
                    entity("person", "Asha", 0.9, properties={"age": 34, "": "x", "home": None}),
                ]
            )
        )
    )
    result = await extractor.extract(SEGMENTS)
    got = {e.name: e for e in result.entities}
    assert set(got) == {"Priya", "Ravi", "Pune", "Asha"}
    assert (got["Priya"].confidence, got["Priya"].sensitivity) == (1.0, "sensitive")
    assert (got["Ravi"].confidence, got["Ravi"].sensitivity) == (0.85, "open")
    assert (got["Pune"].confidence, got["Pune"].sensitivity, got["Pune"].evidence) == (
        0.8,
        "open",
        "",
    )
    assert got["Asha"].properties == {"age": 34}


@pytest.mark.parametrize(
    "text",
    [
        json.dumps([entity("person", "Priya")]),  # a bare list
        json.dumps(entity("person", "Priya")),  # a single item
        json.dumps({"entities": entity("person", "Priya")}),  # a single item under the key
        "<think>Priya is a person.</think>\n```json\n"
        + json.dumps(answer([entity("person", "Priya")]))
        + "\n```",
        json.dumps({"people": [entity("person", "Priya")]}),  # grouped under another key
    ],
    ids=["list", "item", "wrapped-item", "think-fence", "other-key"],
)
async def test_answer_shapes(server: ScriptedLLMServer, extractor: LLMExtractor, text: str) -> None:
    server.reply(always(text))
    result = await extractor.extract(SEGMENTS)
    assert [(e.type, e.name) for e in result.entities] == [("person", "Priya")]


async def test_relations_checked_and_normalised(
    server: ScriptedLLMServer, extractor: LLMExtractor
) -> None:
    server.reply(
        always(
            answer(
                [],
                [
                    relation("I", "wife", "Priya", 0.9, "s1", "My wife Priya"),  # → Asha, spouse
                    relation("Asha", "loves", "jazz", 0.8, "", "I love jazz"),  # → likes, s3
                    relation("Asha", "avoids", "coffee", 0.8, "s3"),
                    relation("Asha", "avoids", "Coffee", 0.7, "s3"),  # duplicate, less sure
                    relation("she", "friend", "Ravi", 0.9, "s2"),  # a pronoun, not a name
                    relation("Asha", "teleports_to", "Mars", 0.9),  # unknown predicate
                    relation("Asha", "lives_in", "Pune", 0.5),  # below the relation gate
                    relation("Priya", "friend", "priya", 0.9),  # to itself
                    {"subject": "Asha", "predicate": "likes"},  # incomplete
                ],
            )
        )
    )
    result = await extractor.extract(SEGMENTS)
    got = [(r.subject, r.predicate, r.object, r.confidence, r.segment_id) for r in result.relations]
    assert got == [
        ("Asha", "spouse", "Priya", 0.9, "s1"),
        ("Asha", "likes", "jazz", 0.8, "s3"),
        ("Asha", "avoids", "coffee", 0.8, "s3"),
    ]


async def test_bare_list_mixing_entities_and_relations(
    server: ScriptedLLMServer, extractor: LLMExtractor
) -> None:
    server.reply(always([entity("person", "Priya"), relation("Asha", "spouse", "Priya")]))
    result = await extractor.extract(SEGMENTS)
    assert [e.name for e in result.entities] == ["Priya"]
    assert [r.predicate for r in result.relations] == ["spouse"]


async def test_unreadable_answer_is_asked_again_once(
    server: ScriptedLLMServer, extractor: LLMExtractor
) -> None:
    answers = iter(["Sorry, here you go: {entities: [Priya]}", answer([entity("person", "Priya")])])
    server.reply(lambda request: next(answers))
    result = await extractor.extract(SEGMENTS)
    assert [e.name for e in result.entities] == ["Priya"]
    first, second = server.chat_requests()
    assert "could not be read as JSON" in second["messages"][1]["content"]
    assert "could not be read" not in first["messages"][1]["content"]


async def test_an_unreadable_window_is_skipped_and_the_others_kept(
    server: ScriptedLLMServer, client: OpenAICompatibleClient
) -> None:
    def reply(request: dict[str, Any]) -> Any:
        if lines_of(request)[0].startswith("[s1]"):
            return "I cannot help with that."
        return answer([entity("person", "Asha", 0.9, "s3")])

    server.reply(reply)
    result = await LLMExtractor(client, window_segments=2).extract(SEGMENTS)
    assert [e.name for e in result.entities] == ["Asha"]
    assert len(server.chat_requests()) == 3  # window 1, its retry, window 2


@pytest.mark.parametrize("garbage", ["no json", "", '"a string"', "42", '{"entities": [{"na'])
async def test_no_readable_window_raises(
    server: ScriptedLLMServer, extractor: LLMExtractor, garbage: str
) -> None:
    server.reply(always(garbage))
    with pytest.raises(LLMOutputError, match="no readable answer"):
        await extractor.extract(SEGMENTS)
    assert len(server.chat_requests()) == 2


async def test_unavailable_server_propagates(
    server: ScriptedLLMServer, extractor: LLMExtractor
) -> None:
    server.reply(always(ScriptedError(503)))
    with pytest.raises(LLMUnavailableError):
        await extractor.extract(SEGMENTS)
    assert len(server.chat_requests()) == 1  # no retry here: the durable job retries


async def test_nothing_to_read_asks_nothing(
    server: ScriptedLLMServer, extractor: LLMExtractor
) -> None:
    result = await extractor.extract([])
    assert (result.entities, result.relations) == ([], [])
    assert server.requests == []


async def test_the_unscripted_minimal_answer_is_empty(extractor: LLMExtractor) -> None:
    result = await extractor.extract(SEGMENTS)
    assert (result.entities, result.relations) == ([], [])


async def test_claude_takes_over_when_the_primary_fails(server: ScriptedLLMServer) -> None:
    server.reply(always(ScriptedError(500)))
    server.reply_anthropic(always(answer([entity("person", "Priya", 0.9, "s1")])))
    primary = OpenAICompatibleClient(server.url, "m", max_retries=0)
    claude = ClaudeClient("k", "claude-test", base_url=server.anthropic_url, max_retries=0)
    extractor = LLMExtractor(FallbackClient(primary, claude))
    try:
        result = await extractor.extract(SEGMENTS)
    finally:
        await extractor.aclose()
    assert [(e.name, e.segment_id) for e in result.entities] == [("Priya", "s1")]
    (request,) = server.anthropic_requests()
    assert request["tools"][0]["input_schema"] == EXTRACTION_SCHEMA


async def test_from_settings(server: ScriptedLLMServer) -> None:
    settings = Settings(llm_base_url=server.url, claude_api_key=None, extract_window_segments=7)
    extractor = LLMExtractor.from_settings(settings)
    try:
        assert extractor.window_segments == 7
        assert isinstance(extractor.client, OpenAICompatibleClient)
    finally:
        await extractor.aclose()


def test_transcript_lines_are_flat() -> None:
    text = format_transcript([SegmentText("a-001", "  Dr.  Rao ", "line one\nline two"),
                              SegmentText("a-002", "", "hi")])  # fmt: skip
    assert text.splitlines() == ["Transcript:", "[a-001] Dr. Rao: line one line two",
                                 "[a-002] Unknown: hi"]  # fmt: skip


async def test_an_answer_cut_off_keeps_its_complete_items(
    server: ScriptedLLMServer, extractor: LLMExtractor
) -> None:
    full = json.dumps(answer([entity("person", "Priya", 0.9, "s1"), entity("place", "Pune")]))
    server.reply(always(full[: full.index("Pune")]))
    result = await extractor.extract(SEGMENTS)
    assert [(e.type, e.name) for e in result.entities] == [("person", "Priya")]
    assert len(server.chat_requests()) == 1


async def test_statements_from_the_clauses_and_the_relations_merge_into_one_fact(
    server: ScriptedLLMServer, client: OpenAICompatibleClient
) -> None:
    """Both paths end with the same current truth: the LLM path reads the clauses with the
    fast path's reader, and its own relations about a person become statements too, which
    the merge takes as restatements of the clause ("lives in Tromsø": one fact, two sources)."""
    from datetime import UTC, datetime

    from context_engine.extract.fast import FastExtractor
    from context_engine.knowledge.statement_facts import Said, merge

    said_at = datetime(2026, 2, 3, 18, 0, tzinfo=UTC)
    segments = [
        SegmentText("t1", "Noor", "I live in Tromsø with two cats these days.", said_at),
        SegmentText("t2", "Ilya", "Do you still row on Saturdays?", said_at),
        SegmentText("t3", "Noor", "No, I gave up rowing last month.", said_at),
    ]
    server.reply(always(answer(
        [entity("person", "Noor", 0.95, "t1", "I live"),
         entity("place", "Tromsø", 0.9, "t1", "in Tromsø")],
        [relation("Noor", "lives_in", "Tromsø", 0.9, "t1", "I live in Tromsø"),
         relation("Noor", "spouse", "Ilya", 0.8, "t2", "")],
    )))  # fmt: skip
    result = await LLMExtractor(client, statements=FastExtractor()).extract(segments)
    by_source = {(s.predicate, s.object, s.segment_id) for s in result.statements}
    assert ("live", "in Tromsø", "t1") in by_source  # from the LLM's relation
    assert any(s.predicate == "give up" and s.subject == "Noor" for s in result.statements)
    assert all(s.predicate != "spouse" for s in result.statements)  # relations stay relations
    rows = [
        Said(i, s.subject, s.predicate, s.object, s.text, s.kind, s.confidence,
             datetime.fromisoformat(s.valid_at).replace(tzinfo=UTC) if s.valid_at else said_at,
             said_at, "sess", s.segment_id, s.speaker, s.evidence)
        for i, s in enumerate(result.statements)
    ]  # fmt: skip
    home = [f for f in merge(rows) if f.first.predicate == "live"]
    assert len(home) == 1 and len(home[0].sources) == 2, [f.first.text for f in home]
    # without a clause reader, the relations' statements alone
    server.reply(always(answer(
        [entity("person", "Noor", 0.95, "t1", "I live")],
        [relation("Noor", "lives_in", "Tromsø", 0.9, "t1", "I live in Tromsø")],
    )))  # fmt: skip
    alone = await LLMExtractor(client).extract(segments)
    assert [s.text for s in alone.statements] == ["Noor lives in Tromsø"]
