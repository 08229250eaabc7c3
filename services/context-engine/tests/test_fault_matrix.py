"""The fault matrix (issue 11): each dependency of the context engine down at start, dying
mid-work and hanging past its timeouts. The engine keeps serving `/v1/context` from the other
legs (the answer names what is missing), `/health` names the degraded layers, the durable
jobs finish once the dependency is back, and what the stores hold matches the JSONL files.

Real servers behind a fault-injecting TCP proxy (fault_proxy.py) for PostgreSQL, the graph
database and the LLM; the in-process layers (the bundled embedder, the embedded vector
store) fail through test doubles standing in for their call. The audio pipeline is no
dependency of the engine: it only writes the JSONL files the engine reads (its faults are
the audio pipeline's own tests)."""

from __future__ import annotations

import asyncio
import glob
import os
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest
from asgi_lifespan import LifespanManager
from engine_harness import (
    TOKEN,
    Engine,
    eventually,
    ingest,
    query,
    start_engine,
    write_conversation,
)
from fault_proxy import fault_proxy
from httpx import ASGITransport, AsyncClient
from pydantic import SecretStr
from scripted_llm_server import scripted_llm_server

from context_engine.app import create_app
from context_engine.config import Settings
from her_os_shared.jsonl import JsonlReader
from her_os_shared.transcript import TranscriptPayload

pytest_plugins = ["falkordb_harness"]

T0 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
AS_OF = (T0 + timedelta(days=30)).isoformat()
TALK = [
    ("Asha", "The dentist appointment moved to Monday morning."),
    ("Ravi", "I bought fresh basil and tomatoes at the farmers market."),
    ("Asha", "Our flight to Lisbon leaves at six in the evening."),
]
MORE = [
    ("Ravi", "The car needs new tyres before the winter."),
    ("Asha", "Priya is coming for dinner on Saturday."),
]
# Faults must show quickly and recoveries be picked up quickly.
FAST = {
    "health_timeout_s": 0.5,
    "leg_timeout_s": 1.0,
    "migrate_retry_max_s": 0.5,
    "job_retry_base_s": 0.2,
    "job_retry_max_s": 0.5,
    "job_max_attempts": 100,
    "reconcile_interval_s": 0.5,
}


def jsonl_segments(transcripts: Path) -> set[tuple[str, str]]:
    """Every (session, segment) the JSONL files hold: what the stores must match."""
    out = set()
    for path in transcripts.glob("*.jsonl"):
        for rec in JsonlReader(path, TranscriptPayload):
            out |= {(rec.value.session_id, s.segment_id) for s in rec.value.segments}
    return out


async def assert_stores_match_jsonl(engine: Engine, transcripts: Path) -> None:
    """PostgreSQL and the vectors hold exactly the JSONL's segments (waiting for the jobs)."""
    expected = jsonl_segments(transcripts)

    async def matched() -> bool | None:
        rows = await query(engine, "SELECT session_id, segment_id FROM segments")
        vectors = await query(engine, "SELECT session_id, segment_id FROM segment_vectors")
        stored = {(r["session_id"], r["segment_id"]) for r in rows}
        embedded = {(r["session_id"], r["segment_id"]) for r in vectors}
        return True if stored == expected == embedded else None

    await eventually(matched, f"PostgreSQL and the vectors to hold the {len(expected)} segments")
    embedding = engine.runtime.embedding
    assert embedding is not None
    # Segment points only: entities have points of their own (entity_embedding.py).
    assert len(await embedding.store.segment_points(embedding.space)) == len(expected)


async def health(engine: Engine) -> tuple[int, dict[str, Any]]:
    r = await engine.client.get("/health")
    return r.status_code, r.json()


async def until_health(engine: Engine, want: str, layer: str | None = None) -> dict[str, Any]:
    async def check() -> dict[str, Any] | None:
        _, body = await health(engine)
        if body["status"] != want:
            return None
        if layer is not None and layer not in body.get("degraded", []):
            return None
        return body

    return await eventually(check, f"/health {want} {layer or ''}")


async def context(engine: Engine, text: str = "flight to Lisbon") -> dict[str, Any]:
    r = await engine.get("/v1/context", query=text, as_of=AS_OF)
    assert r.status_code == 200, r.text
    return r.json()


async def context_with(
    engine: Engine, text: str, legs: Sequence[str] | None = ("bm25", "vector")
) -> dict[str, Any]:
    """The first answer in which `legs` (None: every leg) all answered. A leg's timeout is
    short here (FAST) so that faults show quickly; on a loaded machine a healthy leg can miss
    it once."""

    async def answered() -> dict[str, Any] | None:
        answer = await context(engine, text)
        wanted = answer["legs"] if legs is None else legs
        return answer if all(answer["legs"][leg] == "ok" for leg in wanted) else None

    return await eventually(answered, f"the {', '.join(legs or ['all'])} legs to answer {text!r}")


