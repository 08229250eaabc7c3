"""The /v1 REST API end to end: the real app, a real PostgreSQL, real transcript files.

Files are ingested through `POST /v1/ingest/{id}` only: the watcher is slowed down (module
`settings` below) so it never races a test. Background work (finalisation jobs) is waited for
by polling against generous deadlines; no assertion bounds how fast anything happens.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from engine_harness import Engine, eventually, ingest, start_engine
from fastapi import FastAPI
from sqlalchemy import insert, text

from context_engine.config import Settings
from context_engine.extract.fast import VERSION as FAST_VERSION
from context_engine.store.models import Entity, EntityMention
from her_os_shared.ids import InvalidIdError
from her_os_shared.jsonl import append_records
from her_os_shared.transcript import Overlap, Segment, TranscriptPayload

T0 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)  # long past: sessions are finalised at once
WRONG_TOKEN = "w" * 32


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """conftest's settings, with the watcher too slow to ingest anything during a test, and
    /v1/context on the keyword leg alone: these tests pin its query syntax and response shape
    (the hybrid legs and fusion are tested in test_retrieve.py, test_graph_leg.py and
    test_vector_flow.py)."""
    return settings.model_copy(
        update={
            "watch_debounce_s": 300.0,
            "watch_max_delay_s": 300.0,
            "reconcile_interval_s": 3600.0,
            "context_legs": ("bm25",),
            "vector_index_enabled": False,
        }
    )


# --- helpers ---


def seg(
    segment_id: str,
    words: str,
    start: float,
    end: float | None = None,
    *,
    speaker: str = "alice",
    pinned: bool = False,
) -> Segment:
    return Segment(
        segment_id=segment_id,
        speaker=speaker,
        text=words,
        start=start,
        end=start + 1.0 if end is None else end,
        stt_engine="test",
        pinned=pinned,
    )


def write(
    settings: Settings,
    session_id: str,
    *segments: Segment,
    started: datetime = T0,
    sweep: bool = False,
) -> Path:
    payload = TranscriptPayload(
        session_id=session_id,
        device_id="dev1",
        session_started_at=started,
        is_sweep=sweep,
        segments=list(segments),
    )
    return append_records(settings.transcripts_dir, session_id, [payload])


async def search(engine: Engine, query: str, **params: object) -> list[dict[str, Any]]:
    r = await engine.get("/v1/context", query=query, **params)
    assert r.status_code == 200, r.text
    return r.json()["results"]


def auth(engine: Engine) -> dict[str, str]:
    token = engine.runtime.settings.internal_token
    assert token is not None
    return {"X-Internal-Token": token.get_secret_value()}


def iso(t: datetime) -> str:
    return t.isoformat().replace("+00:00", "Z")


# --- auth ---

KNOWN_ROUTES = {
    ("GET", "/v1/context"),
    ("GET", "/v1/entities"),
    ("GET", "/v1/entities/{entity_id}"),
    ("GET", "/v1/graph/entities/{entity_id}"),
    ("GET", "/v1/facts"),
    ("GET", "/v1/graph/search"),
    ("POST", "/v1/ingest/{session_id}"),
    ("GET", "/v1/sessions"),
    ("GET", "/v1/sessions/{session_id}"),
    ("GET", "/v1/stats"),
    ("GET", "/v1/jobs"),
    ("POST", "/v1/jobs/{job_id}/retry"),
}
HTTP_METHODS = ("get", "post", "put", "patch", "delete", "head", "options", "trace")


def v1_operations(app: FastAPI) -> list[tuple[str, str, str]]:
    """(method, templated path, concrete URL) of every /v1 operation the app documents."""
    out = []
    for path, item in app.openapi()["paths"].items():
        if not path.startswith("/v1"):
            continue
        for method in HTTP_METHODS:
            op = item.get(method)
            if op is None:
                continue
            url = path
            for p in op.get("parameters", []):
                if p["in"] == "path":
                    dummy = "1" if p["schema"].get("type") == "integer" else "s1"
                    url = url.replace("{" + p["name"] + "}", dummy)
            assert "{" not in url, f"unfilled path parameter in {url}"
            out.append((method.upper(), path, url))
    return out


async def test_every_v1_route_requires_the_token(settings: Settings) -> None:
    # Three refusals per route from one address: the lockout after repeated failures
    # (tests/test_security.py) is switched off here so that every refusal is the token's.
    async for engine in start_engine(settings.model_copy(update={"auth_failure_limit": 0})):
        await _every_v1_route_requires_the_token(engine)


async def _every_v1_route_requires_the_token(engine: Engine) -> None:
    ops = v1_operations(engine.app)
    assert KNOWN_ROUTES <= {(m, p) for m, p, _ in ops}

    for method, path, url in ops:
        missing = await engine.client.request(method, url)
        assert missing.status_code == 401, (method, path, missing.text)
        assert "missing" in missing.json()["detail"], (method, path)
        wrong = await engine.client.request(method, url, headers={"X-Internal-Token": WRONG_TOKEN})
        assert wrong.status_code == 401, (method, path, wrong.text)
        assert "invalid" in wrong.json()["detail"], (method, path)
        # A token that differs only in case or by a suffix is wrong too.
        good = engine.runtime.settings.internal_token
        assert good is not None
        longer = await engine.client.request(
            method, url, headers={"X-Internal-Token": good.get_secret_value() + "x"}
        )
        assert longer.status_code == 401, (method, path)

    # /health stays open (and is not an auth failure).
    health = await engine.client.get("/health")
    assert health.status_code == 200 and health.json() == {"status": "ok"}

    await engine.runtime.chronicler.flush()  # events are written in batches
    async with engine.runtime.db.events.connect() as conn:
        rows = [
            dict(r._mapping)
            for r in await conn.execute(
                text("SELECT * FROM observability_events WHERE creature = 'basilisk'")
            )
        ]
    assert rows and all(r["event_type"] == "error" for r in rows)
    seen = {(r["data"]["method"], r["data"]["path"], r["data"]["reason"]) for r in rows}
    for method, _, url in ops:
        assert (method, url, "missing token") in seen
        assert (method, url, "invalid token") in seen
    assert len(rows) == 3 * len(ops)
    assert not any(r["data"]["path"] == "/health" for r in rows)
    secret = good.get_secret_value()
    for r in rows:
        dumped = json.dumps(r, default=str)
        assert secret not in dumped and WRONG_TOKEN not in dumped


async def test_the_right_token_is_accepted(engine: Engine) -> None:
    r = await engine.get("/v1/stats")
    assert r.status_code == 200
    await engine.runtime.chronicler.flush()
    async with engine.runtime.db.events.connect() as conn:
        n = (
            await conn.execute(
                text("SELECT count(*) FROM observability_events WHERE creature = 'basilisk'")
            )
        ).scalar()
    assert n == 0


async def test_a_query_parameter_no_route_declares_is_a_422_naming_it(engine: Engine) -> None:
    # Every /v1 operation, GET or not: a misspelt filter is refused before anything runs,
    # never silently ignored (an unfiltered answer to a filtered question).
    ops = v1_operations(engine.app)
    for method, path, url in ops:
        r = await engine.client.request(
            method, url, params={"entity_typ": "person"}, headers=auth(engine)
        )
        assert r.status_code == 422, (method, path, r.text)
        (error,) = r.json()["detail"]
        assert error["loc"] == ["query", "entity_typ"], (method, path)
        assert "Unknown query parameter" in error["msg"], (method, path)
    # Without the token it is the token that is refused (nothing learnt about parameters; a
    # few routes only: repeated refusals lock the address out).
    for method, path, url in ops[:3]:
        r = await engine.client.request(method, url, params={"entity_typ": "person"})
        assert r.status_code == 401, (method, path)
    # The message lists what the route takes; the design's names are declared, so known.
    r = await engine.get("/v1/entities", kind="person")
    assert "entity_type" in r.json()["detail"][0]["msg"]
    r = await engine.get("/v1/events", begin="2026-01-01T00:00:00Z")
    msg = r.json()["detail"][0]["msg"]
    assert all(f" {name}," in msg for name in ("start", "end", "source", "since")), msg
    # A declared name is never refused, given twice or beside others.
    assert (await engine.get("/v1/sessions", limit=2, offset=0)).status_code == 200


# --- /v1/context ---


async def test_context_returns_ingested_segments_with_their_shape(
    engine: Engine, settings: Settings
) -> None:
    write(
        settings,
        "s1",
        seg("g1", "The red fox jumped over the lazy dog", 10, 14, speaker="alice"),
        seg("g2", "A lazy red cat slept all afternoon", 20, 25, speaker="bob"),
        seg("g3", "Pancakes for breakfast with maple syrup", 30, 33),
    )
    await ingest(engine, "s1")
    async with engine.runtime.db.main.begin() as conn:
        entity_id = (
            await conn.execute(
                insert(Entity)
                .values(
                    type="animal",
                    name="Fox",
                    canonical_name="fox",
                    first_seen=T0,
                    last_seen=T0,
                )
                .returning(Entity.id)
            )
        ).scalar_one()
        await conn.execute(
            insert(EntityMention).values(
                entity_id=entity_id, session_id="s1", segment_id="g1", extractor="test"
            )
        )

    r = await engine.get("/v1/context", query="fox")
    assert r.status_code == 200
    body = r.json()
    assert body["query"] == "fox" and body["hours_back"] is None
    assert body["legs"] == {"bm25": "ok"} and body["degraded"] == []
    # The turn right after a match is found too, lower: the index holds each segment with the
    # turn before it (an answer follows its question).
    hit, follower = body["results"]
    assert follower["segment_id"] == "g2" and follower["relevance_score"] < hit["relevance_score"]
    assert set(hit) == {
        "text",
        "source_session",
        "segment_id",
        "timestamp",
        "spoken_at",
        "relevance_score",
        "speaker",
        "entities",
        "entity_refs",
        "tier",
    }
    assert body["total"] == 2 == len(body["results"])  # the design's count of results
    assert hit["tier"] == "L0"  # nothing consolidated yet
    assert hit["text"] == "The red fox jumped over the lazy dog"
    assert hit["source_session"] == "s1" and hit["segment_id"] == "g1"
    assert hit["speaker"] == "alice"
    # The design's forms: epoch seconds and "type:name"; ours beside them: ISO and objects.
    assert hit["timestamp"] == (T0 + timedelta(seconds=10)).timestamp()
    assert isinstance(hit["timestamp"], float)
    assert datetime.fromisoformat(hit["spoken_at"]) == T0 + timedelta(seconds=10)
    assert 0 < hit["relevance_score"] < 1
    assert hit["entities"] == ["animal:Fox"]
    assert hit["entity_refs"] == [{"name": "Fox", "type": "animal", "tier": "L0"}]

    # Matches without entities carry an empty list; words are stemmed ("cats" → "cat").
    cats = {h["segment_id"]: h for h in await search(engine, "cats")}
    assert set(cats) == {"g2", "g3"}  # g3 after g2: through its context
    assert cats["g2"]["entities"] == cats["g2"]["entity_refs"] == []
    assert cats["g2"]["speaker"] == "bob"
    assert [h["segment_id"] for h in await search(engine, "jumps")] == ["g1", "g2"]
    # The speaker's name is searchable with the words: bob said g2 (which is g3's context).
    by_bob = await search(engine, "bob", legs="bm25")
    assert {h["segment_id"] for h in by_bob} == {"g2", "g3"}

    # `legs` picks among the enabled legs; a leg that is not enabled is a clear 422.
    r = await engine.get("/v1/context", query="fox", legs="bm25")
    assert r.status_code == 200 and r.json()["legs"] == {"bm25": "ok"}
    for bad in ("vector", "bm25,graph", " , "):
        r = await engine.get("/v1/context", query="fox", legs=bad)
        assert r.status_code == 422, bad
        assert "not among the enabled legs (bm25)" in r.json()["detail"]


async def test_context_reads_natural_language_and_search_syntax(
    engine: Engine, settings: Settings
) -> None:
    # One segment per session: no segment is another's context here.
    for sid, segment in (
        ("s1", seg("g1", "The red fox jumped over the lazy dog", 10)),
        ("s2", seg("g2", "A lazy red cat slept all afternoon", 20)),
        ("s3", seg("g3", "Pancakes for breakfast with maple syrup", 30)),
    ):
        write(settings, sid, segment)
        await ingest(engine, sid)

    async def ids(query: str) -> list[str]:
        return [h["segment_id"] for h in await search(engine, query)]

    # Natural language: every word is an alternative; more (and rarer) matched words rank first.
    assert set(await ids("red")) == {"g1", "g2"}
    assert await ids("red fox pancakes") == ["g1", "g3", "g2"]
    assert await ids("what did the fox do?") == ["g1"]  # stopwords do not match
    # Search syntax (a quoted phrase or an excluded -word): websearch semantics, words ANDed.
    assert await ids('"red" pancakes') == []
    assert set(await ids('"red" lazy')) == {"g1", "g2"}
    assert await ids('"red fox"') == ["g1"]  # a phrase, in order
    assert await ids('"fox red"') == []
    assert await ids("red -fox") == ["g2"]  # exclusion
    assert set(await ids('"fox" or pancakes')) == {"g1", "g3"}  # alternatives
    assert await ids("unknownword") == []


async def test_context_limit(engine: Engine, settings: Settings) -> None:
    write(settings, "s1", *(seg(f"g{i}", f"apple number {i}", i * 10) for i in range(7)))
    await ingest(engine, "s1")
    assert len(await search(engine, "apple")) == 5  # the default
    assert len(await search(engine, "apple", limit=2)) == 2
    assert len(await search(engine, "apple", limit=50)) == 7
    for bad in (0, 51, -1):
        r = await engine.get("/v1/context", query="apple", limit=bad)
        assert r.status_code == 422, bad


async def test_context_rejects_bad_queries(engine: Engine) -> None:
    for query in ("", " ", "   \t ", "x" * 513):
        r = await engine.get("/v1/context", query=query)
        assert r.status_code == 422, repr(query)
    r = await engine.get("/v1/context")
    assert r.status_code == 422  # query is required
    assert (await engine.get("/v1/context", query="x" * 512)).status_code == 200
    r = await engine.get("/v1/context", query="fox", as_of="not a time")
    assert r.status_code == 422
    for hours in (0, -1):
        r = await engine.get("/v1/context", query="fox", hours_back=hours)
        assert r.status_code == 422, hours


async def test_context_stopword_and_punctuation_queries_return_nothing(
    engine: Engine, settings: Settings
) -> None:
    write(settings, "s1", seg("g1", "the fox and the hound of the forest", 10))
    await ingest(engine, "s1")
    for query in ("the", "the and of", "!!!", "-", '""', "or"):
        r = await engine.get("/v1/context", query=query)
        assert r.status_code == 200, (query, r.text)
        assert r.json()["results"] == [], query


async def test_context_as_of_and_hours_back(engine: Engine, settings: Settings) -> None:
    hour = 3600.0
    write(
        settings,
        "s1",
        seg("early", "meteor shower at dawn", 0),
        seg("late", "meteor crater photos", 3 * hour),
    )
    await ingest(engine, "s1")

    async def ids(**params: object) -> set[str]:
        return {h["segment_id"] for h in await search(engine, "meteor", **params)}

    assert await ids() == {"early", "late"}  # as_of defaults to now
    # as_of before a segment was spoken excludes it; at the very moment includes it.
    assert await ids(as_of=iso(T0 - timedelta(seconds=1))) == set()
    assert await ids(as_of=iso(T0)) == {"early"}
    assert await ids(as_of=iso(T0 + timedelta(hours=2))) == {"early"}
    assert await ids(as_of=iso(T0 + timedelta(hours=3))) == {"early", "late"}
    # A naive as_of is UTC.
    assert await ids(as_of=(T0 + timedelta(hours=2)).replace(tzinfo=None).isoformat()) == {"early"}
    # An offset is honoured: 12:30+02:00 is 10:30 UTC.
    assert await ids(as_of="2025-06-01T12:30:00+02:00") == {"early"}

    # hours_back is a window ending at as_of.
    as_of = iso(T0 + timedelta(hours=4))
    assert await ids(as_of=as_of, hours_back=2) == {"late"}
    assert await ids(as_of=as_of, hours_back=4) == {"early", "late"}
    assert await ids(as_of=as_of, hours_back=0.5) == set()
    assert await ids(as_of=iso(T0 + timedelta(hours=1)), hours_back=2) == {"early"}
    assert await ids(as_of=iso(T0 + timedelta(hours=3, minutes=30)), hours_back=1) == {"late"}
    # Relative to now, both are long out of a one-day window.
    assert await ids(hours_back=24) == set()

    r = await engine.get("/v1/context", query="meteor", as_of=as_of, hours_back=2)
    body = r.json()
    assert body["hours_back"] == 2
    assert datetime.fromisoformat(body["as_of"]) == T0 + timedelta(hours=4)


async def test_context_never_returns_replaced_segments(engine: Engine, settings: Settings) -> None:
    write(settings, "s1", seg("f1", "quokka fast path words", 0, 4))
    await ingest(engine, "s1")
    assert [h["segment_id"] for h in await search(engine, "quokka")] == ["f1"]

    write(settings, "s1", seg("w1", "quokka sweep words", 0, 5), sweep=True)
    await ingest(engine, "s1")
    hits = await search(engine, "quokka")
    assert [h["segment_id"] for h in hits] == ["w1"]
    assert await search(engine, "fast path") == []


# --- /v1/ingest ---


async def test_ingest(engine: Engine, settings: Settings) -> None:
    r = await engine.post("/v1/ingest/s1")
    assert r.status_code == 404
    assert "s1" in r.json()["detail"]

    path = write(settings, "s1", seg("g1", "hello there", 0), seg("g2", "general kenobi", 2))
    write(settings, "s1", seg("g3", "you are a bold one", 4))
    size = path.stat().st_size
    first = await ingest(engine, "s1")
    assert first == {
        "session_id": "s1",
        "status": "ingested",
        "lines": 2,
        "segments": 3,
        "segments_count": 3,  # the design's name
        "skipped": 0,
        "deleted_stale": 0,
        "offset": size,
        "size": size,
    }
    again = await ingest(engine, "s1")
    assert again["status"] == "up_to_date"
    assert again["lines"] == again["segments"] == 0
    assert again["offset"] == again["size"] == size

    # A malformed line is skipped (and counted); the next good one is ingested.
    with path.open("ab") as f:
        f.write(b"this is not json\n")
    write(settings, "s1", seg("g4", "kill him", 6))
    third = await ingest(engine, "s1")
    assert third["status"] == "ingested"
    assert (third["lines"], third["segments"], third["skipped"]) == (1, 1, 1)
    assert third["offset"] == third["size"] == path.stat().st_size

    detail = (await engine.get("/v1/sessions/s1")).json()
    assert [s["segment_id"] for s in detail["segments"]] == ["g1", "g2", "g3", "g4"]
    # A page of a long session: from `offset`, at most `limit`; the count stays the whole's.
    page = (await engine.get("/v1/sessions/s1", offset=1, limit=2)).json()
    assert [s["segment_id"] for s in page["segments"]] == ["g2", "g3"]
    assert page["segments_count"] == 4
    past = (await engine.get("/v1/sessions/s1", offset=9)).json()
    assert past["segments"] == [] and past["segments_count"] == 4
    for bad in ({"limit": 0}, {"limit": 1001}, {"offset": -1}):
        assert (await engine.get("/v1/sessions/s1", **bad)).status_code == 422


@pytest.mark.parametrize(
    "raw_id",
    [
        "..",
        "%2e%2e",
        "%2e%2e%2f",
        "..%2F..%2Fetc%2Fpasswd",
        "..%2Fsentinel",
        "%2E%2E%2Fsentinel",
        "a/b",
        "a.b",
        "sentinel.jsonl",
        "x" * 129,
        "caf%C3%A9",
        "%00",
        "s1%0A",
        "%20s1",
    ],
)
async def test_ingest_rejects_path_tricks(
    engine: Engine, settings: Settings, tmp_path: Path, raw_id: str
) -> None:
    # Valid transcript files just outside transcripts_dir: they must never be read.
    for name in ("sentinel", "passwd"):
        payload = TranscriptPayload(
            session_id=name,
            device_id="dev1",
            session_started_at=T0,
            segments=[seg("g1", "secret sentinel words", 0)],
        )
        append_records(tmp_path, name, [payload])
    (tmp_path / "etc").mkdir(exist_ok=True)
    append_records(tmp_path / "etc", "passwd", [payload])
    settings.transcripts_dir.mkdir(parents=True, exist_ok=True)

    # (`.../%2e%2e%2f` decodes to a trailing slash: the router's redirect is followed.)
    r = await engine.client.post(
        f"/v1/ingest/{raw_id}", headers=auth(engine), follow_redirects=True
    )
    assert 400 <= r.status_code < 500 and r.status_code != 401, (raw_id, r.status_code)

    async with engine.runtime.db.main.connect() as conn:
        counts = (
            await conn.execute(
                text(
                    "SELECT (SELECT count(*) FROM sessions), (SELECT count(*) FROM segments),"
                    " (SELECT count(*) FROM ingest_offsets)"
                )
            )
        ).one()
    assert tuple(counts) == (0, 0, 0)
    assert await search(engine, "sentinel") == []


async def test_the_ingestor_refuses_path_tricks_itself(engine: Engine) -> None:
    # Defence in depth: even an id that got past the route cannot name another file.
    for bad in ("..", "../sentinel", "a/b", "a.b", "/etc/passwd", "", "x" * 129, "é"):
        with pytest.raises(InvalidIdError):
            engine.runtime.ingestor.path_for(bad)
    path = engine.runtime.ingestor.path_for("s1")
    assert path.parent == engine.runtime.settings.transcripts_dir and path.name == "s1.jsonl"


async def test_ingest_unicode_id_is_rejected(engine: Engine) -> None:
    # httpx percent-encodes the non-ASCII characters itself.
    for raw_id in ("café", "ｓ1", "s\u200b1", "😀"):
        r = await engine.post(f"/v1/ingest/{raw_id}")
        assert r.status_code == 422, (raw_id, r.status_code)


# --- /v1/sessions ---


async def test_sessions_list_newest_first_with_pagination(
    engine: Engine, settings: Settings
) -> None:
    r = await engine.get("/v1/sessions")
    assert r.json() == {"sessions": [], "total": 0, "limit": 50, "offset": 0}
    for day, sid in ((1, "a_old"), (3, "c_new"), (2, "b_mid")):
        write(
            settings,
            sid,
            seg("g1", "one", 0),
            seg("g2", "two", 5),
            started=T0 + timedelta(days=day),
        )
        await ingest(engine, sid)

    body = (await engine.get("/v1/sessions")).json()
    assert body["total"] == 3
    assert [s["session_id"] for s in body["sessions"]] == ["c_new", "b_mid", "a_old"]
    first = body["sessions"][0]
    assert set(first) == {
        "session_id",
        "device_id",
        "started_at",
        "last_spoken_at",
        "ended_at",
        "status",
        "segments_count",
    }
    assert first["device_id"] == "dev1" and first["segments_count"] == 2
    assert datetime.fromisoformat(first["started_at"]) == T0 + timedelta(days=3)
    assert first["status"] in ("open", "ended")

    page = (await engine.get("/v1/sessions", limit=2)).json()
    assert (page["total"], page["limit"], page["offset"]) == (3, 2, 0)
    assert [s["session_id"] for s in page["sessions"]] == ["c_new", "b_mid"]
    page = (await engine.get("/v1/sessions", limit=2, offset=2)).json()
    assert (page["total"], page["limit"], page["offset"]) == (3, 2, 2)
    assert [s["session_id"] for s in page["sessions"]] == ["a_old"]
    page = (await engine.get("/v1/sessions", offset=10)).json()
    assert page["sessions"] == [] and page["total"] == 3

    since = (await engine.get("/v1/sessions", since=iso(T0 + timedelta(days=2)))).json()
    assert [s["session_id"] for s in since["sessions"]] == ["c_new", "b_mid"]
    assert since["total"] == 2
    until = (await engine.get("/v1/sessions", until=iso(T0 + timedelta(days=2)))).json()
    assert [s["session_id"] for s in until["sessions"]] == ["a_old"]

    for params in ({"limit": 0}, {"limit": 501}, {"offset": -1}):
        assert (await engine.get("/v1/sessions", **params)).status_code == 422, params


async def test_session_detail(engine: Engine, settings: Settings) -> None:
    assert (await engine.get("/v1/sessions/nope")).status_code == 404
    assert (await engine.get("/v1/sessions/a.b")).status_code == 422

    write(
        settings,
        "s1",
        seg("late", "said last", 9, 12),
        seg("early", "said first", 0, 2, speaker="bob"),
        seg("mid", "said in between", 4, 6, pinned=True),
    )
    write(settings, "s1", seg("fast", "to be replaced", 20, 22))
    write(settings, "s1", seg("sweep1", "the sweep version", 19, 23), sweep=True)
    await ingest(engine, "s1")

    r = await engine.get("/v1/sessions/s1")
    assert r.status_code == 200
    body = r.json()
    assert body["session_id"] == "s1" and body["device_id"] == "dev1"
    assert [s["segment_id"] for s in body["segments"]] == ["early", "mid", "late", "sweep1"]
    assert body["segments_count"] == 4
    early = body["segments"][0]
    assert early == {
        "segment_id": "early",
        "speaker": "bob",
        "text": "said first",
        "start": 0.0,
        "end": 2.0,
        "spoken_at": early["spoken_at"],
        "language": None,
        "stt_engine": "test",
        "emotion": None,
        "overlap": [],
        "pinned": False,
        "is_sweep": False,
        "replaced_by": None,
    }
    assert datetime.fromisoformat(early["spoken_at"]) == T0
    assert body["segments"][1]["pinned"] is True
    assert body["segments"][3]["is_sweep"] is True

    full = (await engine.get("/v1/sessions/s1", include_replaced="true")).json()
    assert [s["segment_id"] for s in full["segments"]] == [
        "early",
        "mid",
        "late",
        "sweep1",
        "fast",
    ]
    assert full["segments"][-1]["replaced_by"] == "sweep1"
    assert full["segments_count"] == 4  # the active ones

    # Spoken in 2025: long silent, so finalisation runs at once (a durable job).
    async def ended() -> dict[str, Any] | None:
        found = (await engine.get("/v1/sessions/s1")).json()
        stages = {s["stage"]: s for s in found["stages"]}
        done = stages.get("finalise", {}).get("status") == "done"
        return found if done and found["status"] == "ended" else None

    final = await eventually(ended, "session s1 to be finalised")
    # finalise, then extraction (its next stage) is queued or done
    stage = {s["stage"]: s for s in final["stages"]}["finalise"]
    assert {s["stage"] for s in final["stages"]} <= {"finalise", "extract"}
    assert stage["stage"] == "finalise" and stage["stage_version"] == 1
    assert stage["attempts"] >= 1 and stage["last_error"] is None
    assert stage["completed_at"] is not None
    assert datetime.fromisoformat(final["ended_at"]) == T0 + timedelta(seconds=23)


async def test_session_detail_shows_each_segments_overlap(
    engine: Engine, settings: Settings
) -> None:
    voices = [Overlap(speaker="bob", start=1.5, end=2.0), Overlap(speaker="carol", start=2, end=3)]
    talked_over = seg("said", "I was saying", 1, 3).model_copy(update={"overlap": voices})
    write(settings, "ov1", talked_over, seg("quiet", "nobody else spoke", 5))
    await ingest(engine, "ov1")
    body = (await engine.get("/v1/sessions/ov1")).json()
    shown = {s["segment_id"]: s["overlap"] for s in body["segments"]}
    assert shown == {
        "said": [
            {"speaker": "bob", "start": 1.5, "end": 2.0},
            {"speaker": "carol", "start": 2.0, "end": 3.0},
        ],
        "quiet": [],
    }
    # The OpenAPI schema says so (schemathesis checks answers against it).
    segment = engine.app.openapi()["components"]["schemas"]["SegmentOut"]
    assert "overlap" in segment["required"] and segment["properties"]["overlap"]["description"]


# --- /v1/entities ---


async def test_entities(engine: Engine) -> None:
    empty = (await engine.get("/v1/entities")).json()
    assert empty == {"entities": [], "total": 0, "limit": 50, "offset": 0}

    rows = [
        ("person", "Alice", 5),
        ("person", "Bob", 3),
        ("person", "Carol", 4),
        ("place", "Paris", 1),
        ("place", "Lyon", 2),
    ]
    async with engine.runtime.db.main.begin() as conn:
        await conn.execute(
            insert(Entity),
            [
                {
                    "type": etype,
                    "name": name,
                    "canonical_name": name.lower(),
                    "confidence": 0.5,
                    "properties": {"n": day},
                    "first_seen": T0,
                    "last_seen": T0 + timedelta(days=day),
                    "episode_count": day,
                }
                for etype, name, day in rows
            ],
        )

    everything = (await engine.get("/v1/entities")).json()
    assert everything["total"] == 5
    # Most recently seen first.
    assert [e["name"] for e in everything["entities"]] == ["Alice", "Carol", "Bob", "Lyon", "Paris"]
    alice = everything["entities"][0]
    assert set(alice) == {
        "id",
        "type",
        "name",
        "confidence",
        "properties",
        "sensitivity",
        "first_seen",
        "last_seen",
        "episode_count",
        "contradicted_at",
        "tier",
        "salience",
        "low_salience",
        "contradicted",
        "tier_changed_at",
        "community_id",
        "entity_id",
        "entity_type",
    }
    # The design's names beside ours: the id as a string, the type.
    assert alice["entity_id"] == str(alice["id"]) and alice["entity_type"] == "person"
    assert (alice["tier"], alice["salience"], alice["community_id"]) == ("L0", 1.0, None)
    assert alice["type"] == "person" and alice["properties"] == {"n": 5}
    assert alice["sensitivity"] == "open" and alice["contradicted_at"] is None
    assert alice["episode_count"] == 5 and alice["confidence"] == 0.5
    assert datetime.fromisoformat(alice["last_seen"]) == T0 + timedelta(days=5)

    people = (await engine.get("/v1/entities", type="person")).json()
    assert people["total"] == 3
    assert [e["name"] for e in people["entities"]] == ["Alice", "Carol", "Bob"]
    page = (await engine.get("/v1/entities", type="person", limit=2, offset=1)).json()
    assert (page["total"], page["limit"], page["offset"]) == (3, 2, 1)
    assert [e["name"] for e in page["entities"]] == ["Carol", "Bob"]
    places = (await engine.get("/v1/entities", type="place", limit=1)).json()
    assert places["total"] == 2 and [e["name"] for e in places["entities"]] == ["Lyon"]
    none = (await engine.get("/v1/entities", type="spaceship")).json()
    assert none["total"] == 0 and none["entities"] == []
    # The design's request, verbatim: `entity_type` is `type` (never ignored).
    r = await engine.client.get("/v1/entities?entity_type=person", headers=auth(engine))
    assert r.status_code == 200 and r.json() == people
    same = await engine.get("/v1/entities", type="person", entity_type="person")
    assert same.status_code == 200 and same.json() == people
    clash = await engine.get("/v1/entities", type="person", entity_type="place")
    assert clash.status_code == 422
    assert clash.json()["detail"][0]["loc"] == ["query", "entity_type"]

    for params in ({"limit": 0}, {"limit": 501}, {"offset": -1}, {"type": ""}, {"type": "x" * 65}):
        assert (await engine.get("/v1/entities", **params)).status_code == 422, params


# --- /v1/stats ---


async def test_stats(engine: Engine, settings: Settings) -> None:
    r = await engine.get("/v1/stats")
    assert r.status_code == 200
    empty = r.json()
    assert empty["sessions"] == {"total": 0, "open": 0, "ended": 0}
    assert empty["segments"] == {"total": 0, "active": 0, "replaced": 0, "pinned": 0}
    assert empty["entities"] == 0 and empty["entity_mentions"] == 0
    assert (empty["sessions_count"], empty["segments_count"], empty["entities_count"]) == (0, 0, 0)
    assert empty["ingest"] == {"files": 0, "bytes_ingested": 0, "last_ingest_at": None}
    assert empty["stages_failed"] == 0
    # No LLM and no graph configured: the fast extractor, nothing written to a graph.
    assert empty["extraction"] == {
        "extractor": f"fast@{FAST_VERSION}",
        "graph_backend": None,
        "graph_mode": None,
        "graph_open": False,
    }
    assert empty["vectors"] == {
        "enabled": False,
        "space": None,
        "searching": None,
        "status": None,
        "embedded": 0,
        "entities_embedded": 0,
    }
    assert set(empty["jobs"]) == {
        "todo",
        "doing",
        "succeeded",
        "failed",
        "cancelled",
        "aborting",
        "aborted",
    }
    assert empty["jobs"]["failed"] == 0

    # a diarization label, not a name: extraction (racing the check below) finds no person
    anon = "SPEAKER_00"
    p1 = write(
        settings,
        "s1",
        seg("g1", "first words", 0, speaker=anon),
        seg("g2", "pinned words", 2, pinned=True, speaker=anon),
    )
    write(settings, "s1", seg("g3", "fast words", 10, 12, speaker=anon))
    write(settings, "s1", seg("w1", "sweep words", 9, 13, speaker=anon), sweep=True)
    p2 = write(
        settings, "s2", seg("g1", "other session", 0, speaker=anon), started=T0 + timedelta(days=1)
    )
    await ingest(engine, "s1")
    await ingest(engine, "s2")
    async with engine.runtime.db.main.begin() as conn:
        entity_id = (
            await conn.execute(
                insert(Entity)
                .values(
                    type="person", name="Ann", canonical_name="ann", first_seen=T0, last_seen=T0
                )
                .returning(Entity.id)
            )
        ).scalar_one()
        await conn.execute(
            insert(EntityMention).values(
                entity_id=entity_id, session_id="s1", segment_id="g1", extractor="test"
            )
        )

    async def both_ended() -> dict[str, Any] | None:
        stats = (await engine.get("/v1/stats")).json()
        return stats if stats["sessions"]["ended"] == 2 else None

    stats = await eventually(both_ended, "both sessions to be finalised")
    assert stats["sessions"] == {"total": 2, "open": 0, "ended": 2}
    assert stats["segments"] == {"total": 5, "active": 4, "replaced": 1, "pinned": 1}
    assert stats["entities"] == 1 and stats["entity_mentions"] == 1
    # The design's counts: every session, the segments in memory (the sweep's replacement
    # counted once), the entities.
    assert (stats["sessions_count"], stats["segments_count"], stats["entities_count"]) == (2, 4, 1)
    assert stats["ingest"]["files"] == 2
    assert stats["ingest"]["bytes_ingested"] == p1.stat().st_size + p2.stat().st_size
    assert stats["ingest"]["last_ingest_at"] is not None
    assert stats["stages_failed"] == 0
    assert stats["jobs"]["failed"] == 0
    assert stats["jobs"]["succeeded"] >= 2  # the two finalisations at least


# --- request body limit ---


class TestBodyLimit:
    @pytest.fixture
    def settings(self, settings: Settings) -> Settings:
        return settings.model_copy(update={"max_body_bytes": 1024})

    async def test_large_bodies_get_413(self, engine: Engine) -> None:
        headers = auth(engine)
        r = await engine.client.post("/v1/ingest/s1", content=b"x" * 2048, headers=headers)
        assert r.status_code == 413
        assert "1024" in r.json()["detail"]

        # A body within the limit reaches the route (no file yet: 404).
        r = await engine.client.post("/v1/ingest/s1", content=b"x" * 1000, headers=headers)
        assert r.status_code == 404
        # The engine still answers afterwards.
        assert (await engine.get("/v1/stats")).status_code == 200


async def test_health_answers_from_the_last_check_until_it_is_old(settings: Settings) -> None:
    """Issue 37: /health serves the last check (renewed in the background) so a probe never
    waits behind searches for the check's round trips; an old answer is checked again."""
    quiet = settings.model_copy(update={"health_interval_s": 60.0})  # no renewal meanwhile
    async for engine in start_engine(quiet):
        await _health_from_kept_answer(engine)


async def _health_from_kept_answer(engine: Engine) -> None:
    rt = engine.runtime

    async def settled() -> bool | None:
        # every layer opened (a change of the engine's state is checked again at once)
        if not rt.started.is_set() or (rt.graph is not None and not rt.graph.opened):
            return None
        r = await engine.client.get("/health")
        return True if r.json() == {"status": "ok"} else None

    await eventually(settled, "the engine started and checked", deadline_s=60)
    calls = 0
    check = rt._check_health

    async def counted() -> Any:
        nonlocal calls
        calls += 1
        return await check()

    rt._check_health = counted  # type: ignore[method-assign]
    for _ in range(20):
        r = await engine.client.get("/health")
        assert r.status_code == 200 and r.json() == {"status": "ok"}
    assert calls == 0  # all from the kept answer
    rt._health = None  # as if it were older than twice the interval
    assert (await engine.client.get("/health")).status_code == 200
    assert calls == 1
