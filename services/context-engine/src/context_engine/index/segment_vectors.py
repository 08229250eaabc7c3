"""Segments into the vector index (the eel creature): the embed stage of a session.

Every ingest commit queues the session's `embed` job (durable, procrastinate). A run embeds the
session's active segments that have no vector in the current space yet — or whose documents
(the segment with the turn before, and with the turn after; see `_TODO`) changed since — in
batches of `batch` segments; each batch is upserted into the vector store and then recorded in
`segment_vectors` (model space, md5 of the documents), so a run stopped half-way resumes where
it was and a re-run does nothing. Vectors of segments a sweep replaced are deleted.

The space is (embedder name, dimension, distance): a new model or dimension is a new space,
filled in the background by the minute scan (`pending_sessions`) and marked `ready` once every
active segment has a vector in it (`vector_spaces`). Once a full comparison found nothing left,
the scan reads only the sessions marked as changed since (vector_todo.py), and a run clears the
mark it saw. Until then searches use the space that was
ready before, when its vectors answer the same query vectors (same model and dimension: an
older layout of the documents), and that space is dropped once the new one is ready
(`search_space`). Point ids come from segment ids, so upserts are idempotent.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import numpy as np
from sqlalchemy import func, select, text, update
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.embed.base import Embedder
from context_engine.index import vector_todo
from context_engine.store.models import EntityVector, SegmentVector, VectorSpace
from context_engine.vectors.base import Distance, SpaceName, VectorPoint, VectorStore, point_id
from her_os_shared.logging import get_logger

log = get_logger(__name__)

EMBED_STAGE = "embed"
EMBED_VERSION = 1

# What is embedded for a segment: two documents, each with speakers — the turn before it in
# the session and its own ("Priya: where did you go?\nAsha: Lisbon, in May.": an answer is
# found by its question, as in the keyword index, search_index.py), and its own and the turn
# after it (a question is found by its answer: the reply often holds what was asked about).
# The stored point is the mean of the two unit vectors, not normalised, in a dot space: a
# query's score is then the mean of its cosines to the two documents. Measured on LoCoMo dev
# (ADR 0014): multi-hop recall@10 49.7 → 54.7 offline with the keyword leg's next-turn
# ranking; normalising the mean gave back most of the gain (50.4).
# `text_sha` is the md5 of both documents: when a neighbouring turn changes or arrives (a
# sweep, a late segment, the next turn), the segment is embedded again by the next embed run.
SEGMENT_DISTANCE: Distance = "dot"
_TODO = text(
    """
    WITH d AS (
      SELECT session_id, segment_id, text, speaker, spoken_at, start_s,
             concat_ws(E'\\n', lag(speaker || ': ' || text) OVER w, speaker || ': ' || text) AS doc,
             concat_ws(E'\\n', speaker || ': ' || text, lead(speaker || ': ' || text) OVER w)
               AS doc_next
      FROM segments WHERE session_id = :sid AND replaced_by IS NULL
      WINDOW w AS (ORDER BY start_s, segment_id)
    ),
    h AS (SELECT d.*, md5(d.doc || E'\\x1f' || d.doc_next) AS sha FROM d)
    SELECT h.session_id, h.segment_id, h.text, h.speaker, h.spoken_at, h.doc, h.doc_next, h.sha
    FROM h
    LEFT JOIN segment_vectors v
      ON v.session_id = h.session_id AND v.segment_id = h.segment_id AND v.space = :space
    WHERE v.text_sha IS NULL OR v.text_sha <> h.sha
    ORDER BY h.start_s, h.segment_id
    LIMIT :batch
    """
)
# Document vectors kept (least recently used dropped): when the next turn arrives, the
# previous segment is embedded again, but only its "self + next" document is new.
DOC_CACHE = 4096
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


_COUNTS = text(
    "SELECT status, (SELECT count(*) FROM segment_vectors WHERE space = :s) AS embedded,"
    " (SELECT count(*) FROM entity_vectors WHERE space = :s) AS entities"
    " FROM vector_spaces WHERE space = :s"
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
        self.space = SpaceName.of(embedder, SEGMENT_DISTANCE)
        self.space_name = store.name_of(self.space)
        # What searches use: the current space, or while it fills, the one ready before it.
        self.search_space: SpaceName = self.space
        self.opened = False
        self._docs: OrderedDict[str, np.ndarray] = OrderedDict()
        # Whether a full comparison since open() found nothing left to embed (from then on
        # the scans read vector_todo's marks); `generation` counts opens, for EntityEmbedding.
        self.caught_up = False
        self.generation = 0

    async def open(self) -> None:
        """Open the store, create the space (and its row) if new."""
        self.caught_up = False
        self.generation += 1
        await self.store.open()
        await self.store.ensure_space(self.space)
        stored = await self.store.count(self.space)
        t, ev = SegmentVector.__table__, EntityVector.__table__
        async with self.engine.begin() as conn:
            await conn.execute(
                pg_insert(VectorSpace)
                .values(space=self.space_name, model=self.space.model, dim=self.space.dim)
                .on_conflict_do_nothing(index_elements=[VectorSpace.space])
            )
            recorded = 0
            for table in (t, ev):  # the store holds both kinds of points
                recorded += (
                    await conn.execute(
                        select(func.count())
                        .select_from(table)
                        .where(table.c.space == self.space_name)
                    )
                ).scalar_one()
            if stored < recorded:
                # The index lost vectors (its files deleted or restored from an older copy):
                # forget what PostgreSQL says was embedded, so everything is embedded again.
                log.warning("vectors.index_lost_points", space=self.space_name,
                            stored=stored, recorded=recorded)  # fmt: skip
                await conn.execute(t.delete().where(t.c.space == self.space_name))
                await conn.execute(ev.delete().where(ev.c.space == self.space_name))
                await conn.execute(
                    update(VectorSpace)
                    .where(VectorSpace.space == self.space_name)
                    .values(status="building", ready_at=None)
                )
            self.search_space = await self._previous_ready(conn) or self.space
        if self.search_space != self.space:
            log.info("vectors.searching_previous_space", space=self.space_name,
                     previous=self.store.name_of(self.search_space))  # fmt: skip
        self.opened = True

    async def _previous_ready(self, conn: Any) -> SpaceName | None:
        """While the current space is not ready: a ready space of the same model and dimension
        (another layout: a query vector of this embedder fits it) that the store still has."""
        t = VectorSpace.__table__
        status = (
            await conn.execute(select(t.c.status).where(t.c.space == self.space_name))
        ).scalar_one()
        if status == "ready":
            return None
        names = set(await self.store.spaces())
        for distance in ("cosine", "dot"):
            old = SpaceName(self.space.model, self.space.dim, distance)  # type: ignore[arg-type]
            name = self.store.name_of(old)
            if old == self.space or name not in names:
                continue
            ready = (
                await conn.execute(select(t.c.status).where(t.c.space == name))
            ).scalar_one_or_none()
            if ready == "ready":
                return old
        return None

    async def embed_documents(self, docs: Sequence[str]) -> list[np.ndarray]:
        """Passage vectors of `docs`, those embedded lately from the cache."""
        missing = list(dict.fromkeys(d for d in docs if d not in self._docs))
        if missing:
            vectors = await self.embedder.embed_passages(missing)
            for doc, vec in zip(missing, vectors, strict=True):
                self._docs[doc] = vec
        out = []
        for doc in docs:
            self._docs.move_to_end(doc)
            out.append(self._docs[doc])
        while len(self._docs) > DOC_CACHE:
            self._docs.popitem(last=False)
        return out

    async def close(self) -> None:
        """Close the store; the embedder is its maker's to close (the runtime shares it)."""
        await self.store.close()

    async def counts(self) -> dict[str, object]:
        """For /v1/stats: the current space, its status, the segments and entities embedded
        in it, and the space searches read."""
        async with self.engine.connect() as conn:
            row = (await conn.execute(_COUNTS, {"s": self.space_name})).one_or_none()
        return {
            "enabled": True,
            "space": self.space_name,
            "searching": self.store.name_of(self.search_space),
            "status": row.status if row else "unavailable",
            "embedded": int(row.embedded) if row else 0,
            "entities_embedded": int(row.entities) if row else 0,
        }

    async def embed_session(self, session_id: str) -> int:
        """Embed what the session lacks in the current space; returns segments embedded."""
        if not self.opened:
            raise RuntimeError("the vector index is not open yet")
        params = {"space": self.space_name, "sid": session_id, "batch": self.batch}
        async with self.engine.connect() as conn:  # cleared at the end, unless marked since
            seen = await vector_todo.mark_of(conn, vector_todo.SESSION, session_id)
        done = 0
        while True:
            async with self.engine.connect() as conn:
                rows = (await conn.execute(_TODO, params)).all()
            if not rows:
                break
            vectors = await self.embed_documents([d for r in rows for d in (r.doc, r.doc_next)])
            means = [(vectors[2 * i] + vectors[2 * i + 1]) / 2 for i in range(len(rows))]
            points = [
                VectorPoint.segment(
                    r.session_id,
                    r.segment_id,
                    vec,
                    spoken_at=r.spoken_at,
                    text=r.text[:1000],
                    speaker=r.speaker,
                )
                for r, vec in zip(rows, means, strict=True)
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
        async with self.engine.begin() as conn:
            await vector_todo.clear(conn, vector_todo.SESSION, seen)
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
        """Sessions with segments to embed in the current space: compared in full until a
        comparison finds none, then the sessions marked as changed since (vector_todo.py)."""
        async with self.engine.connect() as conn:
            if self.caught_up and await self.space_ready(conn):
                return list(await vector_todo.marked(conn, vector_todo.SESSION, limit))
            self.caught_up = False  # a space being filled (or made to refill) is compared
            found = await conn.execute(_PENDING, {"space": self.space_name, "limit": limit})
            pending = list(found.scalars().all())
        if not pending:
            self.caught_up = True
        return pending

    async def space_ready(self, conn: Any) -> bool:
        """Whether the current space is `ready` (a forget or a lost index makes it `building`
        again, and the scans compare in full until it is filled)."""
        t = VectorSpace.__table__
        status = await conn.execute(select(t.c.status).where(t.c.space == self.space_name))
        return status.scalar() == "ready"

    async def mark_ready_if_complete(self) -> bool:
        """`ready` once nothing is left to embed in the current space (idempotent); searches
        move to it, and the space they used meanwhile is dropped."""
        if await self.pending_sessions(limit=1):
            return False
        t = VectorSpace.__table__
        async with self.engine.begin() as conn:
            await conn.execute(
                t.update()
                .where(t.c.space == self.space_name, t.c.status == "building")
                .values(status="ready", ready_at=text("now()"))
            )
        previous, self.search_space = self.search_space, self.space
        if previous != self.space:
            old = self.store.name_of(previous)
            async with self.engine.begin() as conn:  # its segment_vectors rows cascade
                await conn.execute(t.delete().where(t.c.space == old))
            await self.store.drop_space(previous)
            log.info("vectors.previous_space_dropped", space=self.space_name, previous=old)
        return True
