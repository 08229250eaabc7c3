"""A running context engine for tests (real app, real PostgreSQL) and a client for it.
Imported by conftest.py and by tests that start engines of their own."""

from __future__ import annotations

import asyncio
import socket
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import httpx
import pytest
import uvicorn
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from sqlalchemy import text

from context_engine.app import create_app
from context_engine.config import Settings
from context_engine.runtime import Runtime
from her_os_shared.jsonl import append_records
from her_os_shared.transcript import Segment, TranscriptPayload

if TYPE_CHECKING:
    from sqlalchemy.ext.asyncio import AsyncEngine

    from context_engine.graph import KnowledgeGraph

TOKEN = "t" * 32
DEADLINE_S = 30.0
T = TypeVar("T")


@dataclass
class Engine:
    """A running context engine (real app, real PostgreSQL) and a client for it."""

    app: FastAPI
    client: httpx.AsyncClient

    @property
    def runtime(self) -> Runtime:
        return self.app.state.runtime

    async def get(self, path: str, **params: object) -> httpx.Response:
        return await self.client.get(path, params=params, headers={"X-Internal-Token": TOKEN})

    async def post(self, path: str, **params: object) -> httpx.Response:
        return await self.client.post(path, params=params, headers={"X-Internal-Token": TOKEN})


def engine_settings(root: Path, database_url: str, **overrides: Any) -> Settings:
    """An engine's settings with the tests' token and every data folder under `root`."""
    return Settings(
        internal_token=TOKEN,
        database_url=database_url,
        transcripts_dir=root / "transcripts",
        events_dir=root / "events",
        search_index_dir=root / "search-index",
        vector_dir=root / "vectors",
        **overrides,
    )


async def start_engine(settings: Settings) -> AsyncIterator[Engine]:
    app = create_app(settings)
    transport = httpx.ASGITransport(app=app)
    async with (
        LifespanManager(app, startup_timeout=60, shutdown_timeout=60),
        httpx.AsyncClient(transport=transport, base_url="http://engine") as client,
    ):
        await asyncio.wait_for(app.state.runtime.started.wait(), 60)
        yield Engine(app, client)


@dataclass
class ServedEngine:
    """The engine under a real uvicorn server on a free port: for streaming responses (the
    ASGI test transport buffers a response whole, so an endless SSE stream never returns)."""

    app: FastAPI
    base_url: str

    @property
    def runtime(self) -> Runtime:
        return self.app.state.runtime


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def serve_engine(settings: Settings) -> AsyncIterator[ServedEngine]:
    app = create_app(settings)
    port = free_port()
    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_config=None, access_log=False,
        timeout_graceful_shutdown=5,
    )  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(), name="uvicorn")
    try:

        async def up() -> bool | None:
            if task.done():
                task.result()  # raise what stopped it
            runtime = getattr(app.state, "runtime", None)
            return True if server.started and runtime and runtime.started.is_set() else None

        await eventually(up, "the engine to serve")
        yield ServedEngine(app, f"http://127.0.0.1:{port}")
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 60)


async def start_graph_engine(settings: Settings) -> AsyncIterator[Engine]:
    """start_engine, then wait until the engine's knowledge graph is open."""
    async for engine in start_engine(settings):

        async def opened(graph: KnowledgeGraph | None = engine.runtime.graph) -> bool | None:
            return True if graph is not None and graph.opened else None

        await eventually(opened, "the graph to open")
        yield engine


def graph_engine_settings(
    root: Path, database_url: str, graph_url: str, **overrides: Any
) -> Settings:
    """engine_settings for a module-scoped engine with a knowledge graph (its own group):
    quick watching and reconciling, jobs retried at once, no GC freeze."""
    options: dict[str, Any] = {
        "watch_debounce_s": 0.1, "watch_max_delay_s": 0.5, "reconcile_interval_s": 2.0,
        "job_retry_base_s": 0.0, "job_max_attempts": 3, "gc_freeze": False,
        "graph_url": graph_url, "graph_group_id": f"t-{uuid.uuid4().hex[:12]}",
    }  # fmt: skip
    return engine_settings(root, database_url, **{**options, **overrides})


