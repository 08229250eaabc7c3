"""The keyword leg of retrieval (turtle): PostgreSQL full-text search over `segments.tsv`.

`websearch_to_tsquery('english', query)`: words are ANDed, "quoted phrases" match in order,
`or` gives alternatives, `-word` excludes. Ranking is `ts_rank_cd` with length normalisation
(1: divide by 1 + log(length)) mapped to [0, 1) (32: rank / (rank + 1)). It is PostgreSQL's
cover-density ranking, not Okapi BM25 proper (ADR 0004); the GIN index finds the matches.
"""

from __future__ import annotations

from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.retrieve import Candidate, ContextQuery

_SEARCH = text(
    """
    SELECT s.session_id, s.segment_id, s.text, s.speaker, s.spoken_at,
           ts_rank_cd(s.tsv, q, 33) AS score
    FROM segments s, websearch_to_tsquery('english', :query) q
    WHERE s.tsv @@ q AND s.replaced_by IS NULL
      AND s.spoken_at <= :as_of
      AND (CAST(:since AS timestamptz) IS NULL OR s.spoken_at >= CAST(:since AS timestamptz))
    ORDER BY score DESC, s.spoken_at DESC, s.segment_id
    LIMIT :k
    """
)


class Bm25Leg:
    name = "bm25"
    creature = "turtle"

    def __init__(self, engine: AsyncEngine) -> None:
        self.engine = engine

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]:
        since = None if q.hours_back is None else q.as_of - timedelta(hours=q.hours_back)
        async with self.engine.connect() as conn:
            rows = await conn.execute(
                _SEARCH, {"query": q.query, "as_of": q.as_of, "since": since, "k": k}
            )
            return [
                Candidate(
                    r.session_id, r.segment_id, r.text, r.speaker, r.spoken_at, float(r.score)
                )
                for r in rows
            ]
