"""Time to searchable: from an append to a transcript file to the segment being returned by
`GET /v1/context`, through the real engine (uvicorn, watcher, ingestor, BM25) on its default
settings (watch_debounce_s=1.0, watch_max_delay_s=3.0).

Appends go through the production writer (`her_os_shared.jsonl.append_records`) to ~10
session files, each file every ~2 s, staggered so that an append happens every 0.2 s. Each
append carries a unique nonsense token; the segment is polled for (query = the token) every
~20 ms until it comes back. Latency is measured from just before `append_records` is called
(its fsyncs included) to the response that holds the segment. Target: p95 ≤ 1.5 s.

    uv run python bench/context_engine/time_to_searchable.py [--appends 200]
"""

from __future__ import annotations

import asyncio
import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Literal

import httpx
import typer
from common import (
    DatabaseUrlOption,
    EngineProcess,
    KeepOption,
    console,
    make_engine,
    percentile,
    pg_version,
    postgres,
    print_footer,
    print_header,
    report_log,
    unique_token,
    workdir,
)
from corpus import TextGenerator
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table
from sqlalchemy import text

from context_engine.config import Settings
from her_os_shared.creatures import CreatureName
from her_os_shared.jsonl import append_records
from her_os_shared.transcript import Segment, TranscriptPayload

TARGET_P95_S = 1.5
POLL_TIMEOUT_S = 30.0


@dataclass
class Append:
    index: int
    session_id: str
    segment_id: str
    token: str
    wall: datetime  # when append_records was called (UTC)
    t0: float  # perf_counter at the same moment
    written: float = 0.0  # perf_counter when append_records returned
    found: float | None = None  # perf_counter of the first response holding the segment
    polls: int = 0


class Writer:
    """Builds and appends one payload per call; a session's segments follow each other."""

    def __init__(self, directory: Path, sessions: list[str], started_at: datetime, seed: int):
        self.directory = directory
        self.started_at = started_at
        self.text = TextGenerator(seed)
        self.rng = random.Random(seed)
        self.counters = dict.fromkeys(sessions, 0)

    def payload(self, session_id: str, token: str) -> tuple[TranscriptPayload, str]:
        """1–4 segments spoken over the last few seconds; one of them holds the token."""
        n = self.rng.randint(1, 4)
        marked = self.rng.randrange(n)
        now_s = (datetime.now(UTC) - self.started_at).total_seconds()
        t = now_s - 1.0 - 2.0 * n  # spoken just before the append, never in the future
        segs = []
        for j in range(n):
            self.counters[session_id] += 1
            text = self.text.segment_text()
            if j == marked:
                text = f"{text} Remember the code word {token}."
            segs.append(
                Segment(
                    segment_id=f"s{self.counters[session_id]:06d}",
                    speaker=f"SPEAKER_0{j % 2}",
                    text=text,
                    start=round(t, 3),
                    end=round(t + 1.8, 3),
                    language="en",
                    stt_engine="whisper-large-v3",
                )
            )
            t += 2.0
        payload = TranscriptPayload(
            session_id=session_id,
            device_id="bench-device",
            session_started_at=self.started_at,
            segments=segs,
        )
        return payload, segs[marked].segment_id

    def append(self, session_id: str, payload: TranscriptPayload) -> None:
        append_records(self.directory, session_id, [payload])


async def poll_one(client: httpx.AsyncClient, a: Append, interval_s: float) -> None:
    deadline = a.t0 + POLL_TIMEOUT_S
    while time.perf_counter() < deadline:
        tick = time.perf_counter()
        r = await client.get("/v1/context", params={"query": a.token, "limit": 5})
        a.polls += 1
        if r.status_code == 200 and any(
            x["segment_id"] == a.segment_id and x["source_session"] == a.session_id
            for x in r.json()["results"]
        ):
            a.found = time.perf_counter()
            return
        await asyncio.sleep(max(0.0, interval_s - (time.perf_counter() - tick)))


