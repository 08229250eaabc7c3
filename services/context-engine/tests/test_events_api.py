"""The chronicler's API end to end on the real engine and a real PostgreSQL:
`POST /v1/events/emit`, `GET /v1/events`, CORS for the dashboard, and the live stream
`GET /v1/events/stream` read over a real socket (uvicorn), token in the query included."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from engine_harness import (
    TOKEN,
    Engine,
    ServedEngine,
    eventually,
    free_port,
    query,
    serve_engine,
)

from context_engine.config import Settings
from her_os_shared.creatures import CREATURES
from her_os_shared.events import ObservabilityEvent

T0 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
AUTH = {"X-Internal-Token": TOKEN}


def event(i: int, creature: str = "chimera", **kw: Any) -> dict[str, Any]:
    """An event as annie-voice would post it (the contract's JSON)."""
    e = ObservabilityEvent.for_creature(
        creature, kw.pop("event_type", "metric"), data={"i": i},
        timestamp=kw.pop("timestamp", T0 + timedelta(seconds=i)), **kw,
    )  # fmt: skip
    return e.model_dump(mode="json")


async def emit(client: httpx.AsyncClient, events: list[Any], **headers: str) -> httpx.Response:
    return await client.post("/v1/events/emit", json={"events": events}, headers=AUTH | headers)


# --- POST /v1/events/emit ---


async def test_emit_validates_each_event_on_its_own(engine: Engine) -> None:
    good = [event(1), event(2, "mermaid", event_type="start", session_id="call-1")]
    wrong_zone = event(3) | {"zone": "listening"}
    unknown = event(4) | {"creature": "yeti"}
    missing = {k: v for k, v in event(5).items() if k != "event_type"}
    r = await emit(engine.client, [good[0], wrong_zone, unknown, "not an event", missing, good[1]])
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["accepted"], body["rejected"], body["total"]) == (2, 4, 6)
    errors = {x["index"]: x["error"] for x in body["errors"]}
    assert set(errors) == {1, 2, 3, 4}
    assert "zone listening does not match creature 'chimera', which is acting" in errors[1]
    assert "unknown creature 'yeti'" in errors[2]
    assert "must be a JSON object" in errors[3]
    assert "event_type: Field required" in errors[4]

    # Another service's events keep their service and creature.
    page = (await engine.get("/v1/events", creature="mermaid")).json()
    (mermaid,) = page["events"]
    assert (mermaid["service"], mermaid["process"], mermaid["zone"]) == (
        "annie-voice", "chat-session", "thinking",
    )  # fmt: skip
    assert mermaid["session_id"] == "call-1" and mermaid["event_id"] == good[1]["event_id"]


async def test_emit_refuses_a_malformed_body_and_accepts_a_retry_once(engine: Engine) -> None:
    for body in ({"event": []}, "events", 7, {"events": {"a": 1}}):
        r = await engine.client.post("/v1/events/emit", json=body, headers=AUTH)
        assert r.status_code == 422, body
    too_many = await emit(engine.client, [event(i) for i in range(1001)])
    assert too_many.status_code == 422
    bare = await engine.client.post(
        "/v1/events/emit", json=[event(i) for i in range(1001)], headers=AUTH
    )
    assert bare.status_code == 422
    nul = await emit(engine.client, [event(1) | {"reasoning": "a\x00b"}])
    assert nul.json()["accepted"] == 0 and "NUL" in nul.json()["errors"][0]["error"]

    same = event(7)
    for _ in range(2):  # a client retrying the same batch
        r = await emit(engine.client, [same])
        assert r.json() == {"accepted": 1, "rejected": 0, "total": 1, "errors": []}
    page = (await engine.get("/v1/events", since="2000-01-01T00:00:00Z")).json()
    assert page["source"] == "buffer"  # the ring holds all history yet
    assert [e["event_id"] for e in page["events"]] == [same["event_id"]]
    assert engine.runtime.chronicler.counters.duplicates == 1
    stored = await query(engine, "SELECT event_id FROM observability_events")
    assert stored == [{"event_id": same["event_id"]}]


# --- the design's requests (docs/api.md; the design's §6 "Context Engine"), verbatim ---

