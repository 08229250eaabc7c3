"""The keyword leg of retrieval (starfish, bm25-search): BM25 over the Tantivy keyword index, with
PostgreSQL full-text search as the fallback.

A query in natural language ("when did Priya move to Lisbon?") is a disjunction of its words
(stopwords dropped, stemmed): BM25 ranks texts by how many of the words they hold and how rare
those are. A query with search syntax, a "quoted phrase" or an excluded `-word`, takes
`websearch_to_tsquery('english', query)` semantics instead: words are ANDed, phrases match in
order, `or` gives alternatives, `-word` excludes. PostgreSQL parses and stems in both cases, for
both backends. Scores are mapped to [0, 1) (s / (s + 1)). The index holds each segment with its
speaker and the turn before it (search_index.py); the PostgreSQL fallback only the segment.
Inside a fused request the leg also ranks the segments by their text with the turn after it
(`bm25_next`, a second ranking that fusion weighs on its own: ADR 0014).
- Index (search_index.py, the default): Okapi BM25, top-k without visiting every match.
- PostgreSQL: `ts_rank_cd` with length normalisation over every GIN match (ADR 0004). Used
  while the index is (re)building, for a query the translation does not cover, or when
  `CONTEXT_ENGINE_KEYWORD_BACKEND=postgres`.
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime, timedelta

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine

from context_engine.index import tsquery
from context_engine.index.keyword import SegmentSearchIndex
from context_engine.search.query import Candidate, ContextQuery, fetch_active
from her_os_shared.creatures import CreatureName
from her_os_shared.logging import get_logger
from her_os_shared.memo import AsyncLRU

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
# Queries whose PostgreSQL parse is kept (a round trip saved for each repeat: Annie's
# lookahead and briefings, an agent paging through results).
PARSES_KEPT = 4096
# Search syntax: a quoted phrase or an excluded word (`-word`).
_SYNTAX = re.compile(r'"|(?:^|\s)-\w')


def is_natural(query: str) -> bool:
    """True for a query without search syntax: its words are alternatives, ranked by BM25."""
    return _SYNTAX.search(query) is None


NEXT = "bm25_next"  # the ranking by each segment with the turn after it


class Bm25Leg:
    name = "bm25"
    creature = CreatureName.STARFISH

    def __init__(
        self,
        engine: AsyncEngine,
        index: SegmentSearchIndex | None = None,
        *,
        next_turn: bool = True,
    ) -> None:
        self.engine = engine
        self.index = index
        self.next_turn = next_turn
        self._parsed: AsyncLRU[str, str] = AsyncLRU(PARSES_KEPT)

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]:
        return (await self._rankings(q, k, next_turn=False))[self.name]

    async def rankings(self, q: ContextQuery, k: int) -> dict[str, list[Candidate]]:
        """This leg's ranking, and (from the index, when `next_turn`) `bm25_next`'s."""
        return await self._rankings(q, k, next_turn=self.next_turn)

    async def _rankings(
        self, q: ContextQuery, k: int, *, next_turn: bool
    ) -> dict[str, list[Candidate]]:
        since = None if q.hours_back is None else q.as_of - timedelta(hours=q.hours_back)
        if self.index is not None and self.index.ready:
            fields = {"lex": self.name, **({"lex_next": NEXT} if next_turn else {})}
            found = await self._search_index(q, since, k, fields)
            if found is not None:
                return found
        async with self.engine.connect() as conn:
            return {self.name: await self._search_postgres(conn, q, since, k)}

    async def _parse(self, query: str) -> str:
        """PostgreSQL's parse of `query` (websearch_to_tsquery, English), kept for repeats."""

        async def parse() -> str:
            async with self.engine.connect() as conn:
                return (await conn.execute(_PARSE, {"query": query})).scalar() or ""

        return await self._parsed.get(query, parse)

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
        self,
        q: ContextQuery,
        since: datetime | None,
        k: int,
        fields: dict[str, str],
    ) -> dict[str, list[Candidate]] | None:
        """Each index field's ranking (field → ranking name), its hits re-checked in
        PostgreSQL together; None when this query should go to PostgreSQL instead. No
        connection is held while the index searches (a worker thread's milliseconds)."""
        index = self.index
        assert index is not None
        parsed = await self._parse(q.query)
        try:
            node = tsquery.parse(parsed)
            if node is None:  # only stopwords: nothing matches, as in PostgreSQL
                return {name: [] for name in fields.values()}
            if is_natural(q.query):
                node = tsquery.any_term(node)
            queries = {f: tsquery.to_tantivy(node, index.schema, f) for f in fields}
        except (tsquery.UnsupportedQuery, ValueError) as exc:
            log.info("bm25.index_unsupported_query", reason=str(exc)[:200])
            return None
        out: dict[str, list[Candidate]] = {f: [] for f in fields}
        want = k + 5  # a few spare for hits PostgreSQL no longer has as active
        left = list(fields)
        for page in range(MAX_PAGES):

            def search(left: list[str] = left, page: int = page) -> dict[str, list]:
                return {
                    f: index.search(
                        queries[f], as_of=q.as_of, since=since, k=want, offset=page * want
                    )
                    for f in left
                }

            # In a worker thread: a search over a large index must not hold the event loop
            # (the other legs and requests wait on it).
            hits = await asyncio.to_thread(search)
            keys = {f: [tuple(key.split("/", 1)) for key, _ in hits[f]] for f in left}
            every = list(dict.fromkeys(key for f in left for key in keys[f]))
            async with self.engine.connect() as conn:
                by_key = await fetch_active(conn, every, q.as_of, since)  # type: ignore[arg-type]
            for f in list(left):
                for key, (_, score) in zip(keys[f], hits[f], strict=True):
                    r = by_key.get(key)
                    if r is not None:
                        out[f].append(Candidate(r.session_id, r.segment_id, r.text, r.speaker,
                                                r.spoken_at, score / (score + 1.0)))  # fmt: skip
                if len(out[f]) >= k or len(hits[f]) < want:
                    left.remove(f)
            if not left:
                break
        return {name: out[f][:k] for f, name in fields.items()}
