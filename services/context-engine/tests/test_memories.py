"""POST /v1/memories through the real engine (PostgreSQL, the fast extractor; no graph or
vectors): a memory added as text is a JSONL transcript session like speech — ingested,
searchable, extracted, appended to with the session's clock kept, forgotten like any other —
and bad input is a 422 naming the field with nothing written. One engine serves the module.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
import pytest_asyncio
from engine_harness import (
    TOKEN,
    Engine,
    engine_settings,
    eventually,
    query,
    stages_done,
    start_engine,
    write_conversation,
)
from mcp import Client

from context_engine.ingest.memories import MAX_SEGMENT_CHARS, default_speaker, split_text
from context_engine.mcp.client import MemoryApi
from context_engine.mcp.server import build_server
from context_engine.memory.daily import reflection_payload
from context_engine.routes.memories import SCOPE as MEMORIES_SCOPE
from context_engine.routes.schemas import AddMemory
from context_engine.store.idempotency import PgIdempotencyStore
from her_os_shared.idempotency import (
    MAX_KEY_CHARS,
    REPLAYED_HEADER,
    Answer,
    Idempotency,
    fingerprint,
)
from her_os_shared.jsonl import JsonlReader, append_records
from her_os_shared.transcript import TranscriptPayload

T = TypeVar("T")


def on_engine(test: T) -> T:
    """A test of the module's engine: on the platform, in the module's event loop."""
    return pytest.mark.platform(pytest.mark.asyncio(loop_scope="module")(test))


AUTH = {"X-Internal-Token": TOKEN}
# Older than the session gap: ingestion finalises it at once and extraction follows.
EARLIER = datetime.now(UTC).replace(microsecond=0) - timedelta(hours=2)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def engine(
    module_database: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Engine]:
    root: Path = tmp_path_factory.mktemp("memories")
    settings = engine_settings(
        root, module_database, watch_debounce_s=0.1, watch_max_delay_s=0.5,
        reconcile_interval_s=2.0, job_retry_base_s=0.0, job_max_attempts=3, gc_freeze=False,
        vector_index_enabled=False,
    )  # fmt: skip
    async for e in start_engine(settings):
        yield e


def transcripts(engine: Engine) -> Path:
    return engine.runtime.settings.transcripts_dir


async def add(engine: Engine, **body: Any) -> dict[str, Any]:
    r = await engine.client.post("/v1/memories", json=body, headers=AUTH)
    assert r.status_code == 201, r.text
    return r.json()


def payloads(engine: Engine, session_id: str) -> list[TranscriptPayload]:
    reader = JsonlReader(transcripts(engine) / f"{session_id}.jsonl", TranscriptPayload)
    found = [rec.value for rec in reader]
    assert reader.skipped == []  # every line holds to the contract
    return found


async def session(engine: Engine, session_id: str, segments: int) -> dict[str, Any]:
    """GET /v1/sessions/{id} once ingestion has stored `segments` segments."""

    async def stored() -> dict[str, Any] | None:
        r = await engine.get(f"/v1/sessions/{session_id}")
        if r.status_code == 404:
            return None
        assert r.status_code == 200, r.text
        return r.json() if len(r.json()["segments"]) == segments else None

    return await eventually(stored, f"session {session_id} ingested")


@on_engine
async def test_a_memory_is_a_session_that_is_ingested_found_and_extracted(
    engine: Engine,
) -> None:
    said = "My sister Ayesha moved to Lisbon last spring."
    added = await add(engine, text=said, speaker="Farah", at=EARLIER.isoformat())
    sid = added["session_id"]
    assert re.fullmatch(r"memory-\d{8}T\d{6}-[0-9a-f]{8}", sid), sid
    assert added["ingest"] == "queued"
    assert datetime.fromisoformat(added["spoken_at"]) == EARLIER
    [segment_id] = added["segment_ids"]

    # Written through the transcript contract, like speech.
    [payload] = payloads(engine, sid)
    assert payload.session_id == sid and payload.device_id == "api"
    assert payload.session_started_at == EARLIER and not payload.is_sweep
    [seg] = payload.segments
    assert (seg.segment_id, seg.speaker, seg.text) == (segment_id, "Farah", said)
    assert seg.start == 0.0 and seg.end > seg.start
    assert (seg.stt_engine, seg.language, seg.emotion) == ("text", None, None)

    # Ingested: the session and the segment, spoken at `at`.
    found = await session(engine, sid, 1)
    assert found["device_id"] == "api"
    [stored] = found["segments"]
    assert stored["segment_id"] == segment_id and stored["stt_engine"] == "text"
    assert datetime.fromisoformat(stored["spoken_at"]) == EARLIER

    # Searchable.
    r = await engine.get("/v1/context", query="where did Ayesha move", limit=5)
    assert r.status_code == 200, r.text
    results = r.json()["results"]
    assert [x["segment_id"] for x in results][:1] == [segment_id], results
    assert results[0]["speaker"] == "Farah" and results[0]["source_session"] == sid

    # Extracted (spoken two hours ago: finalised on ingestion, then extracted).
    await stages_done(engine, sid, ("extract",), deadline_s=60)
    names = {
        (e["type"], e["name"])
        for q in ("Ayesha", "Lisbon")
        for e in (await engine.get("/v1/entities", q=q)).json()["entities"]
    }
    assert {("person", "Ayesha"), ("place", "Lisbon")} <= names, names


@on_engine
async def test_defaults_owner_now_api_and_a_new_session(engine: Engine) -> None:
    before = datetime.now(UTC)
    added = await add(engine, text="  Remember to water the basil.  ")
    after = datetime.now(UTC)
    assert before <= datetime.fromisoformat(added["spoken_at"]) <= after
    [payload] = payloads(engine, added["session_id"])
    assert payload.device_id == "api"
    assert [(s.speaker, s.text) for s in payload.segments] == [
        ("owner", "Remember to water the basil.")
    ]
    other = await add(engine, text="Another one.", source="mcp")
    assert other["session_id"] != added["session_id"]
    assert payloads(engine, other["session_id"])[0].device_id == "mcp"


@on_engine
async def test_a_long_text_becomes_segments_in_order_with_increasing_times(
    engine: Engine,
) -> None:
    long_paragraph = " ".join(
        f"On day {i} we walked along the river and counted the herons." for i in range(60)
    )
    text = "\n\n".join(["We spent a week in Porto.", long_paragraph, "Then we flew home."])
    added = await add(engine, text=text, speaker="Farah", at=EARLIER.isoformat())
    [payload] = payloads(engine, added["session_id"])
    segments = payload.segments
    assert [s.segment_id for s in segments] == added["segment_ids"]
    assert len(segments) >= 5  # the long paragraph is cut at sentence ends
    assert segments[0].text == "We spent a week in Porto."
    assert segments[-1].text == "Then we flew home."
    assert " ".join(s.text for s in segments[1:-1]) == long_paragraph
    for s in segments[1:-1]:
        assert len(s.text) <= MAX_SEGMENT_CHARS and s.text.endswith("herons.")
    for a, b in pairwise(segments):
        assert a.start < a.end == b.start < b.end  # consecutive
    # ~2.5 words a second
    said = segments[1]
    assert said.end - said.start == pytest.approx(len(said.text.split()) / 2.5, abs=0.001)

    found = await session(engine, added["session_id"], len(segments))
    assert [s["segment_id"] for s in found["segments"]] == added["segment_ids"]


@on_engine
async def test_appending_keeps_the_session_clock(engine: Engine) -> None:
    sid = "walk-2025"
    started = EARLIER - timedelta(hours=1)
    write_conversation(transcripts(engine), sid, started, [
        ("Farah", "Shall we walk to the lighthouse?"),
        ("Omar", "Only if we stop for pastries."),
    ])  # fmt: skip
    at = started + timedelta(minutes=10)
    added = await add(engine, text="We stopped at the bakery on Rua Augusta.",
                      speaker="Farah", at=at.isoformat(), session_id=sid)  # fmt: skip
    assert added["session_id"] == sid
    first, memory = payloads(engine, sid)
    assert memory.session_started_at == first.session_started_at == started
    assert memory.segments[0].start == 600.0

    found = await session(engine, sid, 3)
    by_id = {s["segment_id"]: s for s in found["segments"]}
    assert datetime.fromisoformat(by_id[added["segment_ids"][0]]["spoken_at"]) == at

    # A second memory, 90 s later, on the same clock.
    again = await add(engine, text="The tram was full.", at=(at + timedelta(seconds=90))
                      .isoformat(), session_id=sid)  # fmt: skip
    assert payloads(engine, sid)[-1].segments[0].start == 690.0
    assert again["segment_ids"][0] not in added["segment_ids"]  # ids never repeat

    # Before the session began: refused, nothing written.
    size = (transcripts(engine) / f"{sid}.jsonl").stat().st_size
    early = (started - timedelta(minutes=1)).isoformat()
    r = await engine.client.post(
        "/v1/memories", json={"text": "Too early.", "session_id": sid, "at": early}, headers=AUTH
    )
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "at"]
    assert "before the start" in r.json()["detail"][0]["msg"]
    assert (transcripts(engine) / f"{sid}.jsonl").stat().st_size == size


LONG = "word " * 4001  # 20,005 characters
FUTURE = (datetime.now(UTC) + timedelta(hours=1)).isoformat()
BAD: list[tuple[str, dict[str, Any] | str, str]] = [
    ("empty", {"text": ""}, "text"),
    ("blank", {"text": " \n\t "}, "text"),
    ("too long", {"text": LONG}, "text"),
    ("NUL", {"text": "a\x00b"}, "text"),
    # (raw JSON: httpx cannot encode a lone surrogate)
    ("lone surrogate", '{"text": "a\\ud800b"}', "text"),
    ("missing text", {"speaker": "Farah"}, "text"),
    ("blank speaker", {"text": "x", "speaker": "  "}, "speaker"),
    ("long speaker", {"text": "x", "speaker": "s" * 129}, "speaker"),
    ("naive at", {"text": "x", "at": "2025-03-01T10:00:00"}, "at"),
    ("future at", {"text": "x", "at": FUTURE}, "at"),
    ("ancient at", {"text": "x", "at": "1500-01-01T00:00:00Z"}, "at"),
    ("not a time", {"text": "x", "at": "yesterday"}, "at"),
    ("path trick", {"text": "x", "session_id": "../x"}, "session_id"),
    ("dotted id", {"text": "x", "session_id": "a.b"}, "session_id"),
    ("bad source", {"text": "x", "source": "my phone"}, "source"),
    ("unknown field", {"text": "x", "mood": "happy"}, "mood"),
]


def snapshot(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.is_file()}


@on_engine
@pytest.mark.parametrize(("body", "field"), [b[1:] for b in BAD], ids=[b[0] for b in BAD])
async def test_bad_input_is_a_422_naming_the_field_and_nothing_is_written(
    engine: Engine, body: dict[str, Any] | str, field: str
) -> None:
    before = snapshot(transcripts(engine))
    if isinstance(body, str):
        headers = AUTH | {"Content-Type": "application/json"}
        r = await engine.client.post("/v1/memories", content=body, headers=headers)
    else:
        r = await engine.client.post("/v1/memories", json=body, headers=AUTH)
    assert r.status_code == 422, r.text
    assert ["body", field] in [e["loc"] for e in r.json()["detail"]], r.json()
    assert snapshot(transcripts(engine)) == before


@on_engine
async def test_refusals_before_the_body_and_a_reflection_session(engine: Engine) -> None:
    directory = transcripts(engine)
    day = EARLIER.date()
    append_records(directory, f"reflection-{day}", [
        reflection_payload(day, ["A quiet day."], EARLIER)
    ])  # fmt: skip
    before = snapshot(directory)
    body = {"text": "Remember this."}
    assert (await engine.client.post("/v1/memories", json=body)).status_code == 401
    wrong = {"X-Internal-Token": "w" * 32}
    assert (await engine.client.post("/v1/memories", json=body, headers=wrong)).status_code == 401
    r = await engine.client.post("/v1/memories", params={"sesion_id": "x"}, json=body,
                                 headers=AUTH)  # fmt: skip
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["query", "sesion_id"]
    # an unpaired surrogate in a key the model would refuse (a 422 that echoes it was a 500)
    raw = '{"text": "x", "\\udc00": 1}'
    r = await engine.client.post("/v1/memories", content=raw,
                                 headers=AUTH | {"Content-Type": "application/json"})  # fmt: skip
    assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body"], r.text
    huge = {"text": "x" * (engine.runtime.settings.max_body_bytes + 1)}
    assert (await engine.client.post("/v1/memories", json=huge, headers=AUTH)).status_code == 413
    # A reflection is rewritten whole when regenerated: a memory there would be lost, in
    # today's reflection or in one of a day still to come.
    for sid in (f"reflection-{day}", "reflection-2030-01-01"):
        r = await engine.client.post("/v1/memories", json=body | {"session_id": sid}, headers=AUTH)
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "session_id"]
    assert snapshot(directory) == before


@on_engine
async def test_an_added_memory_is_forgotten_like_any_session(engine: Engine) -> None:
    added = await add(engine, text="The spare key is under the blue flowerpot.",
                      at=EARLIER.isoformat())  # fmt: skip
    sid = added["session_id"]
    await session(engine, sid, 1)
    r = await engine.client.delete(f"/v1/sessions/{sid}", headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.json()["stores"]["jsonl"]["files_removed"] == 1
    assert r.json()["stores"]["postgres"]["segments"] == 1
    assert not (transcripts(engine) / f"{sid}.jsonl").exists()
    assert (await engine.get(f"/v1/sessions/{sid}")).status_code == 404
    rows = await query(engine, "SELECT count(*) AS n FROM segments WHERE session_id = :s", s=sid)
    assert rows == [{"n": 0}]
    r = await engine.get("/v1/context", query="spare key flowerpot")
    assert sid not in {x["source_session"] for x in r.json()["results"]}


# --- the text as turns (no engine) ---


def test_paragraphs_are_turns_and_long_ones_are_cut_at_sentence_ends() -> None:
    assert split_text("  One.\n\n\n Two\n  lines.\r\n\r\nThree  ") == [
        "One.", "Two lines.", "Three"
    ]  # fmt: skip
    sentence = "The heron stood still in the shallow water by the old mill. "
    paragraph = (sentence * 30).strip()  # 1,799 characters: two even pieces
    parts = split_text(paragraph)
    assert len(parts) == 2 and all(p.endswith("mill.") for p in parts)
    assert abs(len(parts[0]) - len(parts[1])) <= len(sentence)
    assert " ".join(parts) == paragraph


def test_a_segment_is_never_cut_inside_a_word() -> None:
    words = " ".join(f"w{i:04d}" for i in range(400))  # one 2,399-character sentence
    parts = split_text(words)
    assert len(parts) == 3 and all(len(p) <= MAX_SEGMENT_CHARS for p in parts)
    assert " ".join(parts) == words
    url = "https://example.org/" + "a" * 1500
    assert split_text(f"See {url} today.") == ["See", url, "today."]
    # No spaces at all (Japanese): cut after its full stops.
    japanese = "今日は川沿いを歩きました。" * 120
    parts = split_text(japanese)
    assert len(parts) == 2 and "".join(parts) == japanese
    assert all(p.endswith("。") for p in parts)


def test_the_default_speaker_is_the_owner() -> None:
    assert default_speaker(None) == default_speaker("  ") == "owner"
    assert default_speaker(" Farah ") == "Farah"
    assert default_speaker("x" * 200) == "x" * 128  # a segment's speaker holds 128


# --- Idempotency-Key (issue 39): a retried write is stored once ---


def keyed(key: str | bytes) -> dict[str, str | bytes]:
    return {**AUTH, "Idempotency-Key": key}


async def post_memory(engine: Engine, body: dict[str, Any], key: str | bytes) -> httpx.Response:
    return await engine.client.post("/v1/memories", json=body, headers=keyed(key))


@on_engine
async def test_a_repeat_with_the_same_key_stores_one_memory_and_answers_the_same(
    engine: Engine,
) -> None:
    body = {"text": "The boiler was serviced on Tuesday.", "at": EARLIER.isoformat()}
    key = str(uuid.uuid4())
    first = await post_memory(engine, body, key)
    assert first.status_code == 201, first.text
    assert REPLAYED_HEADER.lower() not in first.headers
    written = snapshot(transcripts(engine))
    # The retry, and the same body with a default spelt out: the first answer, nothing new.
    for repeat in (body, body | {"source": "api"}):
        again = await post_memory(engine, repeat, key)
        assert again.status_code == 201, again.text
        assert again.content == first.content
        assert again.headers[REPLAYED_HEADER] == "true"
    assert snapshot(transcripts(engine)) == written
    assert len(payloads(engine, first.json()["session_id"])) == 1
    # Kept in PostgreSQL: a new process (nothing in memory) answers it the same.
    restarted = Idempotency(PgIdempotencyStore(engine.runtime.db.main))

    async def never() -> Answer:
        raise AssertionError("a repeat must not write")

    replay = await restarted.run(MEMORIES_SCOPE, key, fingerprint_of(body), never)
    assert (replay.status, replay.body, replay.replayed) == (201, first.content, True)
    # Without a key, the same body is another memory (as before keys existed).
    plain = [await add(engine, **body) for _ in range(2)]
    assert plain[0]["session_id"] != plain[1]["session_id"]


def new_sessions(engine: Engine, before: dict[str, bytes]) -> set[str]:
    """Sessions whose JSONL appeared since `before` (a snapshot)."""
    names = set(snapshot(transcripts(engine))) - set(before)
    return {n.removesuffix(".jsonl") for n in names if n.endswith(".jsonl") and n[0] != "."}


def fingerprint_of(body: dict[str, Any]) -> str:
    return fingerprint(AddMemory.model_validate(body).model_dump(mode="json"))


@on_engine
async def test_concurrent_repeats_store_once_and_both_get_the_first_answer(
    engine: Engine,
) -> None:
    before = snapshot(transcripts(engine))
    body = {"text": "Meera's flight lands at six.", "at": EARLIER.isoformat()}
    key = str(uuid.uuid4())
    answers = await asyncio.gather(*(post_memory(engine, body, key) for _ in range(2)))
    assert [r.status_code for r in answers] == [201, 201], [r.text for r in answers]
    assert answers[0].content == answers[1].content
    assert sorted(r.headers.get(REPLAYED_HEADER, "no") for r in answers) == ["no", "true"]
    assert new_sessions(engine, before) == {answers[0].json()["session_id"]}
    assert len(payloads(engine, answers[0].json()["session_id"])) == 1


@on_engine
async def test_a_key_reused_for_another_body_is_a_409_and_nothing_is_written(
    engine: Engine,
) -> None:
    key = str(uuid.uuid4())
    first = await post_memory(engine, {"text": "Buy oat milk."}, key)
    assert first.status_code == 201, first.text
    before = snapshot(transcripts(engine))
    for other in ({"text": "Buy almond milk."}, {"text": "Buy oat milk.", "speaker": "Ravi"}):
        r = await post_memory(engine, other, key)
        assert r.status_code == 409, r.text
        assert "already used for a different request" in r.json()["detail"]
    assert snapshot(transcripts(engine)) == before


@on_engine
@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "must not be empty"),
        ("k" * (MAX_KEY_CHARS + 1), f"at most {MAX_KEY_CHARS} characters"),
        ("a\tb", "printable ASCII"),
        ("cl\xe9".encode("latin-1"), "printable ASCII"),
    ],
    ids=["empty", "too-long", "control", "not-ascii"],
)
async def test_a_malformed_key_is_a_422_naming_the_header(
    engine: Engine, key: str | bytes, reason: str
) -> None:
    before = snapshot(transcripts(engine))
    r = await post_memory(engine, {"text": "Call the plumber."}, key)
    assert r.status_code == 422, r.text
    [problem] = r.json()["detail"]
    assert problem["loc"] == ["header", "Idempotency-Key"]
    assert reason in problem["msg"]
    assert snapshot(transcripts(engine)) == before


@on_engine
async def test_a_key_is_free_again_once_its_window_has_passed(engine: Engine) -> None:
    idempotency = engine.runtime.idempotency
    key = str(uuid.uuid4())
    first = await post_memory(engine, {"text": "The car is due for its MOT."}, key)
    assert first.status_code == 201, first.text
    later = timedelta(seconds=engine.runtime.settings.idempotency_window_s + 60)
    # The engine's clock moves on a day; nothing sleeps.
    idempotency.clock = lambda: datetime.now(UTC) + later
    try:
        for text in ("The car passed its MOT.", "The car is due for its MOT."):
            r = await post_memory(engine, {"text": text}, key)
            assert r.status_code == 201, r.text  # no 409: the first use has expired
            assert REPLAYED_HEADER.lower() not in r.headers
            assert r.json()["session_id"] != first.json()["session_id"]
            key = str(uuid.uuid4())
    finally:
        idempotency.clock = lambda: datetime.now(UTC)


@on_engine
async def test_mcp_add_memory_passes_its_idempotency_key(engine: Engine) -> None:
    api = MemoryApi.in_process(engine.app, TOKEN)
    try:
        async with Client(build_server(lambda: api, read_only=False)) as mcp:
            before = snapshot(transcripts(engine))
            key = str(uuid.uuid4())
            said = "Nadia's birthday is on the ninth."
            arguments = {"episode_body": said, "idempotency_key": key}
            results = [await mcp.call_tool("add_memory", arguments) for _ in range(2)]
            assert not any(r.is_error for r in results), [r.content for r in results]
            first, again = (r.structured_content for r in results)
            assert first == again
            assert new_sessions(engine, before) == {first["session_id"]}
            # The REST route with the same key and another body (source "api") is refused.
            r = await post_memory(engine, {"text": said}, key)
            assert r.status_code == 409, r.text
            # A malformed key is the tool's error, naming the argument, not echoing it.
            bad = await mcp.call_tool("add_memory", arguments | {"idempotency_key": "é" * 3})
            assert bad.is_error
            message = "\n".join(getattr(block, "text", "") for block in bad.content)
            assert "idempotency_key: must be printable ASCII" in message, message
            assert "é" not in message and "input_value" not in message
    finally:
        await api.aclose()
