"""What the graph routes answer: a PostgreSQL entity's graph neighbourhood, facts as of a
time, graphiti search — each fact with the segments it was said in (read from PostgreSQL)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any

from sqlalchemy import select, tuple_
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.graph.base import Fact, GraphNode
from context_engine.knowledge.entities import find_entity
from context_engine.store.models import Segment

if TYPE_CHECKING:
    from context_engine.graph.knowledge import KnowledgeGraph


def node_out(node: GraphNode) -> dict[str, Any]:
    return {
        "uuid": node.uuid,
        "name": node.name,
        "labels": node.labels,
        "summary": node.summary,
        "attributes": {"type": node.type, **node.attributes},
        "created_at": node.created_at,
    }


async def with_sources(engine: AsyncEngine, facts: list[Fact]) -> list[dict[str, Any]]:
    """Facts as the API shows them, each with the segments (session, id, speaker, text,
    time) it was said in; a segment since deleted is listed without its text."""
    wanted = {pair for f in facts for pair in f.sources}
    found: dict[tuple[str, str], Any] = {}
    if wanted:
        s = Segment.__table__
        async with engine.connect() as conn:
            rows = await conn.execute(
                select(s.c.session_id, s.c.segment_id, s.c.speaker, s.c.text, s.c.spoken_at).where(
                    tuple_(s.c.session_id, s.c.segment_id).in_(sorted(wanted))
                )
            )
            found = {(r.session_id, r.segment_id): r for r in rows}
    out = []
    for f in facts:
        sources = []
        for sid, gid in f.sources:
            r = found.get((sid, gid))
            sources.append(
                {"session_id": sid, "segment_id": gid, "speaker": r.speaker if r else None,
                 "text": r.text if r else None, "spoken_at": r.spoken_at if r else None}
            )  # fmt: skip
        out.append(
            {
                "uuid": f.uuid,
                "subject": f.subject,
                "subject_uuid": f.subject_uuid,
                "predicate": f.predicate,
                "object": f.object,
                "object_uuid": f.object_uuid,
                "fact": f.fact,
                "valid_at": f.valid_at,
                "invalid_at": f.invalid_at,
                "created_at": f.created_at,
                "expired_at": f.expired_at,
                "episodes": f.episodes,
                "attributes": f.attributes,
                "sources": sources,
            }
        )
    return out


def _newest_first(fact: Fact) -> float:
    when = fact.valid_at or fact.created_at
    return -when.timestamp() if when and when.tzinfo else 0.0


async def entity_graph(
    engine: AsyncEngine, graph: KnowledgeGraph, entity_id: int, *, depth: int, limit: int
) -> dict[str, Any] | None:
    """The entity's graph nodes (by name and type; nodes graphiti's LLM path made carry no
    type, so those are matched by name alone), their neighbours and every fact around them."""
    async with engine.connect() as conn:
        entity = await find_entity(conn, entity_id)
    if entity is None:
        return None
    nodes = await graph.find_entity_nodes(entity["name"], entity["type"])
    if not nodes:
        nodes = await graph.find_entity_nodes(entity["name"])
    neighbours: dict[str, GraphNode] = {}
    facts: dict[str, Fact] = {}
    for node in nodes:
        around = await graph.neighbourhood(node.uuid, depth=depth, limit=limit)
        if around is None:
            continue
        for n in around.neighbours:
            neighbours.setdefault(n.uuid, n)
        for f in around.facts:
            facts.setdefault(f.uuid, f)
    own = {n.uuid for n in nodes}
    ordered = sorted(facts.values(), key=_newest_first)
    return {
        "entity": entity,
        "nodes": [node_out(n) for n in nodes],
        "neighbours": [node_out(n) for u, n in neighbours.items() if u not in own],
        "facts": await with_sources(engine, ordered),
    }


async def facts_as_of(
    engine: AsyncEngine,
    graph: KnowledgeGraph,
    as_of: datetime,
    *,
    subject: str | None,
    limit: int,
    history: bool = False,
) -> list[dict[str, Any]]:
    facts = await graph.facts_as_of(as_of, subject, limit=limit, history=history)
    out = await with_sources(engine, facts)
    if history:
        for item, fact in zip(out, facts, strict=True):
            item["current"] = fact.invalid_at is None or fact.invalid_at > as_of
            item["ended_by"] = fact.ended_by if not item["current"] else None
    return out


async def search(
    engine: AsyncEngine, graph: KnowledgeGraph, query: str, *, limit: int, as_of: datetime | None
) -> list[dict[str, Any]]:
    return await with_sources(engine, await graph.search(query, limit, as_of))
