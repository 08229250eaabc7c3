"""Counts for `/v1/stats`: what the engine holds and how its jobs are doing."""

from __future__ import annotations

from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncConnection

_COUNTS = text(
    """
    SELECT
      (SELECT count(*) FROM sessions) AS sessions,
      (SELECT count(*) FROM sessions WHERE ended_at IS NULL) AS sessions_open,
      (SELECT count(*) FROM segments) AS segments_total,
      (SELECT count(*) FROM segments WHERE replaced_by IS NOT NULL) AS segments_replaced,
      (SELECT count(*) FROM segments WHERE pinned) AS segments_pinned,
      (SELECT count(*) FROM entities) AS entities,
      (SELECT count(*) FROM entity_mentions) AS entity_mentions,
      (SELECT count(*) FROM ingest_offsets) AS files,
      (SELECT coalesce(sum("offset"), 0) FROM ingest_offsets) AS bytes_ingested,
      (SELECT max(updated_at) FROM ingest_offsets) AS last_ingest_at,
      (SELECT count(*) FROM session_stages WHERE status = 'failed') AS stages_failed
    """
)


async def engine_stats(conn: AsyncConnection) -> dict[str, Any]:
    r = (await conn.execute(_COUNTS)).one()
    return {
        "sessions": {
            "total": r.sessions,
            "open": r.sessions_open,
            "ended": r.sessions - r.sessions_open,
        },
        "segments": {
            "total": r.segments_total,
            "active": r.segments_total - r.segments_replaced,
            "replaced": r.segments_replaced,
            "pinned": r.segments_pinned,
        },
        "entities": r.entities,
        "entity_mentions": r.entity_mentions,
        "ingest": {
            "files": r.files,
            "bytes_ingested": int(r.bytes_ingested),
            "last_ingest_at": r.last_ingest_at,
        },
        "stages_failed": r.stages_failed,
    }
