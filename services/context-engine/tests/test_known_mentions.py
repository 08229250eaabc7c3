"""Mentions of known entities found by name (known_mentions.py), through the extract stage on
a real, migrated PostgreSQL: a name NER found once counts in every session that says it,
lower-case words never match names, topics match either number, nothing unknown is created,
and re-runs replace rather than add."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from engine_harness import insert_session
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.config import Settings
from context_engine.extract.base import Extraction
from context_engine.extract.fast import FastExtractor
from context_engine.extract.schema import EntityType, ExtractedEntity, SegmentText
from context_engine.knowledge.entity_store import SessionText
from context_engine.knowledge.known_mentions import KnownEntity, find_known
from context_engine.pipeline.session_stages import SessionStages, StageOutcome

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


class ScriptedExtractor:
    """Returns what the test says each session's extractor found (keyed by session id)."""

    name = "fast"

    def __init__(self, found: dict[str, list[ExtractedEntity]], version: int = 1) -> None:
        self.found = found
        self.version = version

    @property
    def label(self) -> str:
        return f"{self.name}@{self.version}"

    async def extract(self, segments: Sequence[SegmentText]) -> Extraction:
        sid = segments[0].segment_id.split("-")[0]
        return Extraction([e for e in self.found.get(sid, [])])


def said(
    type_: EntityType, name: str, confidence: float = 0.9, segment: str = ""
) -> ExtractedEntity:
    return ExtractedEntity(type_, name, confidence, evidence=name, segment_id=segment or None)


async def add_session(db: AsyncEngine, sid: str, start: datetime, *texts: str) -> None:
    await insert_session(db, sid, start, texts, speaker="user", segment_id="{sid}-{i}")


async def extract(
    db: AsyncEngine, settings: Settings, extractor: Any, sid: str, *, again: bool = False
) -> StageOutcome:
    stages = SessionStages(settings, db, extractor, None)
    if again:  # forget that it ran, as a new input or a forced re-run would
        async with db.begin() as conn:
            await conn.execute(text("DELETE FROM session_stages WHERE session_id = :s"), {"s": sid})
    return await stages.extract(stages.extract_key(sid))


async def rows(db: AsyncEngine, sql: str, **params: Any) -> list[dict[str, Any]]:
    async with db.connect() as conn:
        return [dict(r._mapping) for r in await conn.execute(text(sql), params)]


async def entity(db: AsyncEngine, type_: str, name: str) -> dict[str, Any]:
    (row,) = await rows(
        db, "SELECT * FROM entities WHERE type = :t AND canonical_name = lower(:n)", t=type_, n=name
    )
    return row


async def mentions(db: AsyncEngine, name: str) -> list[dict[str, Any]]:
    return await rows(
        db,
        "SELECT m.* FROM entity_mentions m JOIN entities e ON e.id = m.entity_id"
        " WHERE e.canonical_name = lower(:n) ORDER BY m.session_id, m.id",
        n=name,
    )


async def test_a_place_ner_found_once_counts_in_every_session(
    db: AsyncEngine, settings: Settings
) -> None:
    days = {"s1": 0, "s2": 9, "s3": 21, "s4": 35}
    await add_session(db, "s1", T0, "Rent in Koramangala went up again.")
    await add_session(db, "s2", T0 + timedelta(days=9), "Ugh. That Koramangala cafe was full.")
    await add_session(db, "s3", T0 + timedelta(days=21), "We sat near Koramangala's lake.")
    await add_session(db, "s4", T0 + timedelta(days=35), "Koramangala traffic again, honestly.")
    extractor = ScriptedExtractor({"s1": [said("place", "Koramangala", 0.9, "s1-0")]})
    for sid in days:
        assert (await extract(db, settings, extractor, sid)).status == "done"

    place = await entity(db, "place", "Koramangala")
    assert place["episode_count"] == 4
    assert place["first_seen"] == T0 and place["last_seen"] == T0 + timedelta(days=35)
    assert place["confidence"] == 0.9  # the NER mention's; string matches never raise it
    assert place["properties"].get("source") != "known"  # the entity keeps its own properties
    found = await mentions(db, "Koramangala")
    assert [m["session_id"] for m in found] == ["s1", "s2", "s3", "s4"]
    s2 = found[1]
    assert s2["properties"] == {"source": "known", "speaker": "user"}
    assert s2["confidence"] == pytest.approx(0.65)  # the place gate + 0.05
    assert s2["evidence"] == "That Koramangala cafe was full."
    assert s2["segment_id"] == "s2-0" and s2["extractor"] == "fast"
    assert found[2]["evidence"] == "We sat near Koramangala's lake."
    assert len(await rows(db, "SELECT id FROM entities")) == 1  # nothing created