DESIGN_UUID = "550e8400-e29b-41d4-a716-446655440000"
# The design's emit example, byte for byte (skipped while the registry lacks the design's
# serpent; the bare array and UUID ids are also checked on their own below).
DESIGN_EMIT = """[
  {"creature": "serpent", "event_type": "complete", "service": "annie-voice",
   "process": "whisper-stt-annie", "zone": "acting",
   "data": {"duration_ms": 450}, "reasoning": "STT completed"}
]"""


@pytest.mark.skipif("serpent" not in CREATURES, reason="the design's creature names")
async def test_the_design_emit_example_verbatim(engine: Engine) -> None:
    headers = AUTH | {"Content-Type": "application/json"}
    r = await engine.client.post("/v1/events/emit", content=DESIGN_EMIT, headers=headers)
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 1, "rejected": 0, "total": 1, "errors": []}


async def test_emit_takes_a_bare_array_and_uuid_event_ids(engine: Engine) -> None:
    e = event(1, "serpent") | {"event_id": DESIGN_UUID}
    r = await engine.client.post("/v1/events/emit", json=[e], headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json() == {"accepted": 1, "rejected": 0, "total": 1, "errors": []}
    # Kept as 32 lowercase hex digits: the same event in our form or in capitals is a retry.
    (stored,) = (await engine.get("/v1/events", creature="serpent")).json()["events"]
    assert stored["event_id"] == DESIGN_UUID.replace("-", "")
    same = [e | {"event_id": DESIGN_UUID.replace("-", "")}, e | {"event_id": DESIGN_UUID.upper()}]
    assert (await emit(engine.client, same)).json()["accepted"] == 2
    assert engine.runtime.chronicler.counters.duplicates == 2
    await engine.runtime.chronicler.flush()
    rows = await query(engine, "SELECT event_id FROM observability_events")
    assert rows == [{"event_id": DESIGN_UUID.replace("-", "")}]
    # Not a UUID: refused, naming the field.
    bad = ["550e8400-e29b-41d4-a716", "g" * 32, DESIGN_UUID + "\n", "{" + DESIGN_UUID + "}"]
    r = await engine.client.post(
        "/v1/events/emit", json=[e | {"event_id": b} for b in bad], headers=AUTH
    )
    assert (r.json()["accepted"], r.json()["rejected"]) == (0, 4)
    assert all(x["error"].startswith("event_id: ") for x in r.json()["errors"])


async def test_the_time_machine_as_the_design_asks_for_it(engine: Engine) -> None:
    await emit(engine.client, [event(i, "kraken" if i % 2 else "serpent") for i in range(40)])
    start, end = T0 + timedelta(seconds=30), T0 + timedelta(seconds=34)
    iso = "%Y-%m-%dT%H:%M:%SZ"
    url = f"/v1/events?start={start.strftime(iso)}&end={end.strftime(iso)}&source=db"
    db = (await engine.client.get(url, headers=AUTH)).json()
    assert db["source"] == "db" and db["total"] == 4 == len(db["events"])
    assert [e["data"]["i"] for e in db["events"]] == [33, 32, 31, 30]
    # `start`/`end` are `since`/`until`; recent enough for the ring, it answers by default.
    ours = (await engine.get("/v1/events", since=start.isoformat(), until=end.isoformat())).json()
    assert ours["source"] == "buffer" and ours["events"] == db["events"]
    # source=buffer: the ring alone, what it holds (the last 30 of 40 here), even when older
    # events match; source=db: all of them.
    held = (await engine.get("/v1/events", start=T0.isoformat(), source="buffer")).json()
    assert held["source"] == "buffer" and held["total"] == 30
    every = (await engine.get("/v1/events", start=T0.isoformat(), source="db")).json()
    assert every["source"] == "db" and every["total"] == 40
    # The design's recent-events query: `total` counts the events of the answer.
    krakens = (await engine.client.get("/v1/events?creature=kraken&limit=50", headers=AUTH)).json()
    assert krakens["total"] == 20 == len(krakens["events"]) and krakens["source"] == "db"
    page = (await engine.get("/v1/events", creature="kraken", limit=5)).json()
    assert page["total"] == 5 and page["next_offset"] == 5
    # One parameter under two names with two values: which one was meant? A 422, not a guess.
    for params, where in (
        ({"since": start.isoformat(), "start": end.isoformat()}, "start"),
        ({"until": start.isoformat(), "end": end.isoformat()}, "end"),
        ({"source": "ring"}, "source"),
    ):
        r = await engine.get("/v1/events", **params)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", where], params
    same = await engine.get("/v1/events", since=start.isoformat(), start=start.isoformat())
    assert same.status_code == 200


# --- GET /v1/events ---


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """A small ring, so tests can run past it; the keepalive short enough to see."""
    return settings.model_copy(update={"events_ring_size": 30, "events_keepalive_s": 0.2})


async def test_recent_events_come_from_the_ring_and_older_ones_from_postgresql(
    engine: Engine,
) -> None:
    events = [event(i, "chimera" if i % 2 else "seahorse") for i in range(40)]
    assert (await emit(engine.client, events)).json()["accepted"] == 40
    # Only the last 30 are in memory.
    assert len(engine.runtime.chronicler.ring) == 30

    recent = (await engine.get("/v1/events", limit=5)).json()
    assert recent["source"] == "buffer"
    assert [e["data"]["i"] for e in recent["events"]] == [39, 38, 37, 36, 35]
    assert recent["limit"] == 5 and recent["offset"] == 0 and recent["next_offset"] == 5
    assert set(recent["events"][0]) == {
        "schema_version", "event_id", "timestamp", "service", "process", "creature", "zone",
        "event_type", "session_id", "data", "reasoning",
    }  # fmt: skip

    # Filters, and paging through them.
    otters = (await engine.get("/v1/events", creature="chimera", limit=4, offset=4)).json()
    assert otters["source"] == "buffer"
    assert [e["data"]["i"] for e in otters["events"]] == [31, 29, 27, 25]

    # A range that starts before what the ring holds: PostgreSQL, complete.
    since = T0 + timedelta(seconds=2)
    until = T0 + timedelta(seconds=12)
    ranged = (
        await engine.get("/v1/events", since=since.isoformat(), until=until.isoformat(), limit=4)
    ).json()
    assert ranged["source"] == "db" and ranged["next_offset"] == 4
    assert [e["data"]["i"] for e in ranged["events"]] == [11, 10, 9, 8]
    rest = (
        await engine.get(
            "/v1/events", since=since.isoformat(), until=until.isoformat(), limit=4, offset=8
        )
    ).json()
    assert [e["data"]["i"] for e in rest["events"]] == [3, 2] and rest["next_offset"] is None
    both = (
        await engine.get(
            "/v1/events", creature="seahorse,chimera", service="audio-pipeline",
            event_type="metric", since="2026-03-01T12:00:00", limit=1000,
        )
    ).json()  # fmt: skip
    assert both["source"] == "db"  # naive since = UTC, before the ring's coverage
    assert [e["data"]["i"] for e in both["events"]] == list(range(38, -1, -2))

    session = await emit(engine.client, [event(50, "mermaid", session_id="call-9")])
    assert session.json()["accepted"] == 1
    found = (await engine.get("/v1/events", session_id="call-9")).json()
    assert [e["data"]["i"] for e in found["events"]] == [50]


@pytest.mark.parametrize(
    ("params", "where"),
    [
        ({"creature": "yeti"}, "creature"),
        ({"service": "mail"}, "service"),
        ({"event_type": "begin"}, "event_type"),
        ({"session_id": "../x"}, "session_id"),
        ({"limit": 1001}, "limit"),
        ({"since": "yesterday"}, "since"),
        ({"since": "2026-03-02T00:00:00Z", "until": "2026-03-01T00:00:00Z"}, "until"),
    ],
)
async def test_bad_event_queries_are_422_naming_the_parameter(
    engine: Engine, params: dict[str, Any], where: str
) -> None:
    r = await engine.get("/v1/events", **params)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["query", where]


async def test_the_dashboard_origin_may_call_the_api(engine: Engine) -> None:
    preflight = {
        "Origin": "http://localhost:5174",
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "x-internal-token",
    }
    r = await engine.client.options("/v1/events", headers=preflight)
    assert r.status_code == 200
    assert r.headers["access-control-allow-origin"] == "http://localhost:5174"
    assert "x-internal-token" in r.headers["access-control-allow-headers"].lower()
    get = await engine.client.get("/v1/events", headers=AUTH | {"Origin": "http://127.0.0.1:5174"})
    assert get.status_code == 200
    assert get.headers["access-control-allow-origin"] == "http://127.0.0.1:5174"

    other = await engine.client.options(
        "/v1/events", headers=preflight | {"Origin": "http://evil.example"}
    )
    assert other.status_code == 400 and "access-control-allow-origin" not in other.headers
    # CORS lets the browser read answers; the token is still required.
    no_token = await engine.client.get("/v1/events", headers={"Origin": "http://localhost:5174"})
    assert no_token.status_code == 401


# --- GET /v1/events/stream ---


@dataclass
class Frame:
    event: str = "message"
    id: str | None = None
    data: str | None = None
    comments: list[str] = field(default_factory=list)
    retry: int | None = None

    @property
    def json(self) -> dict[str, Any]:
        assert self.data is not None
        return json.loads(self.data)


class SseReader:
    """Parses a text/event-stream response into frames (comments and `retry:` included)."""

    def __init__(self, response: httpx.Response) -> None:
        self.lines = response.aiter_lines()
        self.frames: list[Frame] = []

    async def next(self) -> Frame:
        frame = Frame()
        seen = False
        async for line in self.lines:
            if line == "":
                if seen:
                    self.frames.append(frame)
                    return frame
                continue
            seen = True
            name, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if name == "":
                frame.comments.append(value)
            elif name == "event":
                frame.event = value
            elif name == "id":
                frame.id = value
            elif name == "data":
                frame.data = value if frame.data is None else frame.data + "\n" + value
            elif name == "retry":
                frame.retry = int(value)
        raise EOFError("the stream ended")

    async def events(self, n: int) -> list[Frame]:
        """The next `n` frames that carry an event (comments skipped)."""
        out: list[Frame] = []
        while len(out) < n:
            frame = await asyncio.wait_for(self.next(), 30)
            if frame.data is not None:
                out.append(frame)
        return out


@pytest.fixture
async def served(settings: Settings) -> AsyncIterator[ServedEngine]:
    async for s in serve_engine(settings):
        yield s


@pytest.fixture
async def client(served: ServedEngine) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as c:
        yield c


async def test_a_subscriber_gets_a_catch_up_then_live_events(
    served: ServedEngine, client: httpx.AsyncClient
) -> None:
    early = [event(i) for i in range(25)]
    await emit(client, early)

    async with client.stream("GET", "/v1/events/stream", params={"token": TOKEN}) as r:
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/event-stream")
        sse = SseReader(r)
        hello = await asyncio.wait_for(sse.next(), 30)
        assert hello.retry == 1000 and hello.comments == ["connected"]
        catchup = await sse.events(25)
        # Plain messages (the design's client reads them with `onmessage`), marked in the JSON.
        assert {f.event for f in catchup} == {"message"}
        assert [f.json["data"]["i"] for f in catchup] == list(range(25))
        assert [f.id for f in catchup] == [e["event_id"] for e in early]
        assert all(f.json == early[i] | {"catchup": True} for i, f in enumerate(catchup))

        live = [event(100 + i, "mermaid") for i in range(3)]
        await emit(client, live)
        got = await sse.events(3)
        assert {f.event for f in got} == {"message"}  # EventSource's default: "message"
        assert [f.id for f in got] == [e["event_id"] for e in live]
        assert got[0].json == live[0]  # no catch-up mark on live events

        # In-process events stream too (the engine's own creatures).
        served.runtime.chronicler.record_event("narwhal", "metric", data={"probe": 1})
        (own,) = await sse.events(1)
        assert own.json["creature"] == "narwhal" and own.json["service"] == "context-engine"


async def test_a_design_client_gets_the_catch_up_with_onmessage(
    served: ServedEngine, client: httpx.AsyncClient
) -> None:
    early = [event(i, "serpent") for i in range(3)]
    await emit(client, early)
    # The design's URL, token in the query as it spells it.
    async with client.stream("GET", f"/v1/events/stream?x_internal_token={TOKEN}") as r:
        assert r.status_code == 200
        sse = SseReader(r)
        # What `onmessage` receives: every frame without an `event:` line.
        frames = await sse.events(3)
        assert {f.event for f in frames} == {"message"}
        assert [f.json["event_id"] for f in frames] == [e["event_id"] for e in early]
        await emit(client, [event(9, "serpent")])
        (live,) = await sse.events(1)
        assert live.event == "message" and live.json["data"]["i"] == 9


async def test_catch_up_is_the_last_50_matching_the_filter(
    settings: Settings,
) -> None:
    ring = settings.model_copy(update={"events_ring_size": 200})
    async with contextlib.aclosing(serve_engine(ring)) as engines:
        served = await anext(engines)
        async with httpx.AsyncClient(base_url=served.base_url, timeout=30) as c:
            await emit(c, [event(i, "chimera" if i % 3 else "hydra") for i in range(120)])
            async with c.stream(
                "GET", "/v1/events/stream", params={"creature": "chimera"}, headers=AUTH
            ) as r:
                sse = SseReader(r)
                catchup = await sse.events(50)
                wanted = [i for i in range(120) if i % 3][-50:]
                assert [f.json["data"]["i"] for f in catchup] == wanted
                assert {f.json.get("catchup") for f in catchup} == {True}
                await emit(c, [event(500, "hydra"), event(501, "chimera")])
                (live,) = await sse.events(1)
                assert live.json["data"]["i"] == 501 and live.event == "message"
                assert "catchup" not in live.json


async def test_a_reconnect_with_last_event_id_resumes_without_loss(
    served: ServedEngine, client: httpx.AsyncClient
) -> None:
    sent = [event(i) for i in range(10)]
    await emit(client, sent)
    headers = AUTH | {"Last-Event-ID": sent[5]["event_id"]}
    async with client.stream("GET", "/v1/events/stream", headers=headers) as r:
        sse = SseReader(r)
        resumed = await sse.events(4)
        assert [f.json["data"]["i"] for f in resumed] == [6, 7, 8, 9]
        assert not any("catchup" in f.json for f in resumed)  # new to this client: live
    # The id in the canonical UUID form (hyphens, any case) is the same event.
    uuid_form = str(uuid.UUID(sent[7]["event_id"])).upper()
    async with client.stream(
        "GET", "/v1/events/stream", headers=AUTH | {"Last-Event-ID": uuid_form}
    ) as r:
        assert [f.json["data"]["i"] for f in await SseReader(r).events(2)] == [8, 9]
    # Unknown to the ring: the usual catch-up.
    params = {"token": TOKEN, "last_event_id": "0" * 32}
    async with client.stream("GET", "/v1/events/stream", params=params) as r:
        frames = await SseReader(r).events(10)
        assert {f.json.get("catchup") for f in frames} == {True}


async def test_keepalive_comments_flow_while_nothing_happens(
    served: ServedEngine, client: httpx.AsyncClient
) -> None:
    async with client.stream("GET", "/v1/events/stream", headers=AUTH) as r:
        sse = SseReader(r)
        keepalives = 0
        while keepalives < 2:
            frame = await asyncio.wait_for(sse.next(), 30)
            keepalives += frame.comments.count("keepalive")


async def test_the_stream_takes_the_token_from_the_query_and_refuses_a_bad_one(
    served: ServedEngine, client: httpx.AsyncClient
) -> None:
    missing = await client.get("/v1/events/stream")
    assert missing.status_code == 401
    assert missing.json()["detail"] == "missing X-Internal-Token header or token parameter"
    wrong = await client.get("/v1/events/stream", params={"token": "w" * 32})
    assert wrong.status_code == 401 and wrong.json()["detail"].startswith("invalid")
    near = await client.get("/v1/events/stream", params={"token": TOKEN + "x"})
    assert near.status_code == 401
    # Only the stream takes the query: every other route wants the header.
    other = await client.get("/v1/events", params={"token": TOKEN})
    assert other.status_code == 401
    async with client.stream("GET", "/v1/events/stream", params={"token": TOKEN}) as r:
        assert r.status_code == 200

    # The refusals were recorded as basilisk events, without either token.
    rows = (await client.get("/v1/events", params={"creature": "basilisk"}, headers=AUTH)).json()
    paths = [e["data"]["path"] for e in rows["events"]]
    assert paths.count("/v1/events/stream") == 3 and paths.count("/v1/events") == 1
    dumped = json.dumps(rows)
    assert TOKEN not in dumped and "w" * 32 not in dumped


async def test_the_token_in_the_query_never_reaches_the_access_log(
    settings: Settings, tmp_path: Path
) -> None:
    """The real process (`python -m context_engine`, uvicorn's access log on at debug)."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_ENGINE_")}
    env |= {
        "CONTEXT_ENGINE_PORT": str(port),
        "CONTEXT_ENGINE_INTERNAL_TOKEN": TOKEN,
        "CONTEXT_ENGINE_DATABASE_URL": settings.database_url.get_secret_value(),
        "CONTEXT_ENGINE_TRANSCRIPTS_DIR": str(settings.transcripts_dir),
        "CONTEXT_ENGINE_EVENTS_DIR": str(settings.events_dir),
        "CONTEXT_ENGINE_SEARCH_INDEX_DIR": str(settings.search_index_dir),
        "CONTEXT_ENGINE_VECTOR_DIR": str(settings.vector_dir),
        "CONTEXT_ENGINE_VECTOR_INDEX_ENABLED": "false",
        "CONTEXT_ENGINE_LOG_LEVEL": "debug",
    }
    log_path = tmp_path / "engine.log"
    with log_path.open("wb") as out:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "context_engine", env=env, stdout=out, stderr=subprocess.STDOUT
        )
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as c:

            async def up() -> bool | None:
                assert proc.returncode is None, log_path.read_text()[-3000:]
                try:
                    r = await c.get("/v1/events", headers=AUTH)
                except httpx.HTTPError:
                    return None
                return True if r.status_code == 200 else None

            await eventually(up, "the engine process to serve", deadline_s=180)
            async with c.stream("GET", "/v1/events/stream", params={"token": TOKEN}) as r:
                assert r.status_code == 200
            wrong = await c.get(
                "/v1/events/stream", params={"token": "w" * 32, "creature": "chimera"}
            )
            assert wrong.status_code == 401

            def logged() -> str:
                return log_path.read_text(errors="replace")

            async def access_lines() -> list[str] | None:
                lines = [x for x in logged().splitlines() if "/v1/events/stream" in x]
                return lines if len(lines) >= 2 else None

            lines = await eventually(access_lines, "the access log lines")
    finally:
        proc.send_signal(signal.SIGTERM)
        await asyncio.wait_for(proc.wait(), 60)
    text = log_path.read_text(errors="replace")
    assert TOKEN not in text and "w" * 32 not in text
    # the access log drops a /v1/ query as a whole (tokens and questions alike)
    assert any("/v1/events/stream?[redacted] HTTP" in x for x in lines)
    assert not any("creature=chimera" in x for x in lines)


# --- retention ---


async def test_the_retention_job_deletes_only_events_past_the_window(engine: Engine) -> None:
    now = datetime.now(UTC)
    ages = {"old": timedelta(days=8), "edge": timedelta(days=7, minutes=1),
            "recent": timedelta(days=6, hours=23), "new": timedelta(0)}  # fmt: skip
    sent = {
        name: event(i, timestamp=now - age) | {"reasoning": name}
        for i, (name, age) in enumerate(ages.items())
    }
    assert (await emit(engine.client, list(sent.values()))).json()["accepted"] == 4
    await engine.runtime.chronicler.flush()

    jobs = engine.runtime.jobs
    assert ("events_retention", "events_retention") in jobs.app.periodic_registry.periodic_tasks
    assert await jobs.purge_events(now=now) == 2
    rows = await query(engine, "SELECT reasoning FROM observability_events ORDER BY timestamp")
    assert [r["reasoning"] for r in rows] == ["recent", "new"]


async def test_the_auth_gate_counts_let_through_refused_and_locked_out(settings) -> None:
    from engine_harness import TOKEN, start_engine

    s = settings.model_copy(update={"auth_failure_limit": 2, "events_stats_interval_s": 3600.0})
    async for engine in start_engine(s):
        engine.runtime.auth_counts.clear()
        ok = await engine.get("/v1/stats")
        bad = [
            await engine.client.get("/v1/stats", headers={"X-Internal-Token": "x" * 32})
            for _ in range(2)
        ]
        locked = await engine.client.get("/v1/stats", headers={"X-Internal-Token": TOKEN})
        assert ok.status_code == 200 and [r.status_code for r in bad] == [401, 401]
        assert locked.status_code == 429  # the right token, from a locked-out address
        counts = engine.runtime.auth_counts
        assert (counts["passed"], counts["refused"], counts["locked_out"]) == (1, 2, 1)