async def stage_status(engine: Engine, session_id: str, stage: str) -> str | None:
    rows = await query(
        engine,
        "SELECT status FROM session_stages WHERE session_id = :s AND stage = :g",
        s=session_id,
        g=stage,
    )
    return rows[0]["status"] if rows else None


async def stage_done(engine: Engine, session_id: str, stage: str) -> None:
    async def done() -> bool | None:
        return True if await stage_status(engine, session_id, stage) == "done" else None

    await eventually(done, f"the {stage} stage of {session_id} done", deadline_s=60)


# --- the graph database ----------------------------------------------------------------------


async def test_graph_down_at_start_dying_and_hanging(
    settings: Settings, falkordb_server: str, graph_group: str
) -> None:
    server = urlsplit(falkordb_server)
    async with fault_proxy(host=server.hostname, port=server.port) as proxy:
        proxy.set("down")  # down at start
        url = f"redis://:{server.password}@127.0.0.1:{proxy.port}"
        s = settings.model_copy(update=FAST | {"graph_url": url, "graph_group_id": graph_group})
        write_conversation(s.transcripts_dir, "g1", T0, TALK)
        async for engine in start_engine(s):
            await ingest(engine, "g1")
            await engine.runtime.jobs.scan_idle()  # the session ends: its graph stage runs
            body = await until_health(engine, "degraded", "graph")
            assert "graph" in body["degraded"]
            # The vector leg must hold the session too: with only its keyword hits, another
            # session's vector hit can tie with them in the fusion.
            await stage_done(engine, "g1", "embed")
            answer = await context_with(engine, "flight to Lisbon", legs=None)
            assert answer["results"][0]["segment_id"] == "g1-2"
            assert await stage_status(engine, "g1", "graph") != "done"

            proxy.set("pass")  # the server is back: the graph opens, the stage is retried
            await stage_done(engine, "g1", "graph")
            await until_health(engine, "ok")

            proxy.set("down")  # dies mid-work
            write_conversation(s.transcripts_dir, "g2", T0 + timedelta(days=1), MORE)
            await ingest(engine, "g2")
            await engine.runtime.jobs.scan_idle()
            await until_health(engine, "degraded", "graph")
            await stage_done(engine, "g2", "embed")  # as above: both legs hold g2
            answer = await context_with(engine, "tyres")
            assert answer["results"][0]["segment_id"] == "g2-0"
            proxy.set("pass")
            await stage_done(engine, "g2", "graph")

            proxy.set("hang")  # answers nothing: the graph leg times out, the rest answer

            async def timed_out(engine: Engine = engine) -> tuple[dict[str, Any], float] | None:
                started = asyncio.get_running_loop().time()
                answer = await context(engine, "Priya dinner")
                took = asyncio.get_running_loop().time() - started
                # The fault cut the pooled connection: a query that meets the cut fails fast
                # and the leg answers from PostgreSQL's mentions; the next one reconnects
                # into the hang.
                legs = answer["legs"]
                hung = legs["graph"] == "timeout" and legs["bm25"] == legs["vector"] == "ok"
                return (answer, took) if hung else None

            answer, took = await eventually(timed_out, "the graph leg to time out")
            assert "graph" in answer["degraded"]
            assert answer["results"][0]["segment_id"] == "g2-1"
            assert took < 10  # bounded by the leg timeout
            await until_health(engine, "degraded", "graph")
            proxy.set("pass")
            await until_health(engine, "ok")
            await assert_stores_match_jsonl(engine, s.transcripts_dir)

            # and the graph: one episode per session, no drift between the four stores
            async def no_drift(engine: Engine = engine) -> dict[str, Any] | None:
                report = (await engine.get("/v1/check")).json()
                return report if report["drift_total"] == 0 and not report["pending"] else None

            report = await eventually(no_drift, "the drift check to find nothing")
            assert report["counts"]["graph_episodes"] == report["counts"]["graph_done"] == 2


# --- PostgreSQL ----------------------------------------------------------------------------


def _unix_socket(db_url: str) -> tuple[str, str]:
    """(socket file, database name) of a test database URL on the embedded server."""
    parts = urlsplit(db_url)
    host = unquote(dict(p.split("=", 1) for p in parts.query.split("&"))["host"])
    if not os.path.basename(host).startswith(".s.PGSQL."):  # a directory: its one socket
        (host,) = [p for p in glob.glob(os.path.join(host, ".s.PGSQL.*")) if "lock" not in p]
    return host, parts.path.lstrip("/")


