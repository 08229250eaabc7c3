"""Migration 0011 (ADR 0021): events stored under the registry before it are renamed to
today's creatures; events of today's registry are left alone."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine

from context_engine.store.migrate import downgrade, upgrade
from her_os_shared.creatures import CREATURES, CreatureName

T = datetime(2026, 5, 1, 10, tzinfo=UTC)
_INSERT = text(
    "INSERT INTO observability_events (event_id, timestamp, service, process, creature, zone,"
    " event_type, data) VALUES (:id, :t, :service, :process, :creature, :zone, 'metric',"
    " CAST(:data AS JSONB))"
)

# Stored rows as the old registry wrote them: (creature, service, process, zone, data).
OLD = {
    "a": ("kraken", "context-engine", "graph_search", "thinking", {}),
    "b": ("crab", "audio-pipeline", "wearable_ingest", "listening", {}),
    "c": ("leviathan", "context-engine", "extraction_llm", "thinking",
          {"model": "openai-compatible(qwen3:32b)"}),
    "d": ("otter", "annie-voice", "tools", "acting", {"tool": "web_search"}),
    "e": ("mermaid", "annie-voice", "voice_session", "acting",
          {"voice": True, "stage": "transcript"}),
    "f": ("basilisk", "context-engine", "auth_gate", "acting", {}),
}  # fmt: skip
NOW = {
    "a": CreatureName.SQUID,
    "b": CreatureName.JELLYFISH,
    "c": CreatureName.FAIRY,
    "d": CreatureName.CHIMERA,
    "e": CreatureName.SERPENT,
    "f": CreatureName.BASILISK,
    "g": CreatureName.KRAKEN,  # stored under today's registry already
}


async def test_old_events_are_renamed_and_new_ones_kept(db_url: str) -> None:
    await asyncio.to_thread(downgrade, db_url, "base")
    await asyncio.to_thread(upgrade, db_url, "0010")
    engine = create_async_engine(db_url)
    kraken = CREATURES[CreatureName.KRAKEN]
    rows = {**OLD, "g": (kraken.name.value, kraken.service.value, kraken.process,
                         kraken.zone.value, {})}  # fmt: skip
    try:
        async with engine.begin() as conn:
            for i, (creature, service, process, zone, data) in rows.items():
                await conn.execute(
                    _INSERT,
                    {"id": i * 32, "t": T, "service": service, "process": process,
                     "creature": creature, "zone": zone, "data": json.dumps(data)},
                )  # fmt: skip
        await asyncio.to_thread(upgrade, db_url, "0011")
        async with engine.connect() as conn:
            got = {
                r.event_id[0]: r
                for r in await conn.execute(text("SELECT * FROM observability_events"))
            }
        for key, name in NOW.items():
            c = CREATURES[name]
            r = got[key]
            assert (r.creature, r.service, r.process, r.zone) == (
                c.name,
                c.service,
                c.process,
                c.zone,
            ), key
            assert r.data == rows[key][4]
    finally:
        await engine.dispose()