async def poll_batched(
    client: httpx.AsyncClient, pending: dict[str, Append], interval_s: float, done: asyncio.Event
) -> int:
    """One query per tick for every pending token (`tok1 or tok2 ...`), limit 50."""
    requests = 0
    while not (done.is_set() and not pending):
        tick = time.perf_counter()
        waiting = list(pending.values())
        for i in range(0, len(waiting), 40):
            chunk = waiting[i : i + 40]
            query = " or ".join(a.token for a in chunk)
            r = await client.get("/v1/context", params={"query": query, "limit": 50})
            requests += 1
            got = time.perf_counter()
            if r.status_code != 200:
                continue
            hits = {(x["source_session"], x["segment_id"]) for x in r.json()["results"]}
            for a in chunk:
                a.polls += 1
                if (a.session_id, a.segment_id) in hits:
                    a.found = got
                    pending.pop(a.token, None)
        for a in list(pending.values()):
            if time.perf_counter() > a.t0 + POLL_TIMEOUT_S:
                pending.pop(a.token, None)
        await asyncio.sleep(max(0.0, interval_s - (time.perf_counter() - tick)))
    return requests


async def run(
    engine: EngineProcess,
    writer: Writer,
    sessions: list[str],
    appends: int,
    period_s: float,
    poll_s: float,
    mode: Literal["each", "batched"],
) -> tuple[list[Append], int, float]:
    limits = httpx.Limits(max_connections=64, max_keepalive_connections=64)
    async with httpx.AsyncClient(
        base_url=engine.base_url, headers=engine.headers, limits=limits, timeout=30
    ) as client:
        # Warm-up (not measured): one append per session, waited for until searchable.
        warm = []
        for sid in sessions:
            token = unique_token()
            payload, seg = writer.payload(sid, token)
            a = Append(-1, sid, seg, token, datetime.now(UTC), time.perf_counter())
            await asyncio.to_thread(writer.append, sid, payload)
            warm.append(a)
        with console.status("warm-up: one append per session"):
            await asyncio.gather(*(poll_one(client, a, poll_s) for a in warm))
        if any(a.found is None for a in warm):
            raise RuntimeError("warm-up appends never became searchable")

        step = period_s / len(sessions)
        results: list[Append] = []
        pollers: list[asyncio.Task[None]] = []
        pending: dict[str, Append] = {}
        done = asyncio.Event()
        batch_task = (
            asyncio.create_task(poll_batched(client, pending, poll_s, done))
            if mode == "batched"
            else None
        )
        start = time.perf_counter()
        with Progress(
            "appending", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(), console=console
        ) as progress:
            task = progress.add_task("", total=appends)
            for i in range(appends):
                await asyncio.sleep(max(0.0, start + i * step - time.perf_counter()))
                sid = sessions[i % len(sessions)]
                token = unique_token()
                payload, seg = writer.payload(sid, token)
                a = Append(i, sid, seg, token, datetime.now(UTC), time.perf_counter())
                await asyncio.to_thread(writer.append, sid, payload)
                a.written = time.perf_counter()
                results.append(a)
                if batch_task is None:
                    pollers.append(asyncio.create_task(poll_one(client, a, poll_s)))
                else:
                    pending[token] = a
                progress.advance(task)
        with console.status("waiting for the last appends"):
            done.set()
            await asyncio.gather(*pollers)
            requests = await batch_task if batch_task is not None else sum(a.polls for a in results)
        return results, requests, time.perf_counter() - start


async def ingest_timeline(url: str, results: list[Append]) -> list[tuple[float, float] | None]:
    """For each append: (append → ingestion start, ingestion duration) in s, from the engine's
    own ingestion start/complete events (the ingest-pipeline creature, recorded in
    observability_events)."""
    engine = make_engine(url, 1)
    try:
        async with engine.connect() as conn:
            rows = (
                await conn.execute(
                    text(
                        """
                        SELECT session_id, event_type, timestamp FROM observability_events
                        WHERE creature = :creature AND event_type IN ('start', 'complete')
                        ORDER BY timestamp
                        """
                    ),
                    {"creature": CreatureName.OUROBOROS.value},
                )
            ).all()
    finally:
        await engine.dispose()
    by_session: dict[str, list[tuple[str, datetime]]] = {}
    for sid, kind, ts in rows:
        by_session.setdefault(sid, []).append((kind, ts))
    out: list[tuple[float, float] | None] = []
    for a in results:
        events = by_session.get(a.session_id, [])
        start = next((ts for kind, ts in events if kind == "start" and ts >= a.wall), None)
        end = next(
            (ts for kind, ts in events if kind == "complete" and start and ts >= start), None
        )
        if start is None or end is None:
            out.append(None)
        else:
            out.append(((start - a.wall).total_seconds(), (end - start).total_seconds()))
    return out


