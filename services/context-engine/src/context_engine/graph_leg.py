"""The graph leg of retrieval (kraken): entities named in the query → the facts about them
in the knowledge graph and the segments behind those facts and mentions.

1. Recognition: the query's word n-grams (1–4 words, case-folded) looked up among the
   entities' canonical names (an index lookup, no scan); the names of people, places,
   organisations, events and topics only — a question's "what" is not an entity.
2. Facts: for each recognised entity (at most `max_entities`, most mentioned first), the
   graph's facts true at `as_of` on either side of its node; each fact's source segments.
3. Mentions: the segments where the entity was mentioned, newest first (up to as_of).
Fact sources rank before mentions; within each, newest first. Everything is bounded by
`as_of`, the `hours_back` window and `k`. Without a graph (none configured, or it failed
for this query) the leg still answers from the mentions in PostgreSQL, and says so in the log.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import TYPE_CHECKING

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.extract.schema import canonical_name
from context_engine.retrieve import Candidate, ContextQuery, fetch_active
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.graph.knowledge import KnowledgeGraph

log = get_logger(__name__)

NAMED_TYPES = ("person", "place", "organization", "event", "topic")
_WORD = re.compile(r"[\w'’-]+", re.UNICODE)

_RECOGNISE = text(
    """
    SELECT id, type, name, canonical_name, episode_count FROM entities
    WHERE canonical_name = ANY(CAST(:names AS text[])) AND type = ANY(CAST(:types AS text[]))
      AND episode_count > 0
    ORDER BY episode_count DESC, id LIMIT :limit
    """
)
_MENTIONS = text(
    """
    SELECT DISTINCT ON (s.spoken_at, s.session_id, s.segment_id)
           s.session_id, s.segment_id, s.text, s.speaker, s.spoken_at
    FROM entity_mentions m
    JOIN segments s ON s.session_id = m.session_id AND s.segment_id = m.segment_id
    WHERE m.entity_id = ANY(CAST(:ids AS bigint[])) AND m.current
      AND s.replaced_by IS NULL AND s.spoken_at <= :as_of
      AND (CAST(:since AS timestamptz) IS NULL OR s.spoken_at >= CAST(:since AS timestamptz))
    ORDER BY s.spoken_at DESC, s.session_id, s.segment_id
    LIMIT :k
    """
)


def query_ngrams(query: str, max_words: int = 4) -> list[str]:
    """Every run of 1..max_words consecutive words, case-folded (possessive 's dropped)."""
    words = [re.sub(r"['’]s$", "", w) for w in _WORD.findall(query)]
    words = [w for w in words if w]
    grams = {
        canonical_name(" ".join(words[i : i + n]))
        for n in range(1, max_words + 1)
        for i in range(len(words) - n + 1)
    }
    return sorted(grams)


class GraphLeg:
    name = "graph"
    creature = "kraken"

    def __init__(
        self,
        engine: AsyncEngine,
        graph: KnowledgeGraph | None,
        *,
        max_entities: int = 5,
        facts_per_entity: int = 50,
    ) -> None:
        self.engine = engine
        self.graph = graph
        self.max_entities = max_entities
        self.facts_per_entity = facts_per_entity

    async def search(self, q: ContextQuery, k: int) -> list[Candidate]:
        since = None if q.hours_back is None else q.as_of - timedelta(hours=q.hours_back)
        async with self.engine.connect() as conn:
            found = (
                await conn.execute(
                    _RECOGNISE,
                    {
                        "names": query_ngrams(q.query),
                        "types": list(NAMED_TYPES),
                        "limit": self.max_entities,
                    },
                )
            ).all()
            if not found:
                return []
            sources = await self._fact_sources(found, q)
            out: list[Candidate] = []
            seen: set[tuple[str, str]] = set()
            if sources:
                by_key = await fetch_active(conn, sources, q.as_of, since)
                for key in sources:
                    r = by_key.get(key)
                    if r is not None and key not in seen:
                        seen.add(key)
                        out.append(Candidate(*key, r.text, r.speaker, r.spoken_at, 0.0))
            mentions = await conn.execute(
                _MENTIONS,
                {"ids": [r.id for r in found], "as_of": q.as_of, "since": since, "k": k},
            )
            for r in mentions:
                key = (r.session_id, r.segment_id)
                if key not in seen:
                    seen.add(key)
                    out.append(Candidate(*key, r.text, r.speaker, r.spoken_at, 0.0))
        out = out[:k]
        for rank, c in enumerate(out):
            c.score = 1.0 / (rank + 1)
        return out

    async def _fact_sources(self, entities: list, q: ContextQuery) -> list[tuple[str, str]]:
        """(session, segment) behind the facts about the entities true at as_of, newest first."""
        graph = self.graph
        if graph is None or not graph.opened:
            return []
        sources: list[tuple[str, str]] = []
        try:
            for entity in entities:
                nodes = await graph.find_entity_nodes(entity.name, entity.type, limit=3)
                for node in nodes:
                    facts = await graph.facts_as_of(
                        q.as_of, entity_uuid=node.uuid, limit=self.facts_per_entity
                    )
                    for fact in facts:
                        sources.extend(s for s in fact.sources if s not in sources)
        except Exception as exc:  # the graph enriches the leg; PostgreSQL mentions remain
            log.warning("graph_leg.graph_failed", error=repr(exc)[:300])
        return sources