async def stages_done(
    engine: Engine,
    session_id: str,
    stages: tuple[str, ...] = ("extract", "graph", "embed"),
    deadline_s: float = 180,
) -> None:
    """Wait until those stages of the session are done (GET /v1/sessions); fail at once when
    one failed."""

    async def done() -> bool | None:
        r = await engine.get(f"/v1/sessions/{session_id}")
        assert r.status_code == 200, r.text
        found = {s["stage"]: s for s in r.json()["stages"]}
        failed = [s for s in found.values() if s["status"] == "failed"]
        assert not failed, failed
        ok = all(found.get(w, {}).get("status") == "done" for w in stages)
        return True if ok else None

    await eventually(done, f"the stages of {session_id}", deadline_s=deadline_s)


async def ingest(engine: Engine, session_id: str) -> dict[str, Any]:
    """POST /v1/ingest/{session_id}, expecting 200; returns the counts."""
    r = await engine.post(f"/v1/ingest/{session_id}")
    assert r.status_code == 200, r.text
    return r.json()


async def eventually(
    check: Callable[[], Awaitable[T | None]], what: str, deadline_s: float = DEADLINE_S
) -> T:
    """Poll `check` until it returns something other than None (or fail after the deadline)."""
    deadline = asyncio.get_running_loop().time() + deadline_s
    while True:
        found = await check()
        if found is not None:
            return found
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.1)


async def query(engine: Engine, sql: str, **params: object) -> list[dict[str, Any]]:
    """Rows of a SQL query on the engine's main pool, as dicts. Observability events are
    written in batches (chronicler.py): those recorded so far are written first."""
    await engine.runtime.chronicler.flush()
    async with engine.runtime.db.main.connect() as conn:
        return [dict(r._mapping) for r in await conn.execute(text(sql), params)]


def write_conversation(
    transcripts_dir: Path,
    session_id: str,
    started_at: datetime,
    lines: list[tuple[str, str]],
    step_s: float = 5.0,
) -> Path:
    """A session of (speaker, text) lines as one JSONL payload; segment i is
    `{session_id}-{i}`, `step_s` seconds after the previous one."""
    segments = [
        Segment(
            segment_id=f"{session_id}-{i}",
            speaker=speaker,
            text=said,
            start=i * step_s,
            end=i * step_s + step_s * 0.8,
            stt_engine="test",
        )
        for i, (speaker, said) in enumerate(lines)
    ]
    payload = TranscriptPayload(
        session_id=session_id, device_id="dev1", session_started_at=started_at, segments=segments
    )
    return append_records(transcripts_dir, session_id, [payload])


async def insert_session(
    db: AsyncEngine,
    sid: str,
    start: datetime,
    texts: Sequence[str],
    *,
    speaker: str,
    segment_id: str = "{sid}-{i}",
) -> None:
    """A finished session straight into PostgreSQL (no JSONL, no engine): one segment per
    text, 10 s apart, spoken from `start`; segment ids from `segment_id` ({sid}, {i})."""
    async with db.begin() as conn:
        await conn.execute(
            text("INSERT INTO sessions (session_id, device_id, started_at) VALUES (:s, 'd', :t)"),
            {"s": sid, "t": start},
        )
        for i, words in enumerate(texts):
            await conn.execute(
                text(
                    "INSERT INTO segments (session_id, segment_id, speaker, text, start_s, end_s,"
                    " spoken_at, stt_engine, source_offset)"
                    " VALUES (:s, :g, :who, :x, :a, :b, :at, 'test', 0)"
                ),
                {
                    "s": sid,
                    "g": segment_id.format(sid=sid, i=i),
                    "who": speaker,
                    "x": words,
                    "a": i * 10.0,
                    "b": i * 10.0 + 5,
                    "at": start + timedelta(seconds=i * 10),
                },
            )
