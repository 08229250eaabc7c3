"""The vector leg of retrieval (shark): the query embedded by the same model as the stored
segments, the nearest segments in the current space spoken by `as_of` (and inside the
window), re-checked in PostgreSQL (still stored, not replaced by a sweep). Score: the mean of the
query's cosines to the segment's two documents (embedding.py).

The query is embedded without the names of the memory's speakers (speakers.py): the speaker
prior weighs who is named, the vector searches what was said."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import numpy as np
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.index.segment_vectors import SegmentEmbedding
from context_engine.knowledge.speakers import KnownSpeakers, without_names
from context_engine.search.query import Candidate, ContextQuery, fetch_active
from her_os_shared.creatures import CreatureName
from her_os_shared.logging import get_logger

log = get_logger(__name__)

# Extra hits asked of the index for those PostgreSQL no longer has as active.
SLACK = 10


class VectorLeg:
    name = "vector"
    creature = CreatureName.SHARK

    def __init__(
        self,
        embedding: SegmentEmbedding,
        engine: AsyncEngine | None = None,
        *,
        speakers: KnownSpeakers | None = None,
    ) -> None:
        self.embedding = embedding
        # the re-check's pool (the engine's read pool); the embedding's own by default
        self.engine = engine or embedding.engine
        self.speakers = speakers
        self._preparing: set[asyncio.Task[np.ndarray]] = set()

    async def query_text(self, query: str) -> str:
        """What is embedded for `query`: without the speakers' names (when configured)."""
        if self.speakers is None:
            return query
        try:
            names = await self.speakers.names()
        except Exception as exc:  # the names only sharpen the query; search without them
            log.warning("vector_leg.speakers_failed", error=repr(exc)[:300])
            return query
        return without_names(query, names)

    def prepare(self, q: ContextQuery) -> None:
        """Start embedding the query now, while its search waits for its turn: the embedder
        keeps the vector (embed/query_cache.py) and batches it with the other waiting
        queries (embed/query_batch.py). Its failure is left for `search` to meet."""
        if not self.embedding.opened:
            return
        task = asyncio.create_task(self._embed(q.query), name="vector leg: prepare")
        self._preparing.add(task)
        task.add_done_callback(self._prepared)

    def _prepared(self, task: asyncio.Task[np.ndarray]) -> None:
        self._preparing.discard(task)
        if not task.cancelled():
            task.exception()  # retrieved: `search` embeds again and reports it

    async def _embed(self, query: str) -> np.ndarray:
        return await self.embedding.embedder.embed_query(await self.query_text(query))

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]:
        if not self.embedding.opened:
            raise RuntimeError("the vector index is not open yet")
        since = None if q.hours_back is None else q.as_of - timedelta(hours=q.hours_back)
        # a repeated (or prepared) query's vector is kept by the embedder (query_cache.py)
        vector = await self._embed(q.query)
        hits = await self.embedding.store.search(
            self.embedding.search_space,
            vector,
            k + SLACK,
            kind="segment",
            spoken_before=q.as_of,
            spoken_after=since,
        )
        keys = [(str(h.key[0]), str(h.key[1])) for h in hits]
        async with self.engine.connect() as conn:
            rows = await fetch_active(conn, keys, q.as_of, since)
        out = []
        for key, hit in zip(keys, hits, strict=True):
            r = rows.get(key)
            if r is not None:
                out.append(Candidate(*key, r.text, r.speaker, r.spoken_at, hit.score))
        return out[:k]
