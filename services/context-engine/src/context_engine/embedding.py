"""Segments into the vector index (starfish): the embed stage of a session.

Every ingest commit queues the session's `embed` job (durable, procrastinate). A run embeds the
session's active segments that have no vector in the current space yet — or whose document
(the turn before and the segment, with speakers; see `_TODO`) changed since — in batches of
`batch` segments; each batch is upserted into the vector store and then recorded in
`segment_vectors` (model space, md5 of the document), so a run stopped half-way resumes where
it was and a re-run does nothing. Vectors of segments a sweep replaced are deleted.

The space is (embedder name, dimension): a new model or dimension is a new space, filled in the
background by the minute scan (`pending_sessions`) and marked `ready` once every active segment
has a vector in it (`vector_spaces`). Point ids come from segment ids, so upserts are idempotent.
"""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.embed.base import Embedder
from context_engine.models import SegmentVector, VectorSpace
from context_engine.vectors.base import SpaceName, VectorPoint, VectorStore, point_id
from her_os_shared.logging import get_logger

log = get_logger(__name__)

EMBED_STAGE = "embed"
EMBED_VERSION = 1

# What is embedded for a segment: the turn before it in the session and its own, each with its
# speaker ("Priya: where did you go?\nAsha: Lisbon, in May."); an answer is found by its
# question. The same document as the keyword index's (search_index.py); measured on LoCoMo
# (ADR 0010). `text_sha` is the md5 of that document: when the turn before changes (a sweep,
# a late segment), the segment is embedded again by the session's next embed run.
_TODO = text(
    """
    WITH d AS (
      SELECT session_id, segment_id, text, speaker, spoken_at, start_s,
             concat_ws(E'\\n', lag(speaker || ': ' || text) OVER w, speaker || ': ' || text) AS doc
      FROM segments WHERE session_id = :sid AND replaced_by IS NULL
      WINDOW w AS (ORDER BY start_s, segment_id)
    )
    SELECT d.session_id, d.segment_id, d.text, d.speaker, d.spoken_at, d.doc, md5(d.doc) AS sha
    FROM d
    LEFT JOIN segment_vectors v
      ON v.session_id = d.session_id AND v.segment_id = d.segment_id AND v.space = :space
    WHERE v.text_sha IS NULL OR v.text_sha <> md5(d.doc)
    ORDER BY d.start_s, d.segment_id
    LIMIT :batch
    """
)
_REPLACED = text(
    """
    SELECT v.segment_id FROM segment_vectors v
    JOIN segments s ON s.session_id = v.session_id AND s.segment_id = v.segment_id
    WHERE v.space = :space AND v.session_id = :sid AND s.replaced_by IS NOT NULL
    """
)
# What was embedded, for the segments that still exist (returned).
_RECORD = text(
    """
    INSERT INTO segment_vectors (session_id, segment_id, space, text_sha)
    SELECT s.session_id, s.segment_id, :space, v.sha
    FROM unnest(CAST(:gids AS text[]), CAST(:shas AS text[])) AS v(segment_id, sha)
    JOIN segments s ON s.session_id = :sid AND s.segment_id = v.segment_id
    ON CONFLICT (session_id, segment_id, space)
      DO UPDATE SET text_sha = EXCLUDED.text_sha, embedded_at = now()
    RETURNING segment_id
    """
)
# Sessions with an active segment that has no vector in the space (a new space, a lost job).
# Changed documents are the business of the embed run each ingest commit queues.
_PENDING = text(
    """
    SELECT DISTINCT s.session_id FROM segments s
    LEFT JOIN segment_vectors v
      ON v.session_id = s.session_id AND v.segment_id = s.segment_id AND v.space = :space
    WHERE s.replaced_by IS NULL AND v.text_sha IS NULL
    LIMIT :limit
    """
)


