"""The graph leg of retrieval (squid): entities named in the query → the facts about them
in the knowledge graph and the segments behind those facts and mentions.

1. Recognition (knowledge/names.py): the query's word n-grams (1–4 words, case-folded) looked
   up among the entities' canonical names (an index lookup, no scan); the names of people, places,
   organisations, events and topics only — a question's "what" is not an entity. Each
   recognised entity weighs by how specific it is: log(sessions / sessions mentioning it),
   so the owner's own name (in every session) counts for little and a rare place for much.
2. Facts: the graph's facts true at `as_of` on either side of the entities' nodes (one query
   for all of them, at most `facts_per_entity` each on average); each fact's source segments.
3. Mentions: the segments where the entities were mentioned (up to as_of).
A segment scores the weights of the recognised entities it mentions plus those of the facts it
is a source of: segments that join several of the query's entities come first, then the
newest. Everything is bounded by `as_of`, the `hours_back` window and `k`. Without a graph
(none configured, or it failed for this query) the leg still answers from the mentions in
PostgreSQL, and says so in the log.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.knowledge.names import query_ngrams, recognise
from context_engine.search.query import Candidate, ContextQuery, fetch_active
from her_os_shared.creatures import CreatureName
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.graph.knowledge import KnowledgeGraph

log = get_logger(__name__)

# Mentioned segments scored by the summed weights of the entities they mention.
_MENTIONS = text(
    """
    SELECT s.session_id, s.segment_id, s.text, s.speaker, s.spoken_at,
           sum(w.weight) AS score
    FROM unnest(CAST(:ids AS bigint[]), CAST(:weights AS float8[])) AS w(id, weight)
    JOIN entity_mentions m ON m.entity_id = w.id AND m.current
    JOIN segments s ON s.session_id = m.session_id AND s.segment_id = m.segment_id
    WHERE s.replaced_by IS NULL AND s.spoken_at <= :as_of
      AND (CAST(:since AS timestamptz) IS NULL OR s.spoken_at >= CAST(:since AS timestamptz))
    GROUP BY s.session_id, s.segment_id, s.text, s.speaker, s.spoken_at
    ORDER BY score DESC, s.spoken_at DESC, s.session_id, s.segment_id
    LIMIT :k
    """
)


class GraphLeg:
    name = "graph"
    creature = CreatureName.SQUID

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
            found = await recognise(conn, query_ngrams(q.query), self.max_entities)
            if not found:
                return []
            weights = {r.id: float(r.weight) for r in found}
            scores: dict[tuple[str, str], float] = {}
            rows: dict[tuple[str, str], Any] = {}
            mentions = await conn.execute(
                _MENTIONS,
                {
                    "ids": list(weights),
                    "weights": list(weights.values()),
                    "as_of": q.as_of,
                    "since": since,
                    "k": k,
                },
            )
            for r in mentions:
                key = (r.session_id, r.segment_id)
                scores[key], rows[key] = float(r.score), r
            fact_scores = await self._fact_sources(found, weights, q)
            if fact_scores:
                by_key = await fetch_active(conn, list(fact_scores), q.as_of, since)
                for key, score in fact_scores.items():
                    if key in by_key:
                        rows.setdefault(key, by_key[key])
                        scores[key] = scores.get(key, 0.0) + score
        ranked = sorted(scores, key=lambda key: (-scores[key], -rows[key].spoken_at.timestamp()))
        top = max(scores.values(), default=1.0)
        return [
            Candidate(*key, rows[key].text, rows[key].speaker, rows[key].spoken_at,
                      scores[key] / top)
            for key in ranked[:k]
        ]  # fmt: skip

    async def _fact_sources(
        self, entities: list[Any], weights: dict[int, float], q: ContextQuery
    ) -> dict[tuple[str, str], float]:
        """(session, segment) behind the facts about the entities true at as_of, each with
        the weights of the recognised entities the fact joins."""
        graph = self.graph
        if graph is None or not graph.opened:
            return {}
        out: dict[tuple[str, str], float] = {}
        try:
            found = await asyncio.gather(
                *(graph.find_entity_nodes(e.name, e.type, limit=3) for e in entities)
            )
            weight_of = {
                node.uuid: weights[e.id] for e, nodes in zip(entities, found, strict=True)
                for node in nodes
            }  # fmt: skip
            if not weight_of:
                return {}
            # Restatements are not collapsed: each one's sources are wanted, and collapsing
            # would fetch ten times the rows.
            facts = await graph.facts_as_of(
                q.as_of,
                entity_uuids=list(weight_of),
                limit=self.facts_per_entity * len(entities),
                collapse=False,
            )
            for fact in facts:
                score = weight_of.get(fact.subject_uuid, 0.0) + weight_of.get(fact.object_uuid, 0.0)
                for key in fact.sources:
                    out[key] = max(out.get(key, 0.0), score)
        except Exception as exc:  # the graph enriches the leg; PostgreSQL mentions remain
            log.warning("graph_leg.graph_failed", error=repr(exc)[:300])
        return out
