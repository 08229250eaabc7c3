"""Chronicler fan-out: live subscribers of `GET /v1/events/stream` while events are emitted
through `POST /v1/events/emit`, on the real engine (uvicorn, `python -m context_engine`,
default chronicler settings: ring 5,000, writes every 0.2 s or 500 events).

20 subscribers (default) connect first, each with `?token=` as a browser's EventSource does,
spread over `--subscriber-procs` child processes (so parsing 20 streams does not starve the
emitter's clock). Once all are connected, events are emitted at `--rate` per second for
`--seconds`, in batches of `--batch` (1,000/s = 50 every 50 ms), each stamped with the wall
clock when its request is sent; requests go out on schedule (a slow one does not hold back
the next). An event is lost for a subscriber if it was emitted while the subscriber was
connected and never reached it; latency is from the event's timestamp to the moment its
chunk was read by the subscriber (same machine, same clock). A subscriber whose stream ends
reconnects with Last-Event-ID, as EventSource does (counted). Engine CPU is the engine
process's user+system time over the emission window (psutil), PostgreSQL's likewise over its
server processes. Afterwards the store is checked: every emitted event written once.
Targets: no loss within the ring's capacity, p99 ≤ 200 ms.

    uv run python bench/events/fanout.py [--subscribers 20 --rate 1000 --seconds 30]
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import re
import sys
import time
import uuid
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import httpx
import psutil
import typer
from rich.table import Table
from sqlalchemy import text

from her_os_shared.creatures import CREATURES, CreatureName

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "context_engine"))
from common import (
    TOKEN,
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
    workdir,
)

TARGET_P99_MS = 200.0
_TOOLS = CREATURES[CreatureName.GRIFFIN]  # as annie-voice would post a tool call
CREATURE = (_TOOLS.name.value, _TOOLS.service.value, _TOOLS.process, _TOOLS.zone.value)
_TS = re.compile(rb'"timestamp":"([^"]+)"')


# --- subscribers (child processes) ------------------------------------------------------


@dataclass
class SubResult:
    connected_at: float = 0.0  # wall time of the stream's first byte
    received: dict[str, float] = field(default_factory=dict)  # event_id -> latency (ms)
    duplicates: int = 0
    dropped_notices: int = 0  # events the engine said this subscriber lost (ring overrun)
    reconnects: int = 0
    catchup: int = 0
    errors: list[str] = field(default_factory=list)


async def _subscribe(base_url: str, result: SubResult, ready: asyncio.Event, stop: Any) -> None:
    last_id: str | None = None
    async with httpx.AsyncClient(base_url=base_url, timeout=httpx.Timeout(30, read=None)) as c:
        while not stop.is_set():
            headers = {"Last-Event-ID": last_id} if last_id else {}
            try:
                async with c.stream(
                    "GET", "/v1/events/stream", params={"token": TOKEN}, headers=headers
                ) as r:
                    if r.status_code != 200:
                        result.errors.append(f"HTTP {r.status_code}")
                        await asyncio.sleep(1)
                        continue
                    buf = b""
                    async for chunk in r.aiter_raw():
                        now = time.time()
                        if not result.connected_at:
                            result.connected_at = now
                            ready.set()
                        buf += chunk
                        *frames, buf = buf.split(b"\n\n")
                        for frame in frames:
                            last_id = _frame(frame, now, result) or last_id
                        if stop.is_set():
                            return
            except httpx.HTTPError as exc:
                result.errors.append(repr(exc)[:200])
            if not stop.is_set():
                result.reconnects += 1
                await asyncio.sleep(0.2)


def _frame(frame: bytes, now: float, result: SubResult) -> str | None:
    event_id = data = None
    kind = b"message"
    for line in frame.split(b"\n"):
        if line.startswith(b"id: "):
            event_id = line[4:].decode()
        elif line.startswith(b"data: "):
            data = line[6:]
        elif line.startswith(b"event: "):
            kind = line[7:]
    if kind == b"dropped" and data is not None:
        result.dropped_notices += int(re.findall(rb"\d+", data)[0])
        return None
    if event_id is None or data is None:
        return None  # a comment (connected, keepalive) or the retry line
    # catch-up: plain messages marked in their JSON (older engines: `event: catchup`)
    if kind == b"catchup" or b'"catchup":true' in data.replace(b" ", b""):
        result.catchup += 1
        return event_id
    if event_id in result.received:
        result.duplicates += 1
        return event_id
    m = _TS.search(data)
    assert m is not None
    sent = datetime.fromisoformat(m.group(1).decode()).timestamp()
    result.received[event_id] = (now - sent) * 1000
    return event_id


def subscriber_process(base_url: str, n: int, ready: Any, stop: Any, out: Any) -> None:
    async def run() -> list[SubResult]:
        results = [SubResult() for _ in range(n)]
        events = [asyncio.Event() for _ in range(n)]
        tasks = [
            asyncio.create_task(_subscribe(base_url, r, e, stop))
            for r, e in zip(results, events, strict=True)
        ]
        await asyncio.gather(*(e.wait() for e in events))
        ready.set()
        await asyncio.to_thread(stop.wait)
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return results

    out.send(asyncio.run(run()))


# --- the emitter --------------------------------------------------------------------------


@dataclass
class Emitted:
    ids: list[tuple[str, float]] = field(default_factory=list)  # (event_id, wall time sent)
    post_ms: list[float] = field(default_factory=list)
    failed: int = 0
    late_ticks: int = 0


def _batch(n: int, seq: int) -> list[dict[str, Any]]:
    creature, service, process, zone = CREATURE
    now = datetime.now(UTC).isoformat()
    return [
        {
            "event_id": uuid.uuid4().hex,
            "timestamp": now,
            "service": service,
            "process": process,
            "creature": creature,
            "zone": zone,
            "event_type": "metric",
            "data": {"seq": seq + i, "bench": "fanout"},
        }
        for i in range(n)
    ]


async def emit(base_url: str, rate: int, seconds: float, batch: int) -> Emitted:
    out = Emitted()
    interval = batch / rate
    ticks = round(seconds / interval)
    inflight: set[asyncio.Task[None]] = set()
    headers = {"X-Internal-Token": TOKEN}
    limits = httpx.Limits(max_connections=16, max_keepalive_connections=16)
    async with httpx.AsyncClient(base_url=base_url, timeout=30, limits=limits) as c:

        async def post(events: list[dict[str, Any]]) -> None:
            sent = time.time()
            t = time.perf_counter()
            try:
                r = await c.post("/v1/events/emit", json={"events": events}, headers=headers)
                ok = r.status_code == 200 and r.json()["accepted"] == len(events)
            except httpx.HTTPError:
                ok = False
            out.post_ms.append((time.perf_counter() - t) * 1000)
            if ok:
                out.ids.extend((e["event_id"], sent) for e in events)
            else:
                out.failed += len(events)

        start = time.perf_counter()
        for k in range(ticks):
            delay = start + k * interval - time.perf_counter()
            if delay > 0:
                await asyncio.sleep(delay)
            elif delay < -interval:
                out.late_ticks += 1
            task = asyncio.create_task(post(_batch(batch, k * batch)))
            inflight.add(task)
            task.add_done_callback(inflight.discard)
        await asyncio.gather(*inflight)
    return out


# --- measurement --------------------------------------------------------------------------


def postgres_cpu_s(pgdata: Path | None) -> float:
    """CPU seconds of this benchmark's PostgreSQL: its postmaster (found by its data
    directory: other servers may run on the machine), its live children, and the children
    it has already reaped."""
    if pgdata is None:
        return float("nan")
    for p in psutil.process_iter(["name", "cmdline"]):
        try:
            name, cmdline = p.info["name"] or "", p.info["cmdline"] or []
            if name.startswith("postgres") and any(str(pgdata) in arg for arg in cmdline):
                t = p.cpu_times()
                return t.children_user + t.children_system + cpu_s([p, *p.children(True)])
        except psutil.Error:
            continue
    return float("nan")


def cpu_s(procs: list[psutil.Process]) -> float:
    total = 0.0
    for p in procs:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:
            continue
    return total


async def stored_count(url: str) -> tuple[int, int]:
    engine = make_engine(url, 1)
    try:
        async with engine.connect() as conn:
            rows = await conn.execute(
                text(
                    "SELECT count(*), count(DISTINCT event_id) FROM observability_events"
                    " WHERE data->>'bench' = 'fanout'"
                )
            )
            total, distinct = rows.one()
            return int(total), int(distinct)
    finally:
        await engine.dispose()


async def _version(url: str) -> str:
    engine = make_engine(url, 1)
    try:
        return await pg_version(engine)
    finally:
        await engine.dispose()


def main(
    subscribers: Annotated[int, typer.Option(help="concurrent SSE subscribers")] = 20,
    rate: Annotated[int, typer.Option(help="events emitted per second")] = 1000,
    seconds: Annotated[float, typer.Option(help="how long events are emitted")] = 30.0,
    batch: Annotated[int, typer.Option(help="events per POST /v1/events/emit")] = 50,
    subscriber_procs: Annotated[
        int, typer.Option(help="child processes the subscribers are spread over")
    ] = 2,
    drain: Annotated[float, typer.Option(help="seconds to wait for the last events")] = 3.0,
    engine_env: Annotated[
        list[str] | None,
        typer.Option(help="KEY=VALUE for the engine's environment (repeatable), e.g. a setting"),
    ] = None,
    database_url: DatabaseUrlOption = None,
    keep: KeepOption = False,
) -> None:
    print_header("chronicler fan-out: SSE subscribers while events are emitted")
    console.print(
        f"{subscribers} subscribers in {subscriber_procs} processes; {rate} events/s for "
        f"{seconds:.0f} s in batches of {batch} (every {batch / rate * 1000:.0f} ms); engine "
        "settings: defaults"
    )
    ctx = mp.get_context("spawn")
    with workdir("heros-bench-events-", keep) as tmp:
        root = Path(tmp)
        with postgres(database_url, root) as pg_info:
            extra = dict(kv.split("=", 1) for kv in engine_env or [])
            engine = EngineProcess(
                pg_info.url, root / "transcripts", root / "events", root / "engine.log", extra
            )
            with engine:
                assert engine.proc is not None
                time.sleep(3)  # the engine's own start-up work (embedder warm-up) settles
                stop = ctx.Event()
                per = [subscribers // subscriber_procs] * subscriber_procs
                for i in range(subscribers % subscriber_procs):
                    per[i] += 1
                children = []
                for n in per:
                    if n == 0:
                        continue
                    ready = ctx.Event()
                    parent, child = ctx.Pipe(duplex=False)
                    p = ctx.Process(
                        target=subscriber_process, args=(engine.base_url, n, ready, stop, child)
                    )
                    p.start()
                    children.append((p, ready, parent))
                with console.status("connecting the subscribers"):
                    for _, ready, _ in children:
                        if not ready.wait(120):
                            raise RuntimeError("subscribers did not connect in time")
                engine_proc = psutil.Process(engine.proc.pid)
                pgdata = pg_info.log_path.parent if pg_info.log_path else None
                # The clients share the machine: their CPU says whether the engine or the
                # machine is the limit.
                clients = [psutil.Process(), *(psutil.Process(p.pid) for p, _, _ in children)]
                cpu0, pg0 = cpu_s([engine_proc]), postgres_cpu_s(pgdata)
                client0 = cpu_s(clients)
                t0 = time.perf_counter()
                with console.status(f"emitting for {seconds:.0f} s"):
                    emitted = asyncio.run(emit(engine.base_url, rate, seconds, batch))
                emit_wall = time.perf_counter() - t0
                cpu1, pg1 = cpu_s([engine_proc]), postgres_cpu_s(pgdata)
                client_cpu = cpu_s(clients) - client0
                time.sleep(drain)
                stop.set()
                results: list[SubResult] = []
                for p, _, parent in children:
                    results.extend(parent.recv())
                    p.join(30)
            stored, distinct = asyncio.run(stored_count(pg_info.url))
            pg = asyncio.run(_version(pg_info.url))
            log_events = engine.log_events()

    cpu = {"engine": cpu1 - cpu0, "PostgreSQL": pg1 - pg0, "clients": client_cpu}
    report(subscribers, emitted, results, emit_wall, cpu, stored, distinct)
    counters = next((e for e in log_events if e.get("event") == "chronicler.stopped"), None)
    if counters:
        keys = ("recorded", "persisted", "persist_dropped", "persist_failures", "subscriber_drops")
        console.print(
            "engine chronicler counters: " + ", ".join(f"{k}={counters[k]}" for k in keys)
        )
    report_log(log_events)
    print_footer(pg)


def report(
    subscribers: int,
    emitted: Emitted,
    results: list[SubResult],
    wall: float,
    cpu: dict[str, float],
    stored: int,
    distinct: int,
) -> None:
    sent = emitted.ids
    table = Table(title="per subscriber")
    columns = ("subscriber", "delivered", "lost", "dup", "dropped*", "reconnects", "p50 ms",
               "p99 ms", "max ms")  # fmt: skip
    for col in columns:
        table.add_column(col, justify="right")
    all_lat: list[float] = []
    lost_total = delivered_total = 0
    worst_p99 = 0.0
    for i, r in enumerate(results):
        expected = [eid for eid, at in sent if at >= r.connected_at]
        lost = sum(1 for eid in expected if eid not in r.received)
        got = [r.received[eid] for eid, _ in sent if eid in r.received]
        all_lat.extend(got)
        lost_total += lost
        delivered_total += len(got)
        p99 = percentile(got, 99)
        worst_p99 = max(worst_p99, p99)
        cells = (i + 1, len(got), lost, r.duplicates, r.dropped_notices, r.reconnects)
        table.add_row(
            *(str(c) for c in cells),
            f"{percentile(got, 50):.1f}",
            f"{p99:.1f}",
            f"{max(got) if got else float('nan'):.1f}",
        )
    console.print(table)
    console.print("* dropped: events the engine told the subscriber it lost (ring overrun)")
    errors = [e for r in results for e in r.errors]
    if errors:
        console.print(f"subscriber errors: {len(errors)}, e.g. {errors[0]}")
    p50, p90, p99 = (percentile(all_lat, q) for q in (50, 90, 99))
    worst = max(all_lat) if all_lat else float("nan")
    rate = len(sent) / wall
    posts = emitted.post_ms
    summary = Table(title="chronicler fan-out", show_header=False)
    summary.add_row(
        "events emitted",
        f"{len(sent)} in {wall:.1f} s ({rate:.0f}/s); {emitted.failed} refused or failed; "
        f"{emitted.late_ticks} ticks late",
    )
    summary.add_row(
        "POST /v1/events/emit",
        f"p50 {percentile(posts, 50):.1f} ms, p99 {percentile(posts, 99):.1f} ms "
        f"({len(posts)} requests)",
    )
    summary.add_row("subscribers", f"{len(results)} of {subscribers} reported")
    summary.add_row("delivered / expected", f"{delivered_total} / {delivered_total + lost_total}")
    summary.add_row("[bold]lost", f"[bold]{lost_total}")
    summary.add_row(
        "[bold]delivery latency",
        f"[bold]p50 {p50:.1f} ms, p90 {p90:.1f} ms, p99 {p99:.1f} ms[/], max {worst:.1f} ms; "
        f"worst subscriber p99 {worst_p99:.1f} ms",
    )
    for who, used in cpu.items():
        where = " (emitter and subscriber processes)" if who == "clients" else ""
        summary.add_row(
            f"{who} CPU", f"{used:.1f} s over {wall:.1f} s = {used / wall:.0%} of a core{where}"
        )
    summary.add_row(
        "stored in PostgreSQL", f"{stored} rows, {distinct} distinct, of {len(sent)} emitted"
    )
    loss = "met" if lost_total == 0 and len(results) == subscribers else "MISSED"
    latency = "met" if p99 <= TARGET_P99_MS else "MISSED"
    summary.add_row("targets", f"no loss: {loss}; p99 ≤ {TARGET_P99_MS:.0f} ms: {latency}")
    console.print(summary)


if __name__ == "__main__":
    typer.run(main)
