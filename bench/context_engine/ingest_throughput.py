"""Ingest throughput: synthetic transcript JSONL → PostgreSQL through the engine's Ingestor.

Writes N segments as JSONL files (one per session, lines of 5–20 segments, the production
encoder), applies the migrations to a fresh database, then times `Ingestor.ingest_file` over
every file, with the engine's own wiring (Runtime: event recorder, job queue callback, keyword
index) and `ingest_concurrency` files at a time, as the watcher does on a backlog. Target: ≥ 2,000
segments/s.

    uv run python bench/context_engine/ingest_throughput.py [--segments 100000]
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated

import typer
from common import (
    TOKEN,
    DatabaseUrlOption,
    KeepOption,
    collect_logs,
    console,
    migrate,
    pg_version,
    postgres,
    print_footer,
    print_header,
    report_log,
    workdir,
    write_session_files,
)
from corpus import PayloadFactory, spread_sessions
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table
from sqlalchemy import text

from context_engine.config import Settings
from context_engine.ingest.transcripts import IngestResult
from context_engine.runtime import Runtime

TARGET = 2000.0


def write_corpus(
    directory: Path, segments: int, sessions: int, seed: int, locomo: Path | None
) -> tuple[list[Path], int, int]:
    """Write the JSONL files; returns (paths, lines, bytes)."""
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    plans = spread_sessions(
        segments, sessions, now - timedelta(days=30), timedelta(days=29), "ingest", seed
    )
    return write_session_files(directory, plans, PayloadFactory(seed, locomo))


async def ingest_all(
    settings: Settings, paths: list[Path], concurrency: int
) -> tuple[float, list[IngestResult], str, int, int]:
    runtime = Runtime(settings)
    await runtime.jobs.open()  # the ingestor's on_session callback defers jobs
    await runtime.chronicler.start()  # the ingestor's events are written in batches
    if runtime.search_index is not None:  # each commit is applied to the keyword index too
        await runtime.search_index.open()
        await asyncio.wait_for(runtime.search_index.wait_ready(), 60)
    try:
        pg = await pg_version(runtime.db.main)
        sem = asyncio.Semaphore(concurrency)
        results: list[IngestResult] = []
        with Progress(
            "ingesting", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        ) as progress:
            task = progress.add_task("", total=len(paths))

            async def one(path: Path) -> None:
                async with sem:
                    results.append(await runtime.ingestor.ingest_file(path))
                progress.advance(task)

            t0 = time.perf_counter()
            await asyncio.gather(*(one(p) for p in paths))
            elapsed = time.perf_counter() - t0
        async with runtime.db.main.connect() as conn:
            stored = (await conn.execute(text("SELECT count(*) FROM segments"))).scalar_one()
            size = (
                await conn.execute(text("SELECT pg_total_relation_size('segments')"))
            ).scalar_one()
        return elapsed, results, pg, int(stored), int(size)
    finally:
        if runtime.search_index is not None:
            await runtime.search_index.close()
        await runtime.chronicler.stop()
        await runtime.jobs.close()
        await runtime.db.dispose()


def main(
    segments: Annotated[int, typer.Option(help="segments to write and ingest")] = 100_000,
    sessions: Annotated[int, typer.Option(help="session files they are spread over")] = 100,
    concurrency: Annotated[
        int, typer.Option(help="files ingested at once (engine default: ingest_concurrency)")
    ] = Settings.model_fields["ingest_concurrency"].default,
    batch_segments: Annotated[
        int, typer.Option(help="segments per transaction (engine default)")
    ] = Settings.model_fields["ingest_batch_segments"].default,
    seed: Annotated[int, typer.Option(help="random seed of the synthetic text")] = 42,
    locomo: Annotated[
        Path | None,
        typer.Option(help="use real LoCoMo turns (e.g. ../shared/data/locomo) as the text"),
    ] = None,
    database_url: DatabaseUrlOption = None,
    keep: KeepOption = False,
) -> None:
    print_header("context engine: ingest throughput")
    if locomo is not None and not locomo.exists():
        console.print(f"[red]--locomo {locomo} does not exist (see ../shared/data/README.md)")
        raise typer.Exit(2)
    with workdir("heros-bench-ingest-", keep) as tmp:
        root = Path(tmp)
        transcripts = root / "transcripts"
        t = time.perf_counter()
        paths, lines, size = write_corpus(transcripts, segments, sessions, seed, locomo)
        console.print(
            f"wrote {segments:,} segments in {lines:,} lines, {len(paths)} files, "
            f"{size / 1e6:.1f} MB ({time.perf_counter() - t:.1f} s, not timed below)"
        )
        with postgres(database_url, root) as pg_info:
            console.print(f"migrations: {migrate(pg_info.url):.2f} s")
            settings = Settings(
                internal_token=TOKEN,
                database_url=pg_info.url,
                transcripts_dir=transcripts,
                events_dir=root / "events",
                search_index_dir=root / "search-index",
                vector_dir=root / "vectors",
                ingest_batch_segments=batch_segments,
            )
            logs = collect_logs()
            elapsed, results, pg, stored, table_bytes = asyncio.run(
                ingest_all(settings, paths, concurrency)
            )

    ingested = sum(r.segments for r in results)
    statuses = sorted({r.status for r in results})
    rate = ingested / elapsed
    table = Table(title="ingest throughput")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_row("segments ingested", f"{ingested:,} (in the table: {stored:,})")
    table.add_row("lines / files", f"{sum(r.lines for r in results):,} / {len(results)}")
    table.add_row("file statuses", ", ".join(statuses))
    table.add_row("elapsed", f"{elapsed:.2f} s")
    table.add_row("[bold]segments/s", f"[bold]{rate:,.0f}")
    table.add_row("lines/s", f"{sum(r.lines for r in results) / elapsed:,.0f}")
    table.add_row("JSONL MB/s", f"{size / 1e6 / elapsed:.2f}")
    table.add_row("segments table + indexes", f"{table_bytes / 1e6:.0f} MB")
    table.add_row("concurrency / batch", f"{concurrency} files / {batch_segments} segments")
    table.add_row("text", f"LoCoMo turns from {locomo}" if locomo else f"synthetic, seed {seed}")
    table.add_row("target", f"≥ {TARGET:,.0f} segments/s: {'met' if rate >= TARGET else 'MISSED'}")
    console.print(table)
    report_log(logs.events, "log of the ingestion")
    print_footer(pg)
    if stored != segments or ingested != segments:
        console.print(f"[red]expected {segments:,} segments, ingested {ingested:,}")
        raise typer.Exit(1)


if __name__ == "__main__":
    typer.run(main)
