"""Speaker names out of vector queries (speakers.py): the pure rewrite, the skip scan on a real
PostgreSQL, and the vector leg through the real engine embedding the question without them."""

from __future__ import annotations

import asyncio
import re
from datetime import UTC, datetime, timedelta

import pytest
from engine_harness import Engine, eventually, ingest, write_conversation
from hypothesis import given
from hypothesis import strategies as st
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.config import Settings
from context_engine.knowledge.speakers import KnownSpeakers, without_names

T0 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
NAMES = frozenset({"Caroline", "Melanie", "Ana Lu", "Ana"})


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("What does Caroline paint?", "What does paint?"),
        ("what did caroline's kids like?", "what did kids like?"),
        ("When did Melanie and Caroline meet?", "When did and meet?"),
        ("Where does Ana Lu live?", "Where does live?"),  # the longer name first
        ("Is Anastasia coming?", "Is Anastasia coming?"),  # whole words only
        ("Caroline", "Caroline"),  # nothing would be left: the query as it was
        ("Caroline's?", "Caroline's?"),
        ("tyres for the car", "tyres for the car"),
    ],
)
def test_without_names(query: str, expected: str) -> None:
    assert without_names(query, NAMES) == expected


@given(
    st.text(max_size=60),
    st.sets(st.from_regex(r"[A-Z][a-z]{1,8}", fullmatch=True), max_size=4),
)
def test_without_names_leaves_words_and_no_name(query: str, names: set[str]) -> None:
    out = without_names(query, frozenset(names))
    if out == query:
        return  # nothing named, or nothing else said
    assert re.search(r"\w", out)  # something is left to search by
    for name in names:
        assert not re.search(rf"(?<!\w){re.escape(name)}(?!\w)", out, re.IGNORECASE)


async def _add_session(db: AsyncEngine, sid: str, speakers: list[str]) -> None:
    async with db.begin() as conn:
        await conn.execute(
            text(
                "INSERT INTO sessions (session_id, device_id, started_at) VALUES (:s, 'test', :t)"
            ),
            {"s": sid, "t": T0},
        )
        for i, speaker in enumerate(speakers):
            await conn.execute(
                text(
                    "INSERT INTO segments (session_id, segment_id, speaker, text, start_s, end_s,"
                    " spoken_at, stt_engine, source_offset)"
                    " VALUES (:s, :g, :p, 'hello', :a, :b, :t, 'test', 0)"
                ),
                {"s": sid, "g": f"{sid}-{i}", "p": speaker, "a": float(i), "b": i + 1.0,
                 "t": T0 + timedelta(seconds=i)},
            )  # fmt: skip


async def test_known_speakers_are_read_and_refreshed(db: AsyncEngine) -> None:
    await _add_session(db, "s1", ["Asha", "Ravi", "Asha", "Asha"])
    speakers = KnownSpeakers(db, ttl_s=0.01)
    assert await speakers.names() == {"Asha", "Ravi"}
    await _add_session(db, "s2", ["Mira", "Ravi"])
    await asyncio.sleep(0.05)
    await speakers.names()  # stale: served, and a refresh starts in the background

    async def refreshed() -> frozenset[str] | None:
        names = await speakers.names()
        return names if "Mira" in names else None

    assert await eventually(refreshed, "Mira among the names") == {"Asha", "Ravi", "Mira"}


async def test_an_empty_memory_has_no_speakers(db: AsyncEngine) -> None:
    speakers = KnownSpeakers(db)
    assert await speakers.names() == frozenset()
    assert await speakers.owner() is None


async def test_the_owner_is_the_named_speaker_heard_most(db: AsyncEngine) -> None:
    # A diarizer's label speaks most, but it names nobody: the owner is the named one.
    await _add_session(db, "s1", ["SPEAKER_00"] * 5 + ["Ravi", "Asha", "Ravi", "Asha", "Asha"])
    assert await KnownSpeakers(db).owner() == "Asha"


async def test_the_vector_leg_embeds_the_question_without_the_speakers(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_conversation(
        settings.transcripts_dir,
        "sp1",
        T0,
        [("Asha", "Our flight to Lisbon leaves at six."), ("Ravi", "The car needs new tyres.")],
    )
    await ingest(engine, "sp1")
    embedder = engine.runtime.embedding.embedder
    asked: list[str] = []
    real = embedder.embed_query

    async def recording(query: str):  # type: ignore[no-untyped-def]
        asked.append(query)
        return await real(query)

    monkeypatch.setattr(embedder, "embed_query", recording)
    r = await engine.get("/v1/context", query="When does Asha's flight leave?",
                         as_of=(T0 + timedelta(days=1)).isoformat())  # fmt: skip
    assert r.status_code == 200, r.text
    assert r.json()["legs"]["vector"] == "ok"
    # asked before the search's turn (prepared) and by the search (the kept vector)
    assert asked and set(asked) == {"When does flight leave?"}


async def test_switched_off_the_question_is_embedded_as_asked(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    leg = next(leg for leg in engine.runtime.retriever.legs if leg.name == "vector")
    monkeypatch.setattr(leg, "speakers", None)
    assert await leg.query_text("When does Asha's flight leave?") == (
        "When does Asha's flight leave?"
    )


async def test_unreadable_speakers_leave_the_question_as_asked(engine: Engine) -> None:
    leg = next(leg for leg in engine.runtime.retriever.legs if leg.name == "vector")

    class BrokenSpeakersDouble:
        async def names(self) -> frozenset[str]:
            raise RuntimeError("database gone")

    leg.speakers = BrokenSpeakersDouble()
    assert await leg.query_text("When does Asha leave?") == "When does Asha leave?"