async def test_the_real_fast_extractor_misses_and_the_pass_counts(
    db: AsyncEngine, settings: Settings
) -> None:
    """The user's case with the bundled NER: it tags the place in s1 only."""
    texts = [
        "Rent in Koramangala went up again.",
        "Koramangala traffic is terrible these days.",
        "Their Koramangala office is moving.",
        "Koramangala's bakeries are the best.",
    ]
    for i, words in enumerate(texts):
        await add_session(db, f"s{i + 1}", T0 + timedelta(days=10 * i + i), words)
        await extract(db, settings, FastExtractor(), f"s{i + 1}")
    assert (await entity(db, "place", "Koramangala"))["episode_count"] == 4
    sources = [m["properties"].get("source") for m in await mentions(db, "Koramangala")]
    assert sources[1:] == ["known", "known", "known"]


async def test_lower_case_words_never_match_names(db: AsyncEngine, settings: Settings) -> None:
    await add_session(db, "s1", T0, "Will called. May said hi.")
    await add_session(
        db, "s2", T0 + timedelta(days=1),
        "I will call you. You may come. Will you? We fly in May.", "will WILL may MAY",
    )  # fmt: skip
    await add_session(db, "s3", T0 + timedelta(days=2), "I met Will at the station.")
    extractor = ScriptedExtractor(
        {"s1": [said("person", "Will", 0.85, "s1-0"), said("person", "May", 0.85, "s1-0")]}
    )
    for sid in ("s1", "s2", "s3"):
        await extract(db, settings, extractor, sid)
    # "will", "may", "WILL", a sentence opened by "Will", the month: none is the person
    assert [m["session_id"] for m in await mentions(db, "Will")] == ["s1", "s3"]
    assert [m["session_id"] for m in await mentions(db, "May")] == ["s1"]
    assert (await entity(db, "person", "Will"))["episode_count"] == 2
    assert (await entity(db, "person", "May"))["episode_count"] == 1


async def test_a_topic_matches_either_number_as_whole_words(
    db: AsyncEngine, settings: Settings
) -> None:
    await add_session(db, "s1", T0, "I need running shoes and good coffee.")
    await add_session(db, "s2", T0 + timedelta(days=1), "Got a running shoe and two Coffees.")
    await add_session(db, "s3", T0 + timedelta(days=2), "RUNNING SHOES on sale at the coffeehouse.")
    extractor = ScriptedExtractor(
        {"s1": [said("topic", "running shoes", 0.7, "s1-0"), said("topic", "coffee", 0.7, "s1-0")]}
    )
    for sid in ("s1", "s2", "s3"):
        await extract(db, settings, extractor, sid)
    assert (await entity(db, "topic", "running shoes"))["episode_count"] == 3
    # "coffeehouse" is not "coffee"
    assert [m["session_id"] for m in await mentions(db, "coffee")] == ["s1", "s2"]
    assert (await entity(db, "topic", "coffee"))["episode_count"] == 2


async def test_names_not_yet_known_create_nothing(db: AsyncEngine, settings: Settings) -> None:
    await add_session(db, "s1", T0, "Indiranagar and Asha's bakery, then coffee in Jayanagar.")
    await add_session(db, "s2", T0 + timedelta(days=1), "Back to Indiranagar for coffee.")
    extractor = ScriptedExtractor({})
    for sid in ("s1", "s2"):
        assert (await extract(db, settings, extractor, sid)).status == "done"
    assert await rows(db, "SELECT id FROM entities") == []
    assert await rows(db, "SELECT id FROM entity_mentions") == []


