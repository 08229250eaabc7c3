"""An entity's profile, the answer to "Who is Priya?": what is true about it at `as_of`, what
changed and when, and where it was talked about.

- `relations`: current facts joining it to a person (spouse, sister, friend, boss...: the
  predicates predicates.py reads as nouns), each with its sources, `since` and `replaced`;
- `facts`: its other current facts (lives in, works at, likes...), the same way;
- `changes`: facts about it that had ended by as_of, newest first, each with the fact that
  ended it ("lives in Pune" ended by "moved to Mumbai" on 3 November);
- `first_mention` / `last_mention`: the first and last segments mentioning it (up to as_of);
- `sessions`: the sessions with the most about it (current mentions), most first;
- `statements` (people): what was said about the person, merged by meaning
  (statement_facts.py): current first, then those that had ended or been kept, with sources.
Facts come from the knowledge graph (none, with `facts_status` "off", when no graph is
configured; "error" when it failed: the rest of the profile still answers). A forgotten fact
(every segment it was said in deleted) is left out, and so are the edges of things said
(questions, feelings, decisions, promises), as in /v1/context.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.extract import predicates
from context_engine.graph.base import Fact
from context_engine.knowledge.entities import find_entity
from context_engine.knowledge.query_facts import facts_with_history, forgotten, knowledge_only
from context_engine.knowledge.statement_facts import statement_facts
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.graph.knowledge import KnowledgeGraph

log = get_logger(__name__)

FACTS_FETCH = 500  # facts read around the entity's nodes, ended ones included

_MENTION_EDGES = text(
    """
    (SELECT 'first' AS which, s.session_id, s.segment_id, s.speaker, s.text, s.spoken_at
     FROM entity_mentions m JOIN segments s
       ON s.session_id = m.session_id AND s.segment_id = m.segment_id
     WHERE m.entity_id = :id AND m.current AND s.replaced_by IS NULL AND s.spoken_at <= :as_of
     ORDER BY s.spoken_at, s.session_id, s.segment_id LIMIT 1)
    UNION ALL
    (SELECT 'last', s.session_id, s.segment_id, s.speaker, s.text, s.spoken_at
     FROM entity_mentions m JOIN segments s
       ON s.session_id = m.session_id AND s.segment_id = m.segment_id
     WHERE m.entity_id = :id AND m.current AND s.replaced_by IS NULL AND s.spoken_at <= :as_of
     ORDER BY s.spoken_at DESC, s.session_id DESC, s.segment_id DESC LIMIT 1)
    """
)
_TOP_SESSIONS = text(
    """
    SELECT m.session_id, count(*) AS mentions, min(s.spoken_at) AS first_at,
           max(s.spoken_at) AS last_at
    FROM entity_mentions m JOIN segments s
      ON s.session_id = m.session_id AND s.segment_id = m.segment_id
    WHERE m.entity_id = :id AND m.current AND s.replaced_by IS NULL AND s.spoken_at <= :as_of
    GROUP BY m.session_id ORDER BY mentions DESC, last_at DESC, m.session_id LIMIT :limit
    """
)


def is_relation(fact: Fact | dict[str, Any]) -> bool:
    """A fact joining two people (its predicate reads as a noun: "X's sister is Y")."""
    name = fact.predicate if isinstance(fact, Fact) else fact["predicate"]
    known = predicates.spec(str(name))
    return known is not None and known.noun


async def _mentions(
    engine: AsyncEngine, entity_id: int, as_of: datetime, sessions: int
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    async with engine.connect() as conn:
        edges = {
            r.which: {
                "session_id": r.session_id,
                "segment_id": r.segment_id,
                "speaker": r.speaker,
                "text": r.text,
                "spoken_at": r.spoken_at,
            }
            for r in await conn.execute(_MENTION_EDGES, {"id": entity_id, "as_of": as_of})
        }
        top = [
            {"session_id": r.session_id, "mentions": r.mentions, "first_at": r.first_at,
             "last_at": r.last_at}
            for r in await conn.execute(
                _TOP_SESSIONS, {"id": entity_id, "as_of": as_of, "limit": sessions}
            )
        ]  # fmt: skip
    return edges, top


async def _facts(
    engine: AsyncEngine, graph: KnowledgeGraph, entity: dict[str, Any], as_of: datetime
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(current facts as /v1/context shows them, ended facts with what ended them)."""
    nodes = await graph.find_entity_nodes(entity["name"], entity["type"], limit=5)
    if not nodes:
        nodes = await graph.find_entity_nodes(entity["name"], limit=5)
    if not nodes:
        return [], []
    facts = knowledge_only(
        await graph.facts_as_of(
            as_of, entity_uuids=[n.uuid for n in nodes], limit=FACTS_FETCH, history=True
        )
    )
    current, ended = await facts_with_history(engine, facts, as_of)
    changes = []
    for fact, item in ended:
        if forgotten(item):
            continue
        item["current"] = False
        item["ended_by"] = fact.ended_by
        changes.append(item)
    changes.sort(key=lambda f: f["invalid_at"] or f["valid_at"] or as_of, reverse=True)
    return current, changes


async def entity_profile(
    engine: AsyncEngine,
    graph: KnowledgeGraph | None,
    entity_id: int,
    as_of: datetime,
    *,
    sessions: int = 5,
) -> dict[str, Any] | None:
    """The profile of one entity (module docstring); None when there is no such entity."""
    async with engine.connect() as conn:
        entity = await find_entity(conn, entity_id)
    if entity is None:
        return None
    edges, top = await _mentions(engine, entity_id, as_of, sessions)
    current: list[dict[str, Any]] = []
    changes: list[dict[str, Any]] = []
    status = "off"
    if graph is not None and graph.opened:
        try:
            current, changes = await _facts(engine, graph, entity, as_of)
            status = "ok"
        except Exception as exc:  # the graph enriches the profile; PostgreSQL still answers
            log.warning("profile.graph_failed", entity_id=entity_id, error=repr(exc)[:300])
            status = "error"
    said = (
        await statement_facts(engine, as_of, subjects=[entity["name"]], history=True)
        if entity["type"] == "person"
        else []
    )
    said.sort(key=lambda f: not f["current"])  # current first, each part newest first
    return {
        "entity": entity,
        "statements": said,
        "as_of": as_of,
        "relations": [f for f in current if is_relation(f)],
        "facts": [f for f in current if not is_relation(f)],
        "changes": changes,
        "first_mention": edges.get("first"),
        "last_mention": edges.get("last"),
        "sessions": top,
        "facts_status": status,
    }
