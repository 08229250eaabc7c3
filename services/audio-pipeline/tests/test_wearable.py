"""Wearable webhooks (Omi-compatible): raw PCM16 chunks into sessions, and client transcripts.
Real app, real models, synthesised speech."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from api_harness import AUTH, events, eventually, make_settings, payloads, running, serving
from speech_synth import VOICE_A, VOICE_B, conversation, have_espeak, to_wav_bytes

from audio_pipeline.audio import SAMPLE_RATE, decode_audio
from audio_pipeline.config import Settings

pytestmark = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")
HOOK_TOKEN = "w" * 24
OCTETS = {"Content-Type": "application/octet-stream"}


@pytest.fixture(scope="module")
def talk() -> np.ndarray:
    samples, rate, _ = conversation(
        [
            (VOICE_A, "Remember to call the plumber about the kitchen sink."),
            (VOICE_B, "I will call him tomorrow morning before work."),
        ]
    )
    return decode_audio(to_wav_bytes(samples, rate), max_seconds=120).samples


def pcm16(samples: np.ndarray) -> bytes:
    return (np.clip(samples, -1, 1) * 32767).astype("<i2").tobytes()


def chunks(samples: np.ndarray, seconds: float, rate: int = SAMPLE_RATE) -> list[bytes]:
    step = round(seconds * rate)
    return [pcm16(samples[i : i + step]) for i in range(0, len(samples), step)]


async def send(
    c: httpx.AsyncClient, body: bytes, query: str = "sample_rate=16000&uid=pendant1", **kw: Any
) -> httpx.Response:
    headers = kw.pop("headers", {**AUTH, **OCTETS})
    return await c.post(f"/webhook/audio?{query}", content=body, headers=headers)


def wearable_settings(root: Path, **overrides: Any) -> Settings:
    base = {"webhook_token": HOOK_TOKEN, "wearable_flush_after_s": 0.5}
    return make_settings(root, **(base | overrides))


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async for c in running(wearable_settings(tmp_path)):
        yield c


async def test_chunks_are_buffered_into_a_session_and_transcribed_when_the_stream_pauses(
    client: httpx.AsyncClient, tmp_path: Path, talk: np.ndarray
) -> None:
    settings = wearable_settings(tmp_path)
    answers = [(await send(client, body)).json() for body in chunks(talk, 3.0)]
    session_id = answers[0]["session_id"]
    assert re.fullmatch(r"pendant1-\d{8}T\d{6}", session_id)
    assert {a["session_id"] for a in answers} == {session_id}
    assert answers[-1]["buffered_s"] == pytest.approx(len(talk) / SAMPLE_RATE, abs=0.01)
    assert not any(a["queued_clip"] for a in answers)  # < wearable_clip_s: still buffered

    async def transcribed() -> str | None:
        text = " ".join(s.text for p in payloads(settings, session_id) for s in p.segments)
        return text.lower() if "tomorrow" in text.lower() else None

    text = await eventually(transcribed, "the paused stream to be transcribed")
    assert "plumber" in text
    status = (await client.get("/v1/status", headers=AUTH)).json()
    assert status["wearable_streams"] == 1
    assert "jellyfish" in {e["creature"] for e in events(settings)}


async def test_a_full_buffer_is_queued_at_once_and_8_khz_is_resampled(
    tmp_path: Path, talk: np.ndarray
) -> None:
    settings = wearable_settings(tmp_path, wearable_clip_s=4.0, wearable_flush_after_s=600)
    low = talk[::2]  # 8 kHz
    async with serving(settings) as c:
        r = await send(c, pcm16(low[: 8000 * 5]), "sample_rate=8000&uid=devkit1")
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["chunk_s"] == pytest.approx(5.0) and body["queued_clip"] is True
        assert body["buffered_s"] == 0.0

        async def written() -> list | None:
            return payloads(settings, body["session_id"]) or None

        assert await eventually(written, "the queued clip to be transcribed")


async def test_a_silent_gap_ends_the_session_sweeps_it_and_starts_a_new_one(
    tmp_path: Path, talk: np.ndarray
) -> None:
    settings = wearable_settings(tmp_path, wearable_session_gap_s=2.0)
    async with serving(settings) as c:
        answers = [(await send(c, b)).json() for b in chunks(talk, 3.0)]
        first = answers[0]["session_id"]

        async def ended() -> list | None:
            done = [
                e
                for e in events(settings)
                if e["creature"] == "jellyfish" and e["event_type"] == "complete"
            ]
            return done or None

        done = await eventually(ended, "the gap to end the session")
        assert done[0]["session_id"] == first and done[0]["data"]["reason"] == "gap"
        assert done[0]["data"]["sweep"] == 1

        async def swept() -> list | None:
            return [p for p in payloads(settings, first) if p.is_sweep] or None

        sweep = await eventually(swept, "the sweep of the ended session")
        assert "plumber" in " ".join(s.text for p in sweep for s in p.segments).lower()
        assert (await c.get(f"/v1/session/{first}", headers=AUTH)).status_code == 404
        again = (await send(c, pcm16(talk[: SAMPLE_RATE * 2]))).json()
        assert again["session_id"] != first and again["session_id"].startswith("pendant1-")


async def test_webhook_auth_by_header_or_the_separate_webhook_token(
    client: httpx.AsyncClient, talk: np.ndarray
) -> None:
    body = pcm16(talk[:SAMPLE_RATE])
    q = "sample_rate=16000&uid=tok1"
    assert (await send(client, body, q, headers=OCTETS)).status_code == 401
    r = await send(client, body, f"token={HOOK_TOKEN}&{q}", headers=OCTETS)
    assert r.status_code == 200, r.text
    assert (await send(client, body, f"token={'x' * 24}&{q}", headers=OCTETS)).status_code == 401
    # The internal token is not accepted in the URL (only the webhook token is).
    assert (await send(client, body, f"token={'a' * 32}&{q}", headers=OCTETS)).status_code == 401
    # Older Omi backends append "?sample_rate=…" even when the URL already has a query.
    r = await send(client, body, f"token={HOOK_TOKEN}?{q}", headers=OCTETS)
    assert r.status_code == 200 and r.json()["session_id"].startswith("tok1-")


@pytest.mark.parametrize(
    ("query", "body", "ctype", "status", "reason"),
    [
        ("sample_rate=16000&uid=u1", b"", None, 400, "empty"),
        ("sample_rate=16000&uid=u1", b"\x01\x02\x03", None, 400, "odd byte count"),
        ("uid=u1", b"\0\0", None, 422, "sample_rate"),
        ("sample_rate=fast&uid=u1", b"\0\0", None, 422, "integer"),
        ("sample_rate=16000", b"\0\0", None, 422, "uid"),
        ("sample_rate=16000&uid=../etc", b"\0\0", None, 422, "not a valid id"),
        ("sample_rate=16000&uid=u1", b"\0\0", "application/json", 415, "octet-stream"),
    ],
)
async def test_bad_wearable_chunks_get_a_clear_4xx(
    client: httpx.AsyncClient,
    tmp_path: Path,
    query: str,
    body: bytes,
    ctype: str | None,
    status: int,
    reason: str,
) -> None:
    headers = {**AUTH, "Content-Type": ctype or "application/octet-stream"}
    r = await send(client, body, query, headers=headers)
    assert r.status_code == status, r.text
    assert reason in str(r.json()["detail"])
    assert not any((tmp_path / "transcripts").glob("*.jsonl"))


async def test_a_sample_rate_out_of_range_is_refused(client: httpx.AsyncClient) -> None:
    r = await send(client, b"\0\0" * 100, "sample_rate=100&uid=u1")
    assert 400 <= r.status_code < 500 and "rate" in r.json()["detail"].lower()


OMI_SEGMENTS = [
    {"id": "seg-1", "text": "Did you book the train?", "speaker": "SPEAKER_01",
     "speaker_id": 1, "is_user": False, "person_id": None, "start": 1.5, "end": 3.0},
    {"text": "Yes, for Saturday at nine.", "speaker": "SPEAKER_00", "speaker_id": 0,
     "is_user": True, "start": 3.2, "end": 4.9, "translations": []},
    {"text": "   ", "speaker_id": 1, "start": 5.0, "end": 5.1},
]  # fmt: skip


async def test_client_transcripts_are_written_unchanged_in_meaning(
    client: httpx.AsyncClient, tmp_path: Path
) -> None:
    settings = wearable_settings(tmp_path)
    r = await client.post(
        "/webhook/transcript?session_id=omi-abc&uid=phone1",
        json={"session_id": "omi-abc", "segments": OMI_SEGMENTS},
        headers=AUTH,
    )
    assert r.status_code == 200, r.text
    assert r.json()["written"] == 2  # the blank one is skipped
    [payload] = payloads(settings, "omi-abc")
    assert payload.device_id == "phone1" and not payload.is_sweep
    got = [(s.speaker, s.text, s.start, s.end, s.stt_engine) for s in payload.segments]
    assert got == [
        ("SPEAKER_01", "Did you book the train?", 1.5, 3.0, "client"),
        ("user", "Yes, for Saturday at nine.", 3.2, 4.9, "client"),
    ]
    # A resent, grown segment keeps its id (so the newer version wins downstream); a bare
    # list is accepted too, and the session's start time stays the first one.
    grown = [{**OMI_SEGMENTS[0], "text": "Did you book the train to Pune?"}]
    r = await client.post(
        "/webhook/transcript?session_id=omi-abc&uid=phone1", json=grown, headers=AUTH
    )
    assert r.status_code == 200
    first, second = payloads(settings, "omi-abc")
    assert second.segments[0].segment_id == first.segments[0].segment_id
    assert second.session_started_at == first.session_started_at


@pytest.mark.parametrize(
    ("query", "body", "reason"),
    [
        ("uid=p", {"segments": OMI_SEGMENTS}, "session_id is required"),
        ("session_id=../x&uid=p", {"segments": OMI_SEGMENTS}, "not a valid id"),
        ("session_id=s1", {"segments": [{"text": "hi", "start": 2, "end": 1}]}, "before start"),
        ("session_id=s1", {"segments": [{"text": "hi", "start": -1, "end": 1}]}, "start"),
        # far beyond any session (its start would be centuries ago): refused, not a 500
        ("session_id=s1", {"segments": [{"text": "hi", "start": 1e12, "end": 2e12}]}, "start"),
        ("session_id=s1", {"segments": "nope"}, "segments"),
        ("session_id=s1", "not json at all", "not JSON"),
    ],
)
async def test_bad_client_transcripts_get_422_and_write_nothing(
    client: httpx.AsyncClient, tmp_path: Path, query: str, body: Any, reason: str
) -> None:
    kwargs: dict[str, Any] = {"content": body.encode()} if isinstance(body, str) else {"json": body}
    r = await client.post(f"/webhook/transcript?{query}", headers=AUTH, **kwargs)
    assert r.status_code == 422, r.text
    assert reason in str(r.json()["detail"])
    assert not any((tmp_path / "transcripts").glob("*.jsonl"))