async def test_postgres_dying_mid_work_then_recovering(settings: Settings, db_url: str) -> None:
    socket_file, database = _unix_socket(db_url)
    async with fault_proxy(unix_path=socket_file) as proxy:
        url = f"postgresql+asyncpg://postgres@127.0.0.1:{proxy.port}/{database}"
        s = settings.model_copy(update=FAST | {"database_url": SecretStr(url)})
        write_conversation(s.transcripts_dir, "p1", T0, TALK)
        async for engine in start_engine(s):
            await ingest(engine, "p1")
            await until_health(engine, "ok")

            proxy.set("down")
            # /health answers from a check renewed every health_interval_s: down within it
            await until_health(engine, "unavailable")
            status, _ = await health(engine)
            assert status == 503
            r = await engine.get("/v1/context", query="flight", as_of=AS_OF)
            assert r.status_code == 503, r.text  # a clear refusal, not a crash
            # Speech keeps arriving while the database is down: the file is the record.
            write_conversation(s.transcripts_dir, "p2", T0 + timedelta(days=1), MORE)
            await asyncio.sleep(1.0)  # the watcher sees it and fails to ingest it

            proxy.set("pass")
            await until_health(engine, "ok")
            await assert_stores_match_jsonl(engine, s.transcripts_dir)  # p2 caught up
            answer = await context(engine, "tyres")
            assert answer["results"][0]["segment_id"] == "p2-0"

            proxy.set("hang")
            await until_health(engine, "unavailable")  # each check bounded by health_timeout_s
            status, _ = await health(engine)
            assert status == 503
            proxy.set("pass")
            await until_health(engine, "ok")


async def test_postgres_down_at_start(settings: Settings, db_url: str) -> None:
    socket_file, database = _unix_socket(db_url)
    async with fault_proxy(unix_path=socket_file) as proxy:
        proxy.set("down")
        url = f"postgresql+asyncpg://postgres@127.0.0.1:{proxy.port}/{database}"
        s = settings.model_copy(update=FAST | {"database_url": SecretStr(url)})
        write_conversation(s.transcripts_dir, "p3", T0, TALK)

        app = create_app(s)
        async with (
            LifespanManager(app, startup_timeout=60, shutdown_timeout=60),
            AsyncClient(transport=ASGITransport(app=app), base_url="http://engine") as client,
        ):
            r = await client.get("/health")
            assert r.status_code == 503 and r.json()["status"] == "unavailable"
            proxy.set("pass")  # migrations retry in the background, then everything starts
            await asyncio.wait_for(app.state.runtime.started.wait(), 60)

            async def ingested() -> bool | None:
                rows = await client.get("/v1/stats", headers={"X-Internal-Token": TOKEN})
                return True if rows.json()["segments"]["total"] == len(TALK) else None

            await eventually(ingested, "the backlog ingested once PostgreSQL is up")


# --- the embedder and the vector store (in process: test doubles stand in for the call) ------


