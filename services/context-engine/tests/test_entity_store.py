"""Extraction output in PostgreSQL (entity_store.py) on a real, migrated database: upserts,
aggregates, idempotent re-runs, versions kept as history, contradictions."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from engine_harness import insert_session
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from context_engine.extract.base import Extraction
from context_engine.extract.schema import ExtractedEntity, ExtractedRelation
from context_engine.graph.base import InvalidatedFact
from context_engine.knowledge import entity_store
from context_engine.knowledge.entities import get_entity, list_entities
from context_engine.store.migrate import upgrade

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
async def engine(db_url: str) -> AsyncIterator[AsyncEngine]:
    await asyncio.to_thread(upgrade, db_url)
    eng = create_async_engine(db_url)
    yield eng
    await eng.dispose()


async def add_session(engine: AsyncEngine, sid: str, start: datetime, *texts: str) -> None:
    await insert_session(engine, sid, start, texts, speaker="Asha", segment_id="g{i}")


async def store(
    engine: AsyncEngine, sid: str, extraction: Extraction, *, extractor="fast", version=1
) -> entity_store.StoredRun:
    async with engine.begin() as conn:
        session = await entity_store.load_session_text(conn, sid)
        assert session is not None
        return await entity_store.store_extraction(
            conn,
            session,
            extraction,
            extractor=extractor,
            version=version,
            fingerprint=f"fp-{sid}-{extractor}{version}",
            started_at=T0,
        )


async def rows(engine: AsyncEngine, sql: str, **params: Any) -> list[dict[str, Any]]:
    async with engine.connect() as conn:
        return [dict(r._mapping) for r in await conn.execute(text(sql), params)]


def person(name: str, segment: str, confidence: float = 0.9, **kw: Any) -> ExtractedEntity:
    return ExtractedEntity(
        "person", name, confidence, evidence=f"… {name} …", segment_id=segment, **kw
    )


async def test_store_upserts_entities_mentions_and_relations(engine: AsyncEngine) -> None:
    await add_session(engine, "s1", T0, "My wife Priya called.", "Priya and Ravi went to Pune.")
    extraction = Extraction(
        [
            person("Priya", "g0"),
            person("Ravi", "g1", 0.7),
            ExtractedEntity("place", "Pune", 0.8, evidence="went to Pune", segment_id="g1"),
            ExtractedEntity("promise", "call the bank", 0.8, segment_id="nope"),
        ],
        [ExtractedRelation("Asha", "spouse", "Priya", 0.85, "My wife Priya", "g0")],
    )
    run = await store(engine, "s1", extraction)
    assert (run.entities, run.mentions, run.relations) == (4, 4, 1)

    async with engine.connect() as conn:
        items, total = await list_entities(conn, entity_type=None, limit=10, offset=0)
    assert total == 4
    by_name = {e["name"]: e for e in items}
    assert by_name["Priya"]["first_seen"] == T0 and by_name["Priya"]["episode_count"] == 1
    assert by_name["Pune"]["last_seen"] == T0 + timedelta(seconds=10)
    # A segment id the session does not have is not kept (the mention is the session's).
    mention = await rows(
        engine, "SELECT m.segment_id FROM entity_mentions m JOIN entities e ON e.id = m.entity_id"
        " WHERE e.name = 'call the bank'"
    )  # fmt: skip
    assert mention == [{"segment_id": None}]
    rel = await rows(engine, "SELECT subject, predicate, object, segment_id, current"
                             " FROM extracted_relations")  # fmt: skip
    assert rel == [
        {"subject": "Asha", "predicate": "spouse", "object": "Priya", "segment_id": "g0",
         "current": True}
    ]  # fmt: skip
    loaded = await _load(engine, "s1")
    assert {e.name for e in loaded.entities} == {"Priya", "Ravi", "Pune", "call the bank"}
    assert loaded.relations[0].object == "Priya"


async def _load(engine: AsyncEngine, sid: str) -> Extraction:
    async with engine.connect() as conn:
        return await entity_store.load_extraction(conn, sid)


async def test_rerun_replaces_the_same_version_and_counts_sessions_once(engine) -> None:
    await add_session(engine, "s1", T0, "Priya is here.")
    await add_session(engine, "s2", T0 + timedelta(days=2), "Priya again, with PRIYA.")
    await store(engine, "s1", Extraction([person("Priya", "g0", 0.7)]))
    await store(engine, "s2", Extraction([person("priya", "g0", 0.95)]))
    await store(engine, "s2", Extraction([person("priya", "g0", 0.95)]))  # a re-run

    (priya,) = await rows(engine, "SELECT * FROM entities")
    assert priya["name"] == "Priya"  # the first spelling stays, lookups are case-folded
    assert priya["episode_count"] == 2
    assert priya["first_seen"] == T0 and priya["last_seen"] == T0 + timedelta(days=2)
    assert priya["confidence"] == 0.95
    counts = await rows(engine, "SELECT session_id, count(*) AS n FROM entity_mentions"
                                " GROUP BY session_id ORDER BY session_id")  # fmt: skip
    assert counts == [{"session_id": "s1", "n": 1}, {"session_id": "s2", "n": 1}]
    runs = await rows(engine, "SELECT session_id FROM extraction_runs ORDER BY id")
    assert [r["session_id"] for r in runs] == ["s1", "s2", "s2"]  # every run is in the history


async def test_a_new_version_keeps_the_old_output_as_history(engine: AsyncEngine) -> None:
    await add_session(engine, "s1", T0, "Priya met Tom at Google.")
    await store(engine, "s1", Extraction([person("Priya", "g0"), person("Tom", "g0")]))
    await store(engine, "s1", Extraction([person("Priya", "g0")]), version=2)

    mentions = await rows(
        engine, "SELECT e.name, m.extractor_version, m.current FROM entity_mentions m"
        " JOIN entities e ON e.id = m.entity_id ORDER BY m.id"
    )  # fmt: skip
    assert mentions == [
        {"name": "Priya", "extractor_version": 1, "current": False},
        {"name": "Tom", "extractor_version": 1, "current": False},
        {"name": "Priya", "extractor_version": 2, "current": True},
    ]
    async with engine.connect() as conn:
        current, total = await list_entities(conn, entity_type=None, limit=10, offset=0)
        everything, _ = await list_entities(
            conn, entity_type=None, limit=10, offset=0, include_history=True
        )
    assert [e["name"] for e in current] == ["Priya"] and total == 1
    tom = next(e for e in everything if e["name"] == "Tom")
    assert tom["episode_count"] == 0  # only history mentions it
    async with engine.connect() as conn:
        detail = await get_entity(conn, tom["id"])
    assert detail is not None and detail["mentions"] == [] and detail["history_mentions"] == 1
    # The relation table follows the same rule, and the graph reads only current output.
    assert [e.name for e in (await _load(engine, "s1")).entities] == ["Priya"]


async def test_sensitivity_is_the_most_restrictive_seen(engine: AsyncEngine) -> None:
    await add_session(engine, "s1", T0, "Priya's diagnosis.")
    await add_session(engine, "s2", T0, "Priya.")
    await store(engine, "s1", Extraction([person("Priya", "g0", sensitivity="sensitive")]))
    await store(engine, "s2", Extraction([person("Priya", "g0", sensitivity="open")]))
    (row,) = await rows(engine, "SELECT sensitivity FROM entities")
    assert row["sensitivity"] == "sensitive"


async def test_contradictions_mark_both_entities_once(engine: AsyncEngine) -> None:
    await add_session(engine, "s1", T0, "Asha likes coffee; Asha avoids coffee now.")
    await store(
        engine,
        "s1",
        Extraction([person("Asha", "g0"), ExtractedEntity("habit", "coffee", 0.9)]),
    )
    fact = InvalidatedFact(
        fact_uuid="e1",
        fact="Asha likes coffee",
        predicate="likes",
        subject="asha",
        object="Coffee",
        invalid_at=T0 + timedelta(days=1),
        invalidated_by="e2",
        session_id="s1",
    )
    async with engine.begin() as conn:
        assert await entity_store.mark_contradictions(conn, [fact]) == 2
        assert await entity_store.mark_contradictions(conn, [fact]) == 0  # idempotent
    marked = await rows(engine, "SELECT name, contradicted_at FROM entities ORDER BY name")
    assert marked == [
        {"name": "Asha", "contradicted_at": T0 + timedelta(days=1)},
        {"name": "coffee", "contradicted_at": T0 + timedelta(days=1)},
    ]
    async with engine.connect() as conn:
        items, _ = await list_entities(
            conn, entity_type="person", limit=10, offset=0, contradicted=True
        )
        detail = await get_entity(conn, items[0]["id"])
    assert detail is not None
    assert [c["fact"] for c in detail["contradictions"]] == ["Asha likes coffee"]

    # The superseding fact was removed (its session re-written): the fact is valid again.
    async with engine.begin() as conn:
        assert await entity_store.clear_contradictions(conn, ["e1"]) == 2
    cleared = await rows(engine, "SELECT contradicted_at FROM entities")
    assert cleared == [{"contradicted_at": None}, {"contradicted_at": None}]
    assert await rows(engine, "SELECT * FROM entity_contradictions") == []
