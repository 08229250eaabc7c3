"""Entities as the API shows them: the list, and one entity with its mentions and
contradictions (extraction fills the tables: entity_store.py)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from context_engine.store.models import Entity, EntityContradiction, EntityMention, Segment
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.index.entity_vectors import EntityEmbedding

log = get_logger(__name__)


class EntitySearchUnavailable(RuntimeError):
    """Entity vectors cannot be searched now (no vector index, not open, embedder failed)."""


_FIELDS = (
    "id", "type", "name", "confidence", "properties", "sensitivity", "first_seen", "last_seen",
    "episode_count", "contradicted_at", "tier", "salience", "low_salience", "contradicted",
    "tier_changed_at", "community_id",
)  # fmt: skip


def _entity(row: Any) -> dict[str, Any]:
    return {f: getattr(row, f) for f in _FIELDS}


async def list_entities(
    conn: AsyncConnection,
    *,
    entity_type: str | None,
    limit: int,
    offset: int,
    query: str | None = None,
    include_history: bool = False,
    contradicted: bool | None = None,
    tier: str | None = None,
) -> tuple[list[dict[str, Any]], int]:
    """Most recently seen first. Entities only older extractor versions mentioned
    (episode_count 0) are history: listed only with `include_history`."""
    t = Entity.__table__
    where = []
    if entity_type is not None:
        where.append(t.c.type == entity_type)
    if query:
        escaped = query.casefold().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        where.append(t.c.canonical_name.like(f"%{escaped}%", escape="\\"))
    if not include_history:
        where.append(t.c.episode_count > 0)
    if contradicted is not None:
        where.append(
            t.c.contradicted_at.is_not(None) if contradicted else t.c.contradicted_at.is_(None)
        )
    if tier is not None:
        where.append(t.c.tier == tier)
    total = (await conn.execute(select(func.count()).select_from(t).where(*where))).scalar()
    rows = await conn.execute(
        select(t).where(*where).order_by(t.c.last_seen.desc(), t.c.id).limit(limit).offset(offset)
    )
    return [_entity(r) for r in rows], int(total or 0)


async def entities_by_id(conn: AsyncConnection, ids: list[int]) -> dict[int, dict[str, Any]]:
    """These entities' own fields, as the list shows them (missing ids left out)."""
    t = Entity.__table__
    rows = await conn.execute(select(t).where(t.c.id.in_(ids))) if ids else []
    return {int(r.id): _entity(r) for r in rows}


async def nearest_entities(
    vectors: EntityEmbedding | None,
    query: str,
    limit: int,
    *,
    types: Sequence[str] | None = None,
    tiers: Sequence[str] | None = None,
) -> list[dict[str, Any]]:
    """The entities whose vectors are nearest the query, best first, each with its `score`."""
    if vectors is None:
        raise EntitySearchUnavailable(
            "entity search needs the vector index: set CONTEXT_ENGINE_VECTOR_INDEX_ENABLED=true"
        )
    if not vectors.opened:
        raise EntitySearchUnavailable("the vector index is not open yet")
    try:
        vector = await vectors.segments.embedder.embed_query(query)
        hits = await vectors.search(vector, limit, types=types, tiers=tiers)
    except Exception as exc:  # a failing layer answers 503, never a traceback
        log.warning("entities.search_failed", error=repr(exc)[:300])
        raise EntitySearchUnavailable(f"entity search failed: {type(exc).__name__}") from exc
    async with vectors.engine.connect() as conn:
        found = await entities_by_id(conn, [h.entity_id for h in hits])
    return [{**found[h.entity_id], "score": h.score} for h in hits if h.entity_id in found]


async def find_entity(conn: AsyncConnection, entity_id: int) -> dict[str, Any] | None:
    """One entity's own fields, as the list shows them."""
    t = Entity.__table__
    row = (await conn.execute(select(t).where(t.c.id == entity_id))).one_or_none()
    return None if row is None else _entity(row)


async def get_entity(
    conn: AsyncConnection, entity_id: int, *, mentions_limit: int = 50
) -> dict[str, Any] | None:
    """One entity, its current mentions (newest first, with the segment text), its
    mention history count, and the facts about it that were contradicted."""
    m, s = EntityMention.__table__, Segment.__table__
    out = await find_entity(conn, entity_id)
    if out is None:
        return None
    mentions = await conn.execute(
        select(
            m.c.session_id,
            m.c.segment_id,
            m.c.name,
            m.c.evidence,
            m.c.confidence,
            m.c.properties,
            m.c.sensitivity,
            m.c.extractor,
            m.c.extractor_version,
            m.c.created_at,
            s.c.text.label("segment_text"),
            s.c.speaker,
            s.c.spoken_at,
        )
        .outerjoin(s, (s.c.session_id == m.c.session_id) & (s.c.segment_id == m.c.segment_id))
        .where(m.c.entity_id == entity_id, m.c.current)
        .order_by(s.c.spoken_at.desc().nulls_last(), m.c.id.desc())
        .limit(mentions_limit)
    )
    history = (
        await conn.execute(
            select(func.count()).select_from(m).where(m.c.entity_id == entity_id, ~m.c.current)
        )
    ).scalar()
    c = EntityContradiction.__table__
    contradictions = await conn.execute(
        select(c).where(c.c.entity_id == entity_id).order_by(c.c.invalid_at.desc())
    )
    out["mentions"] = [dict(r._mapping) for r in mentions]
    out["history_mentions"] = int(history or 0)
    out["contradictions"] = [
        {
            "fact_uuid": r.fact_uuid,
            "fact": r.fact,
            "predicate": r.predicate,
            "invalid_at": r.invalid_at,
            "invalidated_by": r.invalidated_by,
            "session_id": r.session_id,
            "detected_at": r.detected_at,
        }
        for r in contradictions
    ]
    return out
