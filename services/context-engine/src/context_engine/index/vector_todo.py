"""What changed since the vectors were written: `vector_todo` (migration 0015's triggers mark a
session when its segments are written or changed, an entity when one of its mentions is or
when its name, type or having current mentions changes — not its tier or salience), so the
minute's upkeep reads what changed, not every segment and every entity's document
(issue 37: at 1M segments and 100k entities those full comparisons were the minute's cost).

A scan trusts the marks only once a full comparison found nothing left in the space it
fills (`caught_up`: after a start, and while a new space is being filled, it compares in full
as before). A run reads the marks with their `changed` number and clears only those not
marked again since (`clear`), so a change made while it ran is kept for the next one."""

from __future__ import annotations

from typing import Literal

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

Kind = Literal["session", "entity"]
SESSION: Kind = "session"
ENTITY: Kind = "entity"

_MARKED = text(
    "SELECT key, changed FROM vector_todo WHERE kind = :kind ORDER BY changed LIMIT :limit"
)
_MARK_OF = text("SELECT changed FROM vector_todo WHERE kind = :kind AND key = :key")
_CLEAR = text(
    """
    DELETE FROM vector_todo v
    USING unnest(CAST(:keys AS text[]), CAST(:seen AS bigint[])) AS s(key, changed)
    WHERE v.kind = :kind AND v.key = s.key AND v.changed <= s.changed
    """
)


async def marked(conn: AsyncConnection, kind: Kind, limit: int) -> dict[str, int]:
    """The oldest marks of `kind`: key → its `changed` number."""
    rows = await conn.execute(_MARKED, {"kind": kind, "limit": limit})
    return {r.key: int(r.changed) for r in rows}


async def mark_of(conn: AsyncConnection, kind: Kind, key: str) -> dict[str, int]:
    """One key's mark ({} when it has none), to clear after a run over it."""
    changed = (await conn.execute(_MARK_OF, {"kind": kind, "key": key})).scalar()
    return {} if changed is None else {key: int(changed)}


async def clear(conn: AsyncConnection, kind: Kind, seen: dict[str, int]) -> None:
    """Clear the marks `seen` unless marked again since."""
    if seen:
        await conn.execute(_CLEAR, {"kind": kind, "keys": list(seen), "seen": list(seen.values())})
