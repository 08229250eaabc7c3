"""Entities as the API lists them (extraction fills the table from issue 5 on)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from context_engine.models import Entity


async def list_entities(
    conn: AsyncConnection, *, entity_type: str | None, limit: int, offset: int
) -> tuple[list[dict[str, Any]], int]:
    t = Entity.__table__
    where = [] if entity_type is None else [t.c.type == entity_type]
    total = (await conn.execute(select(func.count()).select_from(t).where(*where))).scalar()
    rows = await conn.execute(
        select(t).where(*where).order_by(t.c.last_seen.desc(), t.c.id).limit(limit).offset(offset)
    )
    items = [
        {
            "id": r.id,
            "type": r.type,
            "name": r.name,
            "confidence": r.confidence,
            "properties": r.properties,
            "first_seen": r.first_seen,
            "last_seen": r.last_seen,
            "episode_count": r.episode_count,
        }
        for r in rows
    ]
    return items, int(total or 0)
