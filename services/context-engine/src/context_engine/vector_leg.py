"""The vector leg of retrieval (shark): the query embedded by the same model as the stored
segments, the nearest segments in the current space spoken by `as_of` (and inside the
window), re-checked in PostgreSQL (still stored, not replaced by a sweep). Score: cosine."""

from __future__ import annotations

from datetime import timedelta

from context_engine.embedding import SegmentEmbedding
from context_engine.retrieve import Candidate, ContextQuery, fetch_active

# Extra hits asked of the index for those PostgreSQL no longer has as active.
SLACK = 10


class VectorLeg:
    name = "vector"
    creature = "shark"

    def __init__(self, embedding: SegmentEmbedding) -> None:
        self.embedding = embedding

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]:
        if not self.embedding.opened:
            raise RuntimeError("the vector index is not open yet")
        since = None if q.hours_back is None else q.as_of - timedelta(hours=q.hours_back)
        vector = await self.embedding.embedder.embed_query(q.query)
        hits = await self.embedding.store.search(
            self.embedding.space,
            vector,
            k + SLACK,
            kind="segment",
            spoken_before=q.as_of,
            spoken_after=since,
        )
        keys = [(str(h.key[0]), str(h.key[1])) for h in hits]
        async with self.embedding.engine.connect() as conn:
            rows = await fetch_active(conn, keys, q.as_of, since)
        out = []
        for key, hit in zip(keys, hits, strict=True):
            r = rows.get(key)
            if r is not None:
                out.append(Candidate(*key, r.text, r.speaker, r.spoken_at, hit.score))
        return out[:k]
