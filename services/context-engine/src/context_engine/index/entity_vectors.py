"""Entities into the vector index beside the segments (the design's Layer 5: "embeds
transcript segments and entities"; L1 entities take part in retrieval by vector similarity).

An entity's document is its name and type and the words of its first few current mentions
("Priya (person)\\nMy wife Priya never lets me forget"): the name alone would find "Bengaluru"
for "Bangalore", the evidence also finds Priya for "my wife". It is embedded by the segments'
model into the segments' current space (a `dot` space: entity vectors are unit length, so a
query's score is its cosine), as a point of kind `entity` that segment searches never see.
`entity_vectors` records the md5 of the document each point was made from, so a run embeds
only new or changed entities, a run stopped half-way resumes, and a new space is filled by the
same query. Once a full comparison found nothing to do, a run reads only the entities marked
as changed since (vector_todo.py: an entity, or one of its mentions, written or deleted).

Nothing in the index outlives an entity: `entity_vectors` keeps no foreign key to it, so a
deleted entity (forgotten, or left without mentions) leaves its row behind until
`drop_orphans` has deleted the point; a forget also drops the points of every entity that lost
mentions (`drop`), because their documents held the forgotten words. Both are re-embedded from
what remains by the next run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.index import vector_todo
from context_engine.index.segment_vectors import SegmentEmbedding
from context_engine.vectors.base import SpaceName, UnknownSpaceError, VectorPoint, point_id
from her_os_shared.logging import get_logger

log = get_logger(__name__)

# Mentions whose words join the name in the document (the first ones: the document stops
# changing once an entity has that many, so a busy entity is not embedded after every session).
EVIDENCE_PER_ENTITY = 3
EVIDENCE_CHARS = 200
# Hits asked of the index per hit wanted: some are filtered out by type or tier afterwards.
SEARCH_SLACK = 4

_TODO = text(
    """
    WITH d AS (
      SELECT e.id, e.type, e.name,
             concat_ws(E'\\n', e.name || ' (' || e.type || ')', (
               SELECT string_agg(x.ev, E'\\n' ORDER BY x.first)
               FROM (SELECT left(m.evidence, :chars) AS ev, min(m.id) AS first
                     FROM entity_mentions m
                     WHERE m.entity_id = e.id AND m.current AND m.evidence <> ''
                     GROUP BY left(m.evidence, :chars) ORDER BY first LIMIT :evidence) x
             )) AS doc
      FROM entities e
      WHERE e.episode_count > 0
        AND (CAST(:ids AS bigint[]) IS NULL OR e.id = ANY(CAST(:ids AS bigint[])))
    )
    SELECT d.id, d.type, d.name, d.doc, md5(d.doc) AS sha FROM d
    LEFT JOIN entity_vectors v ON v.entity_id = d.id AND v.space = :space
    WHERE v.text_sha IS DISTINCT FROM md5(d.doc)
    ORDER BY d.id LIMIT :batch
    """
)
# What was embedded, for the entities that still exist (returned).
_RECORD = text(
    """
    INSERT INTO entity_vectors (entity_id, space, text_sha)
    SELECT e.id, :space, v.sha
    FROM unnest(CAST(:ids AS bigint[]), CAST(:shas AS text[])) AS v(entity_id, sha)
    JOIN entities e ON e.id = v.entity_id
    ON CONFLICT (entity_id, space) DO UPDATE SET text_sha = EXCLUDED.text_sha,
                                                 embedded_at = now()
    RETURNING entity_id
    """
)
# Points whose entity is gone, or kept only as history (no current mention).
_ORPHANS = text(
    """
    SELECT v.entity_id, v.space FROM entity_vectors v
    LEFT JOIN entities e ON e.id = v.entity_id
    WHERE (e.id IS NULL OR e.episode_count = 0)
      AND (CAST(:ids AS bigint[]) IS NULL OR v.entity_id = ANY(CAST(:ids AS bigint[])))
    LIMIT :limit
    """
)
_ALIVE = text(
    """
    SELECT id FROM entities
    WHERE id = ANY(CAST(:ids AS bigint[])) AND episode_count > 0
      AND (CAST(:types AS text[]) IS NULL OR type = ANY(CAST(:types AS text[])))
      AND (CAST(:tiers AS text[]) IS NULL OR tier = ANY(CAST(:tiers AS text[])))
    """
)


@dataclass(frozen=True, slots=True)
class EntityHit:
    entity_id: int
    score: float  # cosine similarity of the query to the entity's document


class EntityEmbedding:
    """The `entity` points of the segments' vector index (one store, one model)."""

    def __init__(self, segments: SegmentEmbedding, *, batch: int = 64) -> None:
        self.segments = segments
        self.batch = batch
        # The segments' open() whose space a full comparison found complete (None: not yet);
        # from then on runs read vector_todo's marks.
        self._caught_up: int | None = None

    @property
    def engine(self) -> AsyncEngine:
        return self.segments.engine

    @property
    def space(self) -> SpaceName:
        return self.segments.space

    @property
    def opened(self) -> bool:
        return self.segments.opened

    async def _marks_trusted(self, conn: Any) -> bool:
        if self._caught_up == self.segments.generation and await self.segments.space_ready(conn):
            return True
        self._caught_up = None
        return False

    async def pending(self) -> bool:
        """True when an entity lacks its vector (or has an outdated one) in the current space,
        or a point outlived its entity: compared in full until a comparison finds nothing,
        then whether any entity is marked as changed."""
        async with self.engine.connect() as conn:
            if await self._marks_trusted(conn):
                return bool(await vector_todo.marked(conn, vector_todo.ENTITY, 1))
            todo = await conn.execute(_TODO, self._params(batch=1))
            if todo.first() is not None:
                return True
            if (await conn.execute(_ORPHANS, {"limit": 1, "ids": None})).first() is not None:
                return True
        self._caught_up = self.segments.generation
        return False

    def _params(self, *, batch: int, ids: Sequence[int] | None = None) -> dict[str, object]:
        return {
            "space": self.segments.space_name,
            "batch": batch,
            "evidence": EVIDENCE_PER_ENTITY,
            "chars": EVIDENCE_CHARS,
            "ids": None if ids is None else list(ids),
        }

    async def embed_pending(self) -> int:
        """Embed every entity whose document has no vector in the current space, in batches;
        then delete the points of entities that are gone. Returns entities embedded. Once a
        full run found nothing left, only the entities marked as changed are read."""
        if not self.opened:
            raise RuntimeError("the vector index is not open yet")
        async with self.engine.connect() as conn:
            trusted = await self._marks_trusted(conn)
        if trusted:
            return await self._embed_marked()
        generation = self.segments.generation
        done = 0
        while rows := await self._todo(self._params(batch=self.batch)):
            done += await self._embed_rows(rows)
        await self.drop_orphans()
        self._caught_up = generation  # every entity compared: the marks say what changes
        return done

    async def _embed_marked(self) -> int:
        done = 0
        while True:
            async with self.engine.connect() as conn:
                seen = await vector_todo.marked(conn, vector_todo.ENTITY, self.batch)
            if not seen:
                return done
            ids = [int(key) for key in seen]
            rows = await self._todo(self._params(batch=len(ids), ids=ids))
            if rows:
                done += await self._embed_rows(rows)
            await self.drop_orphans(ids=ids)
            async with self.engine.begin() as conn:
                await vector_todo.clear(conn, vector_todo.ENTITY, seen)

    async def _todo(self, params: dict[str, object]) -> list[Any]:
        async with self.engine.connect() as conn:
            return list((await conn.execute(_TODO, params)).all())

    async def _embed_rows(self, rows: list[Any]) -> int:
        """Embed these entities' documents, record them; returns those still there."""
        store, space = self.segments.store, self.space
        vectors = await self.segments.embedder.embed_passages([r.doc for r in rows])
        await store.upsert(
            space,
            [
                VectorPoint.entity(str(r.id), vec, name=r.name, type=r.type)
                for r, vec in zip(rows, vectors, strict=True)
            ],
        )
        ids = [int(r.id) for r in rows]
        async with self.engine.begin() as conn:
            kept = set(
                (
                    await conn.execute(
                        _RECORD,
                        {
                            "space": self.segments.space_name,
                            "ids": ids,
                            "shas": [r.sha for r in rows],
                        },
                    )
                ).scalars()
            )
        if vanished := [i for i in ids if i not in kept]:  # deleted while embedded
            await store.delete(space, [point_id("entity", (str(i),)) for i in vanished])
        return len(kept)

    async def drop(self, entity_ids: Sequence[int]) -> int:
        """Delete these entities' points in every space, and their records (a forget: their
        documents held forgotten words; the next run embeds what remains)."""
        ids = sorted(set(entity_ids))
        if not ids:
            return 0
        store = self.segments.store
        points = [point_id("entity", (str(i),)) for i in ids]
        for name in await store.spaces():
            await store.delete(name, points)  # type: ignore[arg-type]
        async with self.engine.begin() as conn:
            await conn.execute(
                text("DELETE FROM entity_vectors WHERE entity_id = ANY(CAST(:ids AS bigint[]))"),
                {"ids": ids},
            )
        return len(ids)

    async def drop_orphans(self, *, limit: int = 1000, ids: Sequence[int] | None = None) -> int:
        """Delete the points (and records) of entities that no longer exist or are only
        history (among `ids` when given). Returns points dropped."""
        store = self.segments.store
        dropped = 0
        while True:
            async with self.engine.connect() as conn:
                rows = (
                    await conn.execute(
                        _ORPHANS, {"limit": limit, "ids": None if ids is None else list(ids)}
                    )
                ).all()
            if not rows:
                return dropped
            by_space: dict[str, list[int]] = {}
            for r in rows:
                by_space.setdefault(r.space, []).append(int(r.entity_id))
            for name, ids in by_space.items():
                try:
                    await store.delete(name, [point_id("entity", (str(i),)) for i in ids])  # type: ignore[arg-type]
                except UnknownSpaceError:
                    pass  # the space is gone, and its points with it
                async with self.engine.begin() as conn:
                    await conn.execute(
                        text(
                            "DELETE FROM entity_vectors WHERE space = :space "
                            "AND entity_id = ANY(CAST(:ids AS bigint[]))"
                        ),
                        {"space": name, "ids": ids},
                    )
            dropped += len(rows)
            log.info("entity_vectors.orphans_dropped", count=len(rows))

    async def search(
        self,
        query_vector: np.ndarray,
        limit: int,
        *,
        types: Sequence[str] | None = None,
        tiers: Sequence[str] | None = None,
        min_score: float | None = None,
    ) -> list[EntityHit]:
        """The entities nearest the query vector (of the segments' embedder), best first,
        that still exist with a current mention, filtered by type and tier."""
        if not self.opened:
            raise RuntimeError("the vector index is not open yet")
        hits = await self.segments.store.search(
            self.space,
            query_vector,
            min(limit * SEARCH_SLACK, 1000),
            kind="entity",
        )
        scored = [
            EntityHit(int(h.key[0]), h.score)
            for h in hits
            if min_score is None or h.score >= min_score
        ]
        if not scored:
            return []
        async with self.engine.connect() as conn:
            alive = set(
                (
                    await conn.execute(
                        _ALIVE,
                        {
                            "ids": [h.entity_id for h in scored],
                            "types": list(types) if types else None,
                            "tiers": list(tiers) if tiers else None,
                        },
                    )
                ).scalars()
            )
        return [h for h in scored if h.entity_id in alive][:limit]