class SegmentEmbedding:
    def __init__(
        self,
        engine: AsyncEngine,
        embedder: Embedder,
        store: VectorStore,
        *,
        batch: int = 64,
    ) -> None:
        self.engine = engine
        self.embedder = embedder
        self.store = store
        self.batch = batch
        self.space = SpaceName.of(embedder)
        self.space_name = store.name_of(self.space)
        self.opened = False

    async def open(self) -> None:
        """Open the store, create the space (and its row) if new."""
        await self.store.open()
        await self.store.ensure_space(self.space)
        stored = await self.store.count(self.space)
        t = SegmentVector.__table__
        async with self.engine.begin() as conn:
            await conn.execute(
                pg_insert(VectorSpace)
                .values(space=self.space_name, model=self.space.model, dim=self.space.dim)
                .on_conflict_do_nothing(index_elements=[VectorSpace.space])
            )
            recorded = (
                await conn.execute(
                    select(func.count()).select_from(t).where(t.c.space == self.space_name)
                )
            ).scalar_one()
            if stored < recorded:
                # The index lost vectors (its files deleted or restored from an older copy):
                # forget what PostgreSQL says was embedded, so everything is embedded again.
                log.warning("vectors.index_lost_points", space=self.space_name,
                            stored=stored, recorded=recorded)  # fmt: skip
                await conn.execute(t.delete().where(t.c.space == self.space_name))
                await conn.execute(
                    update(VectorSpace)
                    .where(VectorSpace.space == self.space_name)
                    .values(status="building", ready_at=None)
                )
        self.opened = True

    async def close(self) -> None:
        await self.store.close()
        await self.embedder.close()

    async def embed_session(self, session_id: str) -> int:
        """Embed what the session lacks in the current space; returns segments embedded."""
        if not self.opened:
            raise RuntimeError("the vector index is not open yet")
        params = {"space": self.space_name, "sid": session_id, "batch": self.batch}
        done = 0
        while True:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(_TODO, params)).all()
            if not rows:
                break
            vectors = await self.embedder.embed_passages([r.doc for r in rows])
            points = [
                VectorPoint.segment(
                    r.session_id,
                    r.segment_id,
                    vec,
                    spoken_at=r.spoken_at,
                    text=r.text[:1000],
                    speaker=r.speaker,
                )
                for r, vec in zip(rows, vectors, strict=True)
            ]
            await self.store.upsert(self.space, points)
            # Recorded only for segments still there: a forget or a replaced file may have
            # deleted some while they were embedded, and their points must go too (a point
            # outlives its segment otherwise, text and all).
            ids = [r.segment_id for r in rows]
            try:
                async with self.engine.begin() as conn:
                    kept = set(
                        (
                            await conn.execute(
                                _RECORD,
                                {
                                    "space": self.space_name,
                                    "sid": session_id,
                                    "gids": ids,
                                    "shas": [r.sha for r in rows],
                                },
                            )
                        ).scalars()
                    )
            except IntegrityError:  # deleted by a transaction that committed meanwhile
                await self._drop_points(session_id, ids)
                raise
            if vanished := [g for g in ids if g not in kept]:
                await self._drop_points(session_id, vanished)
                log.info("embed.segments_vanished", session_id=session_id, count=len(vanished))
            done += len(kept)
        await self._drop_replaced(session_id)
        return done

    async def _drop_points(self, session_id: str, segment_ids: Sequence[str]) -> None:
        await self.store.delete(
            self.space, [point_id("segment", (session_id, g)) for g in segment_ids]
        )

    async def _drop_replaced(self, session_id: str) -> None:
        params = {"space": self.space_name, "sid": session_id}
        async with self.engine.connect() as conn:
            gone: Sequence[str] = (await conn.execute(_REPLACED, params)).scalars().all()
        if not gone:
            return
        await self._drop_points(session_id, gone)
        t = SegmentVector.__table__
        async with self.engine.begin() as conn:
            await conn.execute(
                t.delete().where(
                    t.c.space == self.space_name,
                    t.c.session_id == session_id,
                    t.c.segment_id.in_(list(gone)),
                )
            )

    async def pending_sessions(self, limit: int = 200) -> list[str]:
        async with self.engine.connect() as conn:
            found = await conn.execute(_PENDING, {"space": self.space_name, "limit": limit})
            return list(found.scalars().all())

    async def mark_ready_if_complete(self) -> bool:
        """`ready` once nothing is left to embed in the current space (idempotent)."""
        if await self.pending_sessions(limit=1):
            return False
        t = VectorSpace.__table__
        async with self.engine.begin() as conn:
            await conn.execute(
                t.update()
                .where(t.c.space == self.space_name, t.c.status == "building")
                .values(status="ready", ready_at=text("now()"))
            )
        return True
