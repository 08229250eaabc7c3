"""Entities as the API shows them: the list, and one entity with its mentions and
contradictions (extraction fills the tables: entity_store.py)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from context_engine.models import Entity, EntityContradiction, EntityMention, Segment

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
