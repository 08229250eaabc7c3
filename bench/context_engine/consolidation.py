"""The nightly consolidation at scale: N entities (default 100,000) in a fresh database,
then the engine's own Consolidator (communities, then tiers and salience in batches) timed,
with the process's peak memory.

The synthetic memory: entities in clusters of 20 (people, places, habits, promises, …) whose
members are mentioned together in the segments of their cluster's sessions (5 mentions per
entity, `--mentions`), with first/last seen times spread over the past year, episode counts of
1–20 and 2 % recently contradicted — so Louvain has real communities to find and every tier
rule fires. Written by SQL (generate_series), not through extraction: this measures the
consolidation, not the extractor. No graph store (the FalkorDB copy of the communities is
measured by its own count of written nodes, not here).

Run 1 is a first night (most entities change tier); run 2 the next night with nothing new
(idempotent: no changes, no history rows).

    uv run python bench/context_engine/consolidation.py [--entities 100000]
"""

from __future__ import annotations

import asyncio
import resource
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from common import (
    DatabaseUrlOption,
    KeepOption,
    console,
    make_engine,
    migrate,
    pg_version,
    postgres,
    print_footer,
    print_header,
    workdir,
)
from rich.table import Table
from sqlalchemy import text

from context_engine.config import Settings
from context_engine.memory.consolidate import Consolidator, run_now

CLUSTER = 20
SESSIONS_PER_CLUSTER = 4
SEGMENTS_PER_SESSION = 10
NOW = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
TYPES = ["person", "place", "habit", "emotion", "promise", "event", "organization", "decision"]

_NOW = "(SELECT CAST(:now AS timestamptz) AS now) c"
_SQL = [
    # sessions and segments: SESSIONS_PER_CLUSTER sessions per cluster
    f"""
    INSERT INTO sessions (session_id, device_id, started_at, last_spoken_at, ended_at,
                          segments_count)
    SELECT 's' || g, 'bench', d, d, d, :segs
    FROM generate_series(0, :sessions - 1) g, {_NOW},
         LATERAL (SELECT c.now - (g % 365) * interval '1 day' AS d) x
    """,
    f"""
    INSERT INTO segments (session_id, segment_id, speaker, text, start_s, end_s, spoken_at,
                          stt_engine, source_offset)
    SELECT 's' || g, 's' || g || '-' || i, 'Asha', 'we talked about it again', i * 5.0,
           i * 5.0 + 4.0, c.now - (g % 365) * interval '1 day' + i * interval '5 seconds',
           'bench', 0
    FROM generate_series(0, :sessions - 1) g, generate_series(0, :segs - 1) i, {_NOW}
    """,
    # entities: cluster c = id / CLUSTER
    f"""
    INSERT INTO entities (type, name, canonical_name, confidence, first_seen, last_seen,
                          episode_count, contradicted_at)
    SELECT (CAST(:types AS text[]))[1 + (g % cardinality(CAST(:types AS text[])))],
           'entity ' || g, 'entity ' || g, 0.8,
           c.now - (1 + (g * 7919) % 365) * interval '1 day',
           c.now - ((g * 7919) % 365 / (1 + g % 4)) * interval '1 day',
           1 + (g * 31) % 20,
           CASE WHEN g % 50 = 0 THEN c.now - (g % 40) * interval '1 day' END
    FROM generate_series(0, :entities - 1) g, {_NOW}
    """,
    # mentions: each entity in :mentions segments of its cluster's sessions
    """
    INSERT INTO entity_mentions (entity_id, session_id, segment_id, name, evidence,
                                 confidence, extractor, extractor_version, current)
    SELECT e.id, 's' || s, 's' || s || '-' || ((e.id * 13 + m * 7) % :segs), e.name, e.name,
           0.8, 'bench', 1, true
    FROM entities e, generate_series(0, :mentions - 1) m,
         LATERAL (SELECT ((e.id - 1) / :cluster) * :spc + ((e.id + m) % :spc) AS s) x
    """,
    "VACUUM ANALYZE",
]


def _rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


async def _main(entities: int, mentions: int, batch: int, url: str) -> None:
    engine = make_engine(url)
    sessions = (entities + CLUSTER - 1) // CLUSTER * SESSIONS_PER_CLUSTER
    params = {
        "now": NOW, "sessions": sessions, "segs": SEGMENTS_PER_SESSION, "entities": entities,
        "types": TYPES, "mentions": mentions, "cluster": CLUSTER, "spc": SESSIONS_PER_CLUSTER,
    }  # fmt: skip
    t = time.perf_counter()
    with console.status(f"writing {entities:,} entities, {entities * mentions:,} mentions"):
        async with engine.connect() as conn:
            conn = await conn.execution_options(isolation_level="AUTOCOMMIT")
            for sql in _SQL:
                stmt = text(sql)
                used = {k: v for k, v in params.items() if k in stmt.compile().params}
                await conn.execute(stmt, used)
    segments = sessions * SEGMENTS_PER_SESSION
    console.print(
        f"synthetic memory written in {time.perf_counter() - t:.1f} s "
        f"({sessions:,} sessions, {segments:,} segments)"
    )

    settings = Settings(database_url=url, consolidation_batch=batch)
    consolidator = Consolidator(engine, settings)
    rss_before = _rss_mib()
    table = Table(title=f"consolidation of {entities:,} entities (batch {batch:,})")
    for col in ("run", "seconds", "entities/s", "promoted", "demoted", "low salience",
                "communities", "peak RSS MiB"):  # fmt: skip
        table.add_column(col, justify="right")
    for label in ("first night", "next night (no change)"):
        t = time.perf_counter()
        run = await run_now(engine, consolidator, as_of=NOW)
        seconds = time.perf_counter() - t
        table.add_row(
            label, f"{seconds:.1f}", f"{run['processed'] / seconds:,.0f}", f"{run['promoted']:,}",
            f"{run['demoted']:,}", f"{run['low_salience']:,}", f"{run['communities']:,}",
            f"{_rss_mib():.0f}",
        )  # fmt: skip
    async with engine.connect() as conn:
        tiers = dict(
            (await conn.execute(text("SELECT tier, count(*) FROM entities GROUP BY tier"))).all()
        )
        history = (await conn.execute(text("SELECT count(*) FROM entity_tier_history"))).scalar()
    console.print(table)
    console.print(f"tiers after: {tiers}; history rows: {history:,}; "
                  f"RSS before the runs {rss_before:.0f} MiB")  # fmt: skip
    print_footer(await pg_version(engine))
    await engine.dispose()


def main(
    entities: Annotated[int, typer.Option(help="entities to consolidate")] = 100_000,
    mentions: Annotated[int, typer.Option(help="mentions per entity")] = 5,
    batch: Annotated[int, typer.Option(help="consolidation_batch")] = 1000,
    database_url: DatabaseUrlOption = None,
    keep: KeepOption = False,
) -> None:
    print_header("Nightly consolidation (communities, tiers, salience)")
    with workdir("her-os-consolidation-", keep) as tmp, postgres(database_url, Path(tmp)) as pg:
        migrate(pg.url)
        asyncio.run(_main(entities, mentions, batch, pg.url))


if __name__ == "__main__":
    typer.run(main)
