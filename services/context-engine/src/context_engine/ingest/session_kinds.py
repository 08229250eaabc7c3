"""The kinds of session the engine writes itself, told apart by id prefix and device: the daily
reflection (`reflection-YYYY-MM-DD`, device `her-os-reflection`; memory/daily.py writes it,
ingestion and the stages must know it to refuse or skip it)."""

from __future__ import annotations

from datetime import date

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

REFLECTION_PREFIX = "reflection-"
REFLECTION_DEVICE = "her-os-reflection"
# SQL that leaves the reflections out of a query over sessions aliased `s`.
NOT_REFLECTION_SQL = (
    f"NOT (s.device_id = '{REFLECTION_DEVICE}' AND s.session_id LIKE '{REFLECTION_PREFIX}%')"
)


def reflection_session_id(day: date) -> str:
    return f"{REFLECTION_PREFIX}{day.isoformat()}"


def is_reflection(session_id: str, device_id: str) -> bool:
    """A session this module wrote: both its id prefix and its device say so (a user's own
    session that happens to be called "reflection-…" is not one)."""
    return session_id.startswith(REFLECTION_PREFIX) and device_id == REFLECTION_DEVICE


async def is_reflection_session(conn: AsyncConnection, session_id: str) -> bool:
    if not session_id.startswith(REFLECTION_PREFIX):
        return False
    device = (
        await conn.execute(
            text("SELECT device_id FROM sessions WHERE session_id = :sid"), {"sid": session_id}
        )
    ).scalar()
    return device is not None and is_reflection(session_id, device)
