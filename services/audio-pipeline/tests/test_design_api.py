"""A client written to the design's API reference (her-os-architecture.md §6, "Audio Pipeline
(port 9100)"; Layer 1's JSONL) works: its example requests as it writes them, the fields its
answers name, its segment ids, and the background sweep. The project's own forms keep
working beside them, and a query parameter no route knows is a 422.

The design's examples below are copied as the design writes them; only the token header is
added (the project requires it on /v1, a deliberate difference).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_harness import (
    AUTH,
    events,
    eventually,
    make_settings,
    payloads,
    post,
    serving,
    two_voice_wav,
)
from design_shape import assert_shape
from speech_synth import have_espeak

from audio_pipeline.runtime import AudioRuntime
from audio_pipeline.sessions import LiveSession, SessionTranscript, SweepStatus
from audio_pipeline.wearable import WearableStream
from her_os_shared.transcript import Segment

needs_espeak = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")

# §6 POST /v1/transcribe, the request's form fields (the WAV goes in the field `audio`).
DESIGN_TRANSCRIBE_FORM = {
    "session_id": "a1b2c3d4",
    "device_id": "flutter-omi",
    "stt_backend": "auto",
    "ser_all_speakers": "false",
}
# §6 POST /v1/transcribe, the answer.
DESIGN_TRANSCRIBE_ANSWER: dict[str, Any] = {
    "segments": [
        {
            "segment_id": "f8e7d6c5",
            "speaker": "rajesh",
            "text": "Let me check that email",
            "start": 12.5,
            "end": 14.2,
            "language": "en",
            "stt_engine": "whisper",
            "emotion": {"primary": "neutral", "confidence": 0.82},
            "emotion_reason": None,
        }
    ],
    "session_id": "a1b2c3d4",
    "speakers_detected": 2,
    "processing_time_ms": 2340,
    "sweep_active": False,
}
# Layer 1, the JSONL payload (one line of data/transcripts/{session_id}.jsonl).
DESIGN_JSONL_LINE = {
    "session_id": "c9cf6c7f-7d00-4421-b774-1c33a5e7cc5b",
    "device_id": "flutter-omi",
    "session_started_at": 1709542800.0,
    "is_sweep": False,
    "segments": [
        {
            "segment_id": "seg-001-0.00-4.52",
            "speaker": "rajesh",
            "text": "I was thinking about that coffee shop on 5th street",
            "start": 0.0,
            "end": 4.52,
            "language": "en",
            "stt_engine": "whisper",
            "emotion": {"label": "excited", "score": 0.82},
        }
    ],
}


# --- without models ----------------------------------------------------------------------


def _seg(sid: str, start: float, end: float, *, pinned: bool = False) -> Segment:
    return Segment(
        segment_id=sid, speaker="a", text=sid, start=start, end=end, stt_engine="t", pinned=pinned
    )


def test_a_sessions_segments_read_like_the_context_engine_reads_its_jsonl() -> None:
    t = SessionTranscript()
    t.add([_seg("c0-0", 0, 2), _seg("c0-1", 2.5, 4), _seg("c1-0", 10, 12)], is_sweep=False)
    t.correct(_seg("c0-1", 2.5, 4, pinned=True))  # the user corrected this one
    t.add([_seg("c0-1", 2.5, 4)], is_sweep=False)  # an unpinned rewrite never beats it
    t.add([_seg("s01k000-000", 0.2, 3.0), _seg("s01k000-001", 3.0, 5.0)], is_sweep=True)
    ids = [s.segment_id for s in t.segments()]
    # Swept 0.2–5.0: the overlapped fast segment goes, the pinned one and 10–12 stay.
    assert ids == ["s01k000-000", "c0-1", "s01k000-001", "c1-0"]
    assert next(s for s in t.segments() if s.segment_id == "c0-1").pinned
    assert len(t) == 5


def _live(**state: Any) -> LiveSession:
    # Only the clock and counters matter to the rule: no speakers, no audio.
    live = LiveSession("s", "d", datetime.now(UTC), None, None)  # type: ignore[arg-type]
    for key, value in state.items():
        setattr(live, key, value)
    return live


def test_a_session_is_due_for_its_sweep_once_its_talk_paused() -> None:
    talked = {"last_speech_s": 8.0, "swept_to_s": 0.0, "last_seen": 100.0}
    assert _live(**talked).idle_sweep_due(now=130.0, idle_s=30.0)
    assert not _live(**talked).idle_sweep_due(now=129.0, idle_s=30.0)  # not paused long enough
    assert not _live(**talked | {"swept_to_s": 9.0}).idle_sweep_due(130.0, 30.0)  # all swept
    assert not _live(**talked | {"last_speech_s": 0.0}).idle_sweep_due(130.0, 30.0)  # silence
    assert not _live(**talked | {"in_flight": 1}).idle_sweep_due(130.0, 30.0)  # not settled
    assert not _live(**talked | {"idle_swept_at": 100.0}).idle_sweep_due(500.0, 30.0)  # once


async def test_the_housekeeping_tick_sweeps_paused_sessions_and_can_be_switched_off(
    tmp_path: Path,
) -> None:
    queued: list[str] = []

    def start_sweep(session_id: str) -> SweepStatus:  # what would start the models' work
        queued.append(session_id)
        return SweepStatus(1, "queued", 0.0, 5.0)

    for auto in (True, False):
        runtime = AudioRuntime(make_settings(tmp_path, sweep_auto=auto, sweep_idle_s=30.0))
        runtime.ready.set()
        runtime.start_sweep = start_sweep  # type: ignore[method-assign]
        for sid in ("talk", "wearable"):
            live = runtime.sessions.open(sid, "d")
            live.last_speech_s, live.last_seen = 5.0, 1000.0
        runtime.streams["u"] = WearableStream("u", "wearable")  # its own end sweeps it
        await runtime.tick(now=1029.0)
        assert queued == []
        await runtime.tick(now=1031.0)
        await runtime.tick(now=1060.0)  # one sweep per pause
        assert queued == (["talk"] if auto else []), auto
        queued.clear()
        await runtime.stop()


# --- the real app -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wav() -> bytes:
    return two_voice_wav()


@pytest.fixture
async def design_client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    # The service's defaults, automatic sweeps included; no pause is long enough here.
    async with serving(make_settings(tmp_path, sweep_auto=True, sweep_idle_s=3600)) as c:
        yield c


@needs_espeak
async def test_the_designs_requests_work_as_written_and_the_projects_forms_too(
    design_client: httpx.AsyncClient, tmp_path: Path, wav: bytes
) -> None:
    c, settings = design_client, make_settings(tmp_path)
    files = {"audio": ("clip.wav", wav, "audio/wav")}
    r = await c.post("/v1/transcribe", data=DESIGN_TRANSCRIBE_FORM, files=files, headers=AUTH)
    assert r.status_code == 200, r.text
    design = r.json()
    assert_shape(DESIGN_TRANSCRIBE_ANSWER | {"segments": []}, design)
    segment_keys = set(DESIGN_TRANSCRIBE_ANSWER["segments"][0])
    assert design["segments"] and all(segment_keys <= set(s) for s in design["segments"])
    assert design["speakers_detected"] == len(design["speakers"]) == 2
    assert design["processing_time_ms"] == round(design["processing_s"] * 1000)
    assert "plumber" in " ".join(s["text"] for s in design["segments"]).lower()
    # ser_all_speakers=false: emotion only for enrolled people, and nobody is enrolled.
    assert all(s["emotion"] is None and s["emotion_reason"] is None for s in design["segments"])

    # The project's form: `file`, the backend by name, emotion for every speaker (default).
    r = await post(c, wav, session_id="a1b2c3d4", stt_backend="faster-whisper")
    assert r.status_code == 200, r.text
    second = r.json()
    assert second["clip"] == 1
    # A segment too short to judge has a null emotion; the others have the design's shape.
    felt = [x for x in second["segments"] if x["emotion"] is not None]
    assert felt, second["segments"]
    assert_shape(DESIGN_TRANSCRIBE_ANSWER | {"segments": felt[:1]}, second | {"segments": felt})
    emotion = felt[0]["emotion"]
    assert (emotion["primary"], emotion["confidence"]) == (emotion["label"], emotion["score"])
    # The JSONL keeps the contract's emotion (label/score) and no answer-only field.
    written = [s for p in payloads(settings, "a1b2c3d4") for s in p.segments]
    assert len(written) == len(design["segments"]) + len(second["segments"])

    # Exactly one audio field; the backend is `auto` or the loaded one's name.
    both = {"audio": ("a.wav", wav, "audio/wav"), "file": ("f.wav", wav, "audio/wav")}
    r = await c.post("/v1/transcribe", data={"session_id": "x1"}, files=both, headers=AUTH)
    assert r.status_code == 422 and "not both" in r.json()["detail"]
    r = await c.post("/v1/transcribe", data={"session_id": "x1"}, headers=AUTH)
    assert r.status_code == 422 and "'file' or 'audio'" in r.json()["detail"]
    r = await post(c, wav, session_id="x1", stt_backend="whisperx")
    assert r.status_code == 422 and "'auto'" in r.json()["detail"]
    assert not (settings.transcripts_dir / "x1.jsonl").exists()

    # A query parameter no route declares is a 422 naming it, after the token check.
    for method, url in [
        ("GET", "/v1/session/a1b2c3d4?verbose=1"),
        ("GET", "/v1/status?details=all"),
        ("GET", "/v1/enrollment?person=asha"),
        ("POST", "/v1/session/a1b2c3d4/end?swep=false"),
        ("POST", "/v1/cleanup?older_than_s=60"),
    ]:
        r = await c.request(method, url, headers=AUTH)
        assert r.status_code == 422, (url, r.text)
        assert r.json()["detail"][0]["loc"][0] == "query", r.text
        assert (await c.request(method, url)).status_code == 401
    assert (await c.get("/v1/session/a1b2c3d4", headers=AUTH)).status_code == 200  # not ended

    # §6 "End session, return all accumulated segments": the design's bare request.
    live = (await c.get("/v1/session/a1b2c3d4", headers=AUTH)).json()
    r = await c.post("/v1/session/a1b2c3d4/end", headers=AUTH)
    assert r.status_code == 200, r.text
    ended = r.json()
    assert ended["segments"] == design["segments"] + second["segments"]
    assert ended["segments_count"] == live["segments_count"] == len(ended["segments"])
    # … and the sweep runs in the background after the session's clips (the default).
    assert ended["sweep"] is not None and ended["sweep"]["sweep"] == 1

    async def swept() -> list | None:
        return [p for p in payloads(settings, "a1b2c3d4") if p.is_sweep] or None

    sweep = await eventually(swept, "the sweep after the end")
    assert "plumber" in " ".join(s.text for p in sweep for s in p.segments).lower()

    # `?sweep=false` still ends a session without a sweep.
    assert (await post(c, wav, session_id="no-sweep")).status_code == 200
    r = await c.post("/v1/session/no-sweep/end?sweep=false", headers=AUTH)
    assert r.status_code == 200 and r.json()["sweep"] is None

    # A correction of a segment with the design's id (dots in it) from a design-era file.
    sid = DESIGN_JSONL_LINE["session_id"]
    path = settings.transcripts_dir / f"{sid}.jsonl"
    path.write_text(json.dumps(DESIGN_JSONL_LINE) + "\n")
    r = await c.post(
        "/v1/feedback",
        json={"session_id": sid, "segment_id": "seg-001-0.00-4.52", "speaker": "Rajesh"},
        headers=AUTH,
    )
    assert r.status_code == 200, r.text
    fixed = payloads(settings, sid)[-1]
    assert fixed.segments[0].segment_id == "seg-001-0.00-4.52" and fixed.segments[0].pinned
    assert fixed.session_started_at.timestamp() == 1709542800.0
    bad = {"session_id": sid, "segment_id": "../seg", "speaker": "X"}
    assert (await c.post("/v1/feedback", json=bad, headers=AUTH)).status_code == 422


@needs_espeak
async def test_a_paused_session_is_swept_in_the_background_without_being_asked(
    tmp_path: Path, wav: bytes
) -> None:
    settings = make_settings(tmp_path, sweep_auto=True, sweep_idle_s=1.0)
    async with serving(settings) as c:
        first = await post(c, wav, session_id="pause-1", device_id="flutter-omi")
        assert first.status_code == 200, first.text

        async def swept() -> dict | None:
            s = (await c.get("/v1/session/pause-1", headers=AUTH)).json()["sweep"]
            return s if s and s["state"] in ("done", "failed") else None

        status = await eventually(swept, "the sweep after the pause")
        assert status["state"] == "done" and status["sweep"] == 1, status
        lines = payloads(settings, "pause-1")
        swept_text = " ".join(s.text for p in lines if p.is_sweep for s in p.segments).lower()
        assert "plumber" in swept_text
        assert {"start", "complete"} <= {
            e["event_type"] for e in events(settings) if e["creature"] == "stingray"
        }
        # One sweep per pause: idle on, nothing new, no second sweep.
        await asyncio.sleep(2.5)
        session = (await c.get("/v1/session/pause-1", headers=AUTH)).json()
        assert session["sweep"]["sweep"] == 1
        # The end now has nothing left to sweep; it answers with the swept transcript.
        ended = (await c.post("/v1/session/pause-1/end", headers=AUTH)).json()
        assert ended["sweep"] is None
        # The sweep's segments replaced the fast path's they overlap.
        segs = ended["segments"]
        swept_spans = [(x["start"], x["end"]) for x in segs if x["segment_id"].startswith("s01")]
        assert swept_spans, segs
        for x in segs:
            if x["segment_id"].startswith("c"):
                assert all(min(x["end"], b) <= max(x["start"], a) for a, b in swept_spans), x
        starts = [x["start"] for x in segs]
        assert starts == sorted(starts)
