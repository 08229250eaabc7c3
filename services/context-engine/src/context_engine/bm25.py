"""The keyword leg of retrieval (turtle): BM25 over the Tantivy keyword index, with
PostgreSQL full-text search as the fallback.

A query in natural language ("when did Priya move to Lisbon?") is a disjunction of its words
(stopwords dropped, stemmed): BM25 ranks texts by how many of the words they hold and how rare
those are. A query with search syntax, a "quoted phrase" or an excluded `-word`, takes
`websearch_to_tsquery('english', query)` semantics instead: words are ANDed, phrases match in
order, `or` gives alternatives, `-word` excludes. PostgreSQL parses and stems in both cases, for
both backends. Scores are mapped to [0, 1) (s / (s + 1)). The index holds each segment with its
speaker and the turn before it (search_index.py); the PostgreSQL fallback only the segment.
- Index (search_index.py, the default): Okapi BM25, top-k without visiting every match.
- PostgreSQL: `ts_rank_cd` with length normalisation over every GIN match (ADR 0004). Used
  while the index is (re)building, for a query the translation does not cover, or when
  `CONTEXT_ENGINE_KEYWORD_BACKEND=postgres`.
"""

from __future__ import annotations

import asyncio
import re
from datetime import timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine import tsquery
from context_engine.retrieve import Candidate, ContextQuery, fetch_active
from context_engine.search_index import SegmentSearchIndex
from her_os_shared.logging import get_logger

log = get_logger(__name__)

_SEARCH = text(
    """
    WITH w AS (SELECT websearch_to_tsquery('english', :query) AS q),
    t AS (SELECT CASE WHEN :natural
                      THEN regexp_replace(w.q::text, ' (&|<->|<[0-9]+>) ', ' | ', 'g')::tsquery
                      ELSE w.q END AS q FROM w)
    SELECT s.session_id, s.segment_id, s.text, s.speaker, s.spoken_at,
           ts_rank_cd(s.tsv, t.q, 33) AS score
    FROM segments s, t
    WHERE s.tsv @@ t.q AND s.replaced_by IS NULL
      AND s.spoken_at <= :as_of
      AND (CAST(:since AS timestamptz) IS NULL OR s.spoken_at >= CAST(:since AS timestamptz))
    ORDER BY score DESC, s.spoken_at DESC, s.segment_id
    LIMIT :k
    """
)
_PARSE = text("SELECT websearch_to_tsquery('english', :query)::text")
MAX_PAGES = 4
# Search syntax: a quoted phrase or an excluded word (`-word`).
_SYNTAX = re.compile(r'"|(?:^|\s)-\w')


def is_natural(query: str) -> bool:
    """True for a query without search syntax: its words are alternatives, ranked by BM25."""
    return _SYNTAX.search(query) is None


class Bm25Leg:
    name = "bm25"
    creature = "turtle"

    def __init__(self, engine: AsyncEngine, index: SegmentSearchIndex | None = None) -> None:
        self.engine = engine
        self.index = index

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]:
        since = None if q.hours_back is None else q.as_of - timedelta(hours=q.hours_back)
        async with self.engine.connect() as conn:
            if self.index is not None and self.index.ready:
                found = await self._search_index(conn, q, since, k)
                if found is not None:
                    return found
            return await self._search_postgres(conn, q, since, k)

    async def _search_postgres(
        self, conn: AsyncConnection, q: ContextQuery, since: object, k: int
    ) -> list[Candidate]:
        rows = await conn.execute(
            _SEARCH,
            {
                "query": q.query,
                "natural": is_natural(q.query),
                "as_of": q.as_of,
                "since": since,
                "k": k,
            },
        )
        return [
            Candidate(r.session_id, r.segment_id, r.text, r.speaker, r.spoken_at, float(r.score))
            for r in rows
        ]

    async def _search_index(
        self, conn: AsyncConnection, q: ContextQuery, since: object, k: int
    ) -> list[Candidate] | None:
        """None when this query should go to PostgreSQL instead."""
        assert self.index is not None
        parsed = (await conn.execute(_PARSE, {"query": q.query})).scalar() or ""
        try:
            node = tsquery.parse(parsed)
            if node is None:
                return []  # only stopwords: nothing matches, as in PostgreSQL
            if is_natural(q.query):
                node = tsquery.any_term(node)
            query = tsquery.to_tantivy(node, self.index.schema, "lex")
        except (tsquery.UnsupportedQuery, ValueError) as exc:
            log.info("bm25.index_unsupported_query", reason=str(exc)[:200])
            return None
        out: list[Candidate] = []
        want = k + 5  # a few spare for hits PostgreSQL no longer has as active
        for page in range(MAX_PAGES):
            # In a worker thread: a search over a large index must not hold the event loop
            # (the other legs and requests wait on it).
            hits = await asyncio.to_thread(self.index.search, query, as_of=q.as_of,
                                           since=since, k=want, offset=page * want)  # type: ignore[arg-type]  # fmt: skip
            if not hits:
                break
            keys = [tuple(key.split("/", 1)) for key, _ in hits]
            by_key = await fetch_active(conn, keys, q.as_of, since)  # type: ignore[arg-type]
            for key, (_, score) in zip(keys, hits, strict=True):
                r = by_key.get(key)
                if r is not None:
                    out.append(Candidate(r.session_id, r.segment_id, r.text, r.speaker,
                                         r.spoken_at, score / (score + 1.0)))  # fmt: skip
            if len(out) >= k or len(hits) < want:
                break
        return out[:k]