def main(
    appends: Annotated[int, typer.Option(help="measured appends")] = 200,
    sessions: Annotated[int, typer.Option(help="session files appended to in turn")] = 10,
    period: Annotated[float, typer.Option(help="seconds between two appends to one file")] = 2.0,
    poll_interval: Annotated[float, typer.Option(help="seconds between two polls")] = 0.02,
    poll: Annotated[
        str,
        typer.Option(
            help="each: one poller per append (query = its token); batched: one query per "
            "tick for all pending tokens (less load on the engine)"
        ),
    ] = "each",
    seed: Annotated[int, typer.Option(help="random seed of the synthetic text")] = 42,
    database_url: DatabaseUrlOption = None,
    keep: KeepOption = False,
) -> None:
    if poll not in ("each", "batched"):
        raise typer.BadParameter("--poll must be 'each' or 'batched'")
    print_header("context engine: time to searchable")
    defaults = Settings.model_fields
    console.print(
        f"engine settings: defaults (watch_debounce_s={defaults['watch_debounce_s'].default}, "
        f"watch_max_delay_s={defaults['watch_max_delay_s'].default}, "
        f"ingest_concurrency={defaults['ingest_concurrency'].default})"
    )
    with workdir("heros-bench-tts-", keep) as tmp:
        root = Path(tmp)
        with postgres(database_url, root) as pg_info:
            engine = EngineProcess(
                pg_info.url, root / "transcripts", root / "events", root / "engine.log"
            )
            now = datetime.now(UTC)
            session_ids = [f"tts-{now:%H%M%S}-{i:02d}" for i in range(sessions)]
            writer = Writer(root / "transcripts", session_ids, now - timedelta(minutes=5), seed)
            with engine:
                results, requests, elapsed = asyncio.run(
                    run(engine, writer, session_ids, appends, period, poll_interval, poll)  # type: ignore[arg-type]
                )
            timeline = asyncio.run(ingest_timeline(pg_info.url, results))
            pg = asyncio.run(_version(pg_info.url))
            log_events = engine.log_events()

    found = [a for a in results if a.found is not None]
    lat = [a.found - a.t0 for a in found]  # type: ignore[operator]
    writes = [a.written - a.t0 for a in results]
    waits = [t[0] for t in timeline if t is not None]
    ingests = [t[1] for t in timeline if t is not None]
    table = Table(title="append → searchable (s)")
    for col in ("figure", "p50", "p95", "max", "mean"):
        table.add_column(col, justify="right" if col != "figure" else "left")

    def row(name: str, xs: list[float], bold: bool = False) -> None:
        fmt = "[bold]{:.3f}" if bold else "{:.3f}"
        table.add_row(
            name,
            fmt.format(percentile(xs, 50)),
            fmt.format(percentile(xs, 95)),
            fmt.format(max(xs) if xs else float("nan")),
            fmt.format(sum(xs) / len(xs) if xs else float("nan")),
        )

    row("append → searchable", lat, bold=True)
    row("  append_records (write + fsync)", writes)
    row("  append → ingestion starts (debounce)", waits)
    row("  ingestion (ouroboros start → complete)", ingests)
    console.print(table)
    p95 = percentile(lat, 95)
    summary = Table(show_header=False)
    missing = len(results) - len(found)
    verdict = "met" if p95 <= TARGET_P95_S else "MISSED"
    summary.add_row(
        "appends measured",
        f"{len(results)} ({len(found)} found, {missing} not found in {POLL_TIMEOUT_S:.0f} s)",
    )
    summary.add_row("sessions / period", f"{sessions} files, each every {period} s")
    summary.add_row(
        "polling",
        f"{poll}, every {poll_interval * 1000:.0f} ms; "
        f"{requests} requests, {requests / elapsed:.0f} req/s",
    )
    summary.add_row("target", f"p95 ≤ {TARGET_P95_S} s: {verdict} (p95 {p95:.3f} s)")
    console.print(summary)
    report_log(log_events)
    print_footer(pg)
    if len(found) != len(results):
        raise typer.Exit(1)


async def _version(url: str) -> str:
    engine = make_engine(url, 1)
    try:
        return await pg_version(engine)
    finally:
        await engine.dispose()


if __name__ == "__main__":
    typer.run(main)