async def test_a_rerun_replaces_the_known_mention(db: AsyncEngine, settings: Settings) -> None:
    await add_session(db, "s1", T0, "Rent in Koramangala went up again.")
    await add_session(db, "s2", T0 + timedelta(days=3), "Koramangala traffic, again.")
    extractor = ScriptedExtractor({"s1": [said("place", "Koramangala", 0.9, "s1-0")]})
    await extract(db, settings, extractor, "s1")
    await extract(db, settings, extractor, "s2")
    assert (await extract(db, settings, extractor, "s2")).status == "already_done"
    await extract(db, settings, extractor, "s2", again=True)
    await extract(db, settings, extractor, "s2", again=True)
    assert [m["session_id"] for m in await mentions(db, "Koramangala")] == ["s1", "s2"]
    assert (await entity(db, "place", "Koramangala"))["episode_count"] == 2

    # The extractor finds it itself on a re-run: its mention replaces the string match.
    extractor.found["s2"] = [said("place", "Koramangala", 0.9, "s2-0")]
    await extract(db, settings, extractor, "s2", again=True)
    found = await mentions(db, "Koramangala")
    assert [(m["session_id"], m["properties"].get("source")) for m in found] == [
        ("s1", None), ("s2", None)
    ]  # fmt: skip
    # A new extractor version: the old string match becomes history, the new one counts.
    extractor.found["s2"] = []
    await extract(db, settings, ScriptedExtractor(extractor.found, version=2), "s2")
    current = [m for m in await mentions(db, "Koramangala") if m["current"]]
    assert [(m["session_id"], m["extractor_version"]) for m in current] == [("s1", 1), ("s2", 2)]
    assert (await entity(db, "place", "Koramangala"))["episode_count"] == 2


async def test_string_matches_do_not_keep_each_other_alive(
    db: AsyncEngine, settings: Settings
) -> None:
    await add_session(db, "s1", T0, "Rent in Koramangala went up again.")
    await add_session(db, "s2", T0 + timedelta(days=3), "Koramangala traffic, again.")
    await add_session(db, "s3", T0 + timedelta(days=6), "Koramangala, still.")
    v1 = ScriptedExtractor({"s1": [said("place", "Koramangala", 0.9, "s1-0")]})
    for sid in ("s1", "s2"):
        await extract(db, settings, v1, sid)
    # A better extractor no longer finds it in s1: s2's string match is no evidence for s3.
    v2 = ScriptedExtractor({}, version=2)
    for sid in ("s1", "s3"):
        await extract(db, settings, v2, sid)
    current = [m["session_id"] for m in await mentions(db, "Koramangala") if m["current"]]
    assert current == ["s2"]


def _session(*texts: str) -> SessionText:
    segments = [SegmentText(f"x-{i}", "Asha", t) for i, t in enumerate(texts)]
    return SessionText("x", T0, segments, {})


def _known(type_: EntityType, name: str, id_: int, confidence: float = 0.9) -> KnownEntity:
    return KnownEntity(id_, type_, name, name.casefold(), confidence, "open")


@pytest.mark.parametrize(
    ("words", "expected"),
    [
        ("We flew to New York.", {"New York"}),  # the longer name, not "York" inside it
        ("New York, then York.", {"New York", "York"}),
        ("Bank of America called. bank of america", {"Bank of America"}),
        ("Priya Sharma called.", set()),  # inside the extractor's own name
        ("Georgia is lovely.", set()),  # known as a person and a place: left alone
        ("The Honey shop.", set()),  # a word that is not a name
        ("Jo and Al.", set()),  # too short
        ("Koramangala-based folks.", set()),  # not a whole word
    ],
)
def test_matching_rules(words: str, expected: set[str]) -> None:
    known = [
        _known("place", "New York", 1), _known("person", "York", 2),
        _known("organization", "Bank of America", 3), _known("person", "Priya", 4),
        _known("person", "Georgia", 5), _known("place", "Georgia", 6),
        _known("person", "Honey", 7), _known("person", "Jo", 8), _known("place", "Koramangala", 9),
    ]  # fmt: skip
    claimed = Extraction([said("person", "Priya Sharma")])
    assert {e.name for e in find_known(_session(words), known, claimed)} == expected


def test_a_name_the_extractor_typed_otherwise_is_its_call() -> None:
    """NER read "Koramangala" as a person here: no place mention is added beside it."""
    known = [_known("place", "Koramangala", 1)]
    extraction = Extraction([said("person", "Koramangala", 0.85)])
    assert find_known(_session("Koramangala was packed."), known, extraction) == []


def test_confidence_is_capped_and_below_gate_is_never_matched() -> None:
    known = [_known("place", "Koramangala", 1, 0.62), _known("person", "Ravi", 2, 0.5)]
    (found,) = find_known(_session("Ravi in Koramangala."), known, Extraction())
    assert found.name == "Koramangala" and found.confidence == 0.62
