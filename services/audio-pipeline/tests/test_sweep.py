"""Session audio (memory, spill to disk) and the sweep: real models, synthesised speech."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from api_harness import AUTH, events, eventually, make_settings, payloads, post, running
from speech_synth import VOICE_A, VOICE_B, conversation, have_espeak, to_wav_bytes

from audio_pipeline.audio import SAMPLE_RATE, decode_audio
from audio_pipeline.pipeline import Models
from audio_pipeline.sessions import SessionAudio, SessionRegistry, SweepStatus
from audio_pipeline.speakers.enrollment import EnrollmentBank
from audio_pipeline.sweep import SweepPlan, run_sweep
from her_os_shared.transcript import Segment

needs_espeak = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")

TURNS = [
    (VOICE_A, "Remember to call the plumber about the kitchen sink."),
    (VOICE_B, "I will call him tomorrow morning before work."),
    (VOICE_A, "Also the dentist moved our appointment to Friday afternoon."),
    (VOICE_B, "Thanks, I will write that in the family calendar."),
]
WORDS = ("plumber", "tomorrow", "dentist", "family")


@pytest.fixture(scope="module")
def talk() -> np.ndarray:
    samples, rate, _ = conversation(TURNS)
    return decode_audio(to_wav_bytes(samples, rate), max_seconds=120).samples


def _ramp(seconds: float) -> np.ndarray:
    n = round(seconds * SAMPLE_RATE)
    return (np.arange(n, dtype=np.float32) % 2000 - 1000) / 1000.0 * 0.5


def test_session_audio_spills_to_disk_and_reads_back_across_the_seam(tmp_path: Path) -> None:
    audio = SessionAudio(tmp_path, "s1", memory_s=1.0, max_s=100.0)
    parts = [_ramp(0.7), _ramp(0.7), _ramp(0.7)]  # the second append passes 1 s: spilled
    for p in parts:
        audio.append(p)
    assert audio.spilled and list(tmp_path.glob("s1-*.pcm"))
    whole = np.concatenate(parts)
    expected = np.round(whole * 32767) / 32768  # PCM16 quantisation
    assert audio.kept_s == pytest.approx(2.1)
    np.testing.assert_allclose(audio.read(0, 2.1), expected, atol=1 / 32768)
    seam = audio.read(1.2, 1.6)  # from the spool file into memory
    np.testing.assert_allclose(seam, expected[19200:25600], atol=1 / 32768)
    assert len(audio.read(2.0, 9.0)) == round(0.1 * SAMPLE_RATE)  # clamped to what is kept
    audio.close()
    assert not list(tmp_path.glob("*.pcm")) and len(audio.read(0, 1)) == 0


def test_session_audio_keeps_at_most_max_s(tmp_path: Path) -> None:
    audio = SessionAudio(tmp_path, "s2", memory_s=10.0, max_s=1.0)
    audio.append(_ramp(0.8))
    audio.append(_ramp(0.8))
    assert audio.kept_s == pytest.approx(1.0)
    assert audio.dropped_s == pytest.approx(0.6)
    audio.close()


def test_a_restart_removes_spool_files_of_sessions_that_are_gone(tmp_path: Path) -> None:
    (tmp_path / "old-abc.pcm").write_bytes(b"\0\0")
    SessionRegistry(EnrollmentBank.from_settings(make_settings(tmp_path)), 60, spool_dir=tmp_path)
    assert not (tmp_path / "old-abc.pcm").exists()


@needs_espeak
def test_a_sweep_in_short_chunks_decodes_every_word_once(tmp_path: Path, talk: np.ndarray) -> None:
    # Chunks much shorter than the talk force cuts inside it; speech near each cut is redone
    # in the next chunk, so every word appears once and segments do not overlap.
    settings = make_settings(tmp_path)
    models = Models.from_settings(settings)
    models.load()
    registry = SessionRegistry(EnrollmentBank.from_settings(settings), 60, spool_dir=tmp_path)
    live = registry.open("chunked", "test")
    live.receive(talk)
    status = SweepStatus(1, "running", 0.0, live.offset_s)
    run_sweep(models, live, status, SweepPlan(chunk_s=6.0, overlap_s=2.0), settings.transcripts_dir)
    segments: list[Segment] = [s for p in payloads(settings, "chunked") for s in p.segments]
    assert status.chunks_done >= 3 and status.segments == len(segments)
    assert all(p.is_sweep for p in payloads(settings, "chunked"))
    text = " ".join(s.text for s in segments).lower()
    for word in WORDS:
        assert text.count(word) == 1, (word, text)
    ordered = sorted(segments, key=lambda s: s.start)
    assert all(a.end <= b.start + 0.05 for a, b in itertools.pairwise(ordered))
    assert status.done_to_s == pytest.approx(live.offset_s, abs=0.01)


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for c in running(make_settings(tmp_path)):
        yield c


def _overlap(a: tuple[float, float], b: tuple[float, float]) -> float:
    return max(0.0, min(a[1], b[1]) - max(a[0], b[0]))


@needs_espeak
async def test_sweep_rewrites_the_session_defers_the_fast_path_and_keeps_pinned_segments(
    client: httpx.AsyncClient, tmp_path: Path, talk: np.ndarray
) -> None:
    settings = make_settings(tmp_path)
    cut = int(len(talk) * 0.45)  # inside the second turn: a word is cut between two clips
    first, second = talk[:cut], talk[cut:]
    for part in (first, second):
        r = await post(client, to_wav_bytes(part, SAMPLE_RATE), session_id="sw-1")
        assert r.status_code == 200 and r.json()["sweep_active"] is False
    fast = [s for p in payloads(settings, "sw-1") for s in p.segments]
    pinned = fast[0]
    r = await client.post(
        "/v1/feedback",
        json={"session_id": "sw-1", "segment_id": pinned.segment_id, "speaker": "Meera"},
        headers=AUTH,
    )
    assert r.status_code == 200, r.text

    r = await client.post("/v1/sweep/sw-1", headers=AUTH)
    assert r.status_code == 202, r.text
    queued = r.json()
    assert (queued["sweep"], queued["from_s"]) == (1, 0.0)
    assert queued["to_s"] == pytest.approx(len(talk) / SAMPLE_RATE, abs=0.01)
    assert queued["state"] in ("queued", "running")
    # The contention guard: a clip arriving now is kept but not transcribed yet.
    r = await post(client, to_wav_bytes(first, SAMPLE_RATE), session_id="sw-1")
    assert r.status_code == 200
    assert (r.json()["sweep_active"], r.json()["deferred"], r.json()["segments"]) == (
        True,
        True,
        [],
    )
    again = await client.post("/v1/sweep/sw-1", headers=AUTH)
    assert again.status_code == 409 and "under way" in again.json()["detail"]

    async def swept() -> dict | None:
        s = (await client.get("/v1/session/sw-1", headers=AUTH)).json()
        done = s["sweep"]["state"] in ("done", "failed") and s["deferred_clips"] == 0
        return s if done and s["segments_count"] > len(fast) + s["sweep"]["segments"] else None

    session = await eventually(swept, "the sweep and the deferred clip")
    assert session["sweep"]["state"] == "done", session["sweep"]
    assert session["clips"] == 3 and session["swept_to_s"] == queued["to_s"]

    lines = payloads(settings, "sw-1")
    sweep_segs = [s for p in lines if p.is_sweep for s in p.segments]
    assert sweep_segs and all(s.segment_id.startswith("s01") for s in sweep_segs)
    sweep_text = " ".join(s.text for s in sweep_segs).lower()
    assert all(w in sweep_text for w in ("tomorrow", "dentist", "family"))
    # The pinned correction stands: no sweep segment mostly repeats its span.
    span = (pinned.start, pinned.end)
    assert all(_overlap((s.start, s.end), span) < 0.5 * (s.end - s.start) for s in sweep_segs)
    assert session["sweep"]["skipped_pinned"] >= 1
    # The deferred clip was transcribed after the sweep, on the session's clock.
    deferred = [s for p in lines for s in p.segments if s.segment_id.startswith("c0002")]
    assert deferred and min(s.start for s in deferred) >= queued["to_s"] - 0.01
    assert {"start", "complete"} <= {e["event_type"] for e in events(settings)
                                     if e["creature"] == "stingray"}  # fmt: skip

    # A second sweep covers only the audio since the first; then there is nothing new.
    r = await client.post("/v1/sweep/sw-1", headers=AUTH)
    assert r.status_code == 202 and r.json()["from_s"] == queued["to_s"]

    async def second_done() -> dict | None:
        s = (await client.get("/v1/session/sw-1", headers=AUTH)).json()["sweep"]
        return s if s["sweep"] == 2 and s["state"] in ("done", "failed") else None

    assert (await eventually(second_done, "the second sweep"))["state"] == "done"
    later = [s for p in payloads(settings, "sw-1") if p.is_sweep for s in p.segments]
    assert all(s.start >= queued["to_s"] - 0.01 for s in later if s.segment_id.startswith("s02"))
    r = await client.post("/v1/sweep/sw-1", headers=AUTH)
    assert r.status_code == 409 and "nothing new" in r.json()["detail"]
    ended = (await client.post("/v1/session/sw-1/end?sweep=true", headers=AUTH)).json()
    assert ended["ended"] is True and ended["sweep"] is None
    assert not list(settings.spool_dir.glob("sw-1-*.pcm"))


async def test_sweeping_an_unknown_session_is_404_and_ids_are_checked(
    client: httpx.AsyncClient,
) -> None:
    assert (await client.post("/v1/sweep/nobody", headers=AUTH)).status_code == 404
    assert (await client.post("/v1/sweep/..%2Fetc", headers=AUTH)).status_code in (404, 422)
    assert (await client.post("/v1/sweep/a.b", headers=AUTH)).status_code == 422


@needs_espeak
async def test_ending_a_session_with_sweep_sweeps_it_then_frees_its_audio(
    client: httpx.AsyncClient, tmp_path: Path, talk: np.ndarray
) -> None:
    settings = make_settings(tmp_path)
    assert (await post(client, to_wav_bytes(talk, SAMPLE_RATE), session_id="bye")).status_code
    r = await client.post("/v1/session/bye/end?sweep=true", headers=AUTH)
    assert r.status_code == 200 and r.json()["sweep"]["sweep"] == 1
    assert (await client.get("/v1/session/bye", headers=AUTH)).status_code == 404

    async def written() -> list | None:
        found = [p for p in payloads(settings, "bye") if p.is_sweep]
        return found or None

    swept = await eventually(written, "the sweep of the ended session")
    assert "plumber" in " ".join(s.text for p in swept for s in p.segments).lower()