class FailingEmbedderDouble:
    """Stands in for the bundled model's call: raises (or hangs) while `fault` is set."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.fault: str | None = "error"
        self.name, self.dim = real.name, real.dim

    async def _maybe_fail(self) -> None:
        if self.fault == "error":
            raise RuntimeError("embedder process died")
        if self.fault == "hang":
            await asyncio.sleep(30)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        await self._maybe_fail()
        return await self.real.embed_passages(texts)

    async def embed_query(self, text: str) -> np.ndarray:
        await self._maybe_fail()
        return await self.real.embed_query(text)

    async def close(self) -> None:
        await self.real.close()


async def test_embedder_failing_and_hanging(settings: Settings) -> None:
    s = settings.model_copy(update=FAST)
    async for engine in start_engine(s):
        observed = engine.runtime.embedding.embedder  # the ObservedEmbedder
        double = FailingEmbedderDouble(observed.inner)
        observed.inner = double
        write_conversation(s.transcripts_dir, "e1", T0, TALK)
        await ingest(engine, "e1")
        await until_health(engine, "degraded", "embedder")  # the embed job failed
        answer = await context(engine, "Lisbon flight evening")
        assert answer["legs"]["vector"] == "error" and answer["legs"]["bm25"] == "ok"
        assert answer["results"][0]["segment_id"] == "e1-2"
        assert await query(engine, "SELECT * FROM segment_vectors") == []

        double.fault = None  # recovered: the retried embed job fills the index
        await assert_stores_match_jsonl(engine, s.transcripts_dir)
        await until_health(engine, "ok")

        double.fault = "hang"
        answer = await context(engine, "a question never asked before")
        assert answer["legs"]["vector"] == "timeout" and answer["legs"]["bm25"] == "ok"
        double.fault = None


async def test_vector_store_failing(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    s = settings.model_copy(update=FAST)
    async for engine in start_engine(s):
        store = engine.runtime.embedding.store
        real_upsert, real_spaces = store.upsert, store.spaces

        async def broken(*args: object, **kwargs: object) -> Any:
            raise OSError("vector store unreachable")

        monkeypatch.setattr(store, "upsert", broken)
        monkeypatch.setattr(store, "search", broken)
        monkeypatch.setattr(store, "spaces", broken)
        write_conversation(s.transcripts_dir, "v1", T0, TALK)
        await ingest(engine, "v1")
        await until_health(engine, "degraded", "vectors")
        answer = await context(engine)
        assert answer["legs"]["vector"] == "error" and answer["legs"]["bm25"] == "ok"
        assert answer["results"][0]["segment_id"] == "v1-2"

        monkeypatch.setattr(store, "upsert", real_upsert)
        monkeypatch.setattr(store, "spaces", real_spaces)
        monkeypatch.undo()
        await assert_stores_match_jsonl(engine, s.transcripts_dir)
        await until_health(engine, "ok")
        assert (await context(engine))["legs"]["vector"] == "ok"

        async def hanging(*args: object, **kwargs: object) -> Any:
            await asyncio.sleep(30)

        monkeypatch.setattr(store, "search", hanging)
        answer = await context(engine, "Lisbon")
        assert answer["legs"]["vector"] == "timeout" and answer["legs"]["bm25"] == "ok"
        assert answer["results"][0]["segment_id"] == "v1-2"


async def test_a_vector_server_down_at_start_degrades_only_the_vector_leg(
    settings: Settings,
) -> None:
    async with fault_proxy(host="127.0.0.1", port=1) as proxy:
        proxy.set("down")
        s = settings.model_copy(
            update=FAST
            | {"vector_backend": "qdrant", "qdrant_url": f"http://127.0.0.1:{proxy.port}"}
        )
        write_conversation(s.transcripts_dir, "q1", T0, TALK)
        async for engine in start_engine(s):
            await ingest(engine, "q1")
            body = await until_health(engine, "degraded", "vectors")
            assert body["status"] == "degraded"
            answer = await context(engine)
            assert answer["legs"]["vector"] == "error" and answer["legs"]["bm25"] == "ok"
            assert answer["results"][0]["segment_id"] == "q1-2"


async def test_an_embedding_server_down_at_start_is_named(settings: Settings) -> None:
    async with fault_proxy(host="127.0.0.1", port=1) as proxy:
        proxy.set("down")
        s = settings.model_copy(
            update=FAST
            | {"embedder": "ollama", "embed_base_url": f"http://127.0.0.1:{proxy.port}",
               "embed_model": "qwen3-embedding:0.6b", "embed_dim": 384}
        )  # fmt: skip
        write_conversation(s.transcripts_dir, "o1", T0, TALK)
        async for engine in start_engine(s):
            await ingest(engine, "o1")
            await until_health(engine, "degraded", "embedder")  # the warm-up call failed
            why = (await engine.get("/v1/stats")).json()["degraded"]["embedder"]
            assert "127.0.0.1" in why or "connect" in why.lower()  # the reason, behind the token
            answer = await context(engine)
            assert answer["legs"]["vector"] == "error" and answer["legs"]["bm25"] == "ok"


# --- the LLM ---------------------------------------------------------------------------------


async def test_llm_down_at_start_dying_and_hanging(settings: Settings) -> None:
    with scripted_llm_server() as llm:
        server = urlsplit(llm.url)
        async with fault_proxy(host=server.hostname, port=server.port) as proxy:
            proxy.set("down")
            url = f"http://127.0.0.1:{proxy.port}/v1"
            s = settings.model_copy(
                update=FAST | {"llm_base_url": url, "llm_model": "scripted", "llm_timeout_s": 1.0}
            )
            write_conversation(s.transcripts_dir, "l1", T0, TALK)
            async for engine in start_engine(s):
                await ingest(engine, "l1")
                await engine.runtime.jobs.scan_idle()
                await until_health(engine, "degraded", "llm")  # the extraction call failed
                # retrieval needs no LLM (a loaded machine can miss FAST's 1 s leg timeout once)
                answer = await context_with(engine, "flight to Lisbon", legs=None)
                assert answer["degraded"] == [] and answer["results"][0]["segment_id"] == "l1-2"

                proxy.set("pass")  # back: the extraction job is retried and succeeds
                await stage_done(engine, "l1", "extract")
                await until_health(engine, "ok")

                proxy.set("hang")  # past llm_timeout_s: a failure, retried later
                write_conversation(s.transcripts_dir, "l2", T0 + timedelta(days=1), MORE)
                await ingest(engine, "l2")
                await engine.runtime.jobs.scan_idle()
                await until_health(engine, "degraded", "llm")
                assert (await context_with(engine, "tyres"))["results"][0]["segment_id"] == "l2-0"
                proxy.set("pass")
                await stage_done(engine, "l2", "extract")
                await assert_stores_match_jsonl(engine, s.transcripts_dir)
