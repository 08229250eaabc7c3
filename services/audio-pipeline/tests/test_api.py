"""The audio pipeline over HTTP: the real app, real models, synthesised two-voice speech."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import numpy as np
import pytest
from api_harness import AUTH, events, make_settings, payloads, post, running, two_voice_wav
from speech_synth import VOICE_A, VOICE_B, have_espeak, speak, to_wav_bytes

from audio_pipeline.config import Settings

pytestmark = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")


@pytest.fixture(scope="module")
def settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    return make_settings(tmp_path_factory.mktemp("audio"))


@pytest.fixture(scope="module")
def wav() -> bytes:
    return two_voice_wav()


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async for c in running(settings):
        yield c


async def test_a_clip_becomes_segments_in_the_session_file(
    client: httpx.AsyncClient, settings: Settings, wav: bytes
) -> None:
    assert (await client.get("/health")).json() == {"status": "ok"}
    r = await post(client, wav, session_id="kitchen-1", device_id="pendant")
    assert r.status_code == 200, r.text
    body = r.json()
    text = " ".join(s["text"] for s in body["segments"]).lower()
    assert "plumber" in text and "tomorrow" in text
    assert len({s["speaker"] for s in body["segments"]}) == 2
    # A second clip continues the session's clock and keeps the speakers' ids.
    r2 = await post(client, wav, session_id="kitchen-1", device_id="pendant")
    second = r2.json()
    assert second["clip"] == 1 and second["segments"][0]["start"] >= body["duration_s"]
    assert {s["speaker"] for s in second["segments"]} == {s["speaker"] for s in body["segments"]}
    lines = payloads(settings, "kitchen-1")
    assert [len(p.segments) for p in lines] == [
        len(body["segments"]),
        len(second["segments"]),
    ]
    ids = [s.segment_id for p in lines for s in p.segments]
    assert len(ids) == len(set(ids))
    assert {"siren", "seahorse", "cuttlefish", "cerberus", "hydra"} <= {
        e["creature"] for e in events(settings)
    }
    status = (await client.get("/v1/status", headers=AUTH)).json()
    assert status["ready"] and status["backends"]["stt"] == "faster-whisper"


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"", 400, "empty"),
        (b"this is plain text, not audio at all", 400, "not audio"),
        (b"RIFF\x10\x00\x00\x00WAVEfmt ", 400, ""),
        (b"fLaC\x00\x00\x00\x22" + b"\x00" * 64, 415, "FLAC"),
    ],
)
async def test_bad_uploads_get_a_clear_4xx_and_write_nothing(
    client: httpx.AsyncClient, settings: Settings, body: bytes, status: int, reason: str
) -> None:
    r = await post(client, body, session_id="bad-upload")
    assert r.status_code == status, r.text
    assert reason.lower() in r.json()["detail"].lower()
    assert not (settings.transcripts_dir / "bad-upload.jsonl").exists()


async def test_too_long_audio_is_413(client: httpx.AsyncClient) -> None:
    long = to_wav_bytes(np.zeros(16000 * 61, dtype=np.float32), 16000)
    r = await post(client, long, session_id="long-one")
    assert r.status_code == 413 and "limit" in r.json()["detail"]


async def test_hard_audio_gives_a_transcript_or_nothing_never_an_error(
    client: httpx.AsyncClient, settings: Settings
) -> None:
    """Issue 27 item 7 through the service on the default backends (segmentation speech and
    the segmented diarizer): silence, music, one word, 8 kHz, clipped and DC-offset audio."""
    import soxr

    rate = 16000
    t = np.arange(6 * rate) / rate
    chords = sum(np.sin(2 * np.pi * f * t) for f in (220.0, 277.2, 329.6, 440.0))
    music = 0.15 * chords * (0.6 + 0.4 * np.sin(2 * np.pi * 0.5 * t))
    line, line_rate = speak("The library closes at eight tonight.", VOICE_A)
    word, word_rate = speak("Tomorrow.", VOICE_B)
    narrow = soxr.resample(line, line_rate, 8000)
    cases = {
        "silence": (to_wav_bytes(np.zeros(3 * rate, dtype=np.float32), rate), None),
        "music": (to_wav_bytes(music.astype(np.float32), rate), None),
        "one word": (to_wav_bytes(word, word_rate), "tomorrow"),
        "8 khz": (to_wav_bytes(narrow.astype(np.float32), 8000), "library"),
        "clipped": (to_wav_bytes(np.clip(line * 20, -1, 1), line_rate), "library"),
        "dc offset": (to_wav_bytes((line + 0.3).astype(np.float32), line_rate), "library"),
    }
    for k, (name, (body, expected)) in enumerate(cases.items()):
        r = await post(client, body, session_id=f"hard-{k}")
        assert r.status_code == 200, (name, r.text)
        segments = r.json()["segments"]
        if expected is not None:
            assert expected in " ".join(s["text"] for s in segments).lower(), (name, segments)
    silent = await post(client, cases["silence"][0], session_id="hard-silence")
    assert silent.json()["segments"] == []
    assert not (settings.transcripts_dir / "hard-silence.jsonl").exists()


@pytest.mark.parametrize("session_id", ["../etc", "a/b", "a.b", "x" * 129, "", "héllo"])
async def test_path_tricks_in_session_ids_are_refused(
    client: httpx.AsyncClient, settings: Settings, wav: bytes, session_id: str
) -> None:
    r = await post(client, wav, session_id=session_id)
    assert r.status_code == 422
    assert not any(settings.transcripts_dir.parent.rglob("*etc*"))


async def test_the_token_is_required_and_the_backend_must_be_the_loaded_one(
    client: httpx.AsyncClient, wav: bytes
) -> None:
    r = await client.post("/v1/transcribe", data={"session_id": "s"}, files={"file": wav})
    assert r.status_code == 401
    r = await post(client, wav, session_id="s", stt_backend="whisperx")
    assert r.status_code == 422 and "AUDIO_PIPELINE_STT_BACKEND" in r.json()["detail"]


async def test_stereo_at_another_rate_is_accepted(client: httpx.AsyncClient) -> None:
    import io

    import soundfile as sf

    mono, rate = speak("The library closes at eight tonight.", VOICE_A)
    buf = io.BytesIO()
    sf.write(buf, np.stack([mono, mono * 0.5], axis=1), rate, format="WAV", subtype="FLOAT")
    r = await post(client, buf.getvalue(), session_id="stereo-1")
    assert r.status_code == 200, r.text
    assert "library" in " ".join(s["text"] for s in r.json()["segments"]).lower()


async def test_an_enrolled_voice_is_named_in_new_sessions_and_after_a_restart(
    settings: Settings, tmp_path: Path, wav: bytes
) -> None:
    own = settings.model_copy(
        update={"enrollment_dir": tmp_path / "enrollment", "transcripts_dir": tmp_path / "t"}
    )
    samples, rate = speak(
        "Hello, my name is Asha and I am recording my voice for the assistant today.", VOICE_A
    )
    async for c in running(own):
        files = {"file": ("me.wav", to_wav_bytes(samples, rate), "audio/wav")}
        r = await c.post("/v1/enroll", data={"person": "Asha"}, files=files, headers=AUTH)
        assert r.status_code == 200, r.text
        style_id = r.json()["style_id"]
        listed = (await c.get("/v1/enrollment", headers=AUTH)).json()["persons"]
        assert [p["person"] for p in listed] == ["Asha"]
        first = (await post(c, wav, session_id="after-enroll")).json()
        assert "Asha" in {s["speaker"] for s in first["segments"]}
    # A restart: the bank is read back from disk and Asha is still recognised.
    async for c in running(own):
        again = (await post(c, wav, session_id="after-restart")).json()
        plumber = next(s for s in again["segments"] if "plumber" in s["text"].lower())
        assert plumber["speaker"] == "Asha"
        assert (await c.delete(f"/v1/enrollment/{style_id}", headers=AUTH)).status_code == 200
        assert (await c.delete(f"/v1/enrollment/{style_id}", headers=AUTH)).status_code == 404
        # Forgetting a person by name (what the context engine's forget calls).
        files = {"file": ("me.wav", to_wav_bytes(samples, rate), "audio/wav")}
        r = await c.post("/v1/enroll", data={"person": "Asha"}, files=files, headers=AUTH)
        assert r.status_code == 200, r.text
        gone = await c.delete("/v1/enrollment/persons/asha", headers=AUTH)
        assert gone.status_code == 200 and gone.json() == {"deleted_persons": 1}
        assert (await c.get("/v1/enrollment", headers=AUTH)).json()["persons"] == []
        assert (await c.delete("/v1/enrollment/persons/asha", headers=AUTH)).status_code == 404
        assert (await c.delete("/v1/enrollment", headers=AUTH)).json() == {"deleted_persons": 0}


async def test_enrolling_needs_speech_and_a_real_name(client: httpx.AsyncClient) -> None:
    quiet = to_wav_bytes(np.zeros(16000 * 2, dtype=np.float32), 16000)
    files = {"file": ("quiet.wav", quiet, "audio/wav")}
    r = await client.post("/v1/enroll", data={"person": "Ravi"}, files=files, headers=AUTH)
    assert r.status_code == 422 and "speech" in r.json()["detail"]
    samples, rate = speak("This is a perfectly good sentence to enroll from.", VOICE_B)
    files = {"file": ("b.wav", to_wav_bytes(samples, rate), "audio/wav")}
    r = await client.post("/v1/enroll", data={"person": "unknown_3"}, files=files, headers=AUTH)
    assert r.status_code == 422


async def test_live_sessions_can_be_read_ended_and_cleaned(
    client: httpx.AsyncClient, wav: bytes
) -> None:
    assert (await client.get("/v1/session/never-seen", headers=AUTH)).status_code == 404
    first = (await post(client, wav, session_id="live-1")).json()
    live = (await client.get("/v1/session/live-1", headers=AUTH)).json()
    assert live["clips"] == 1 and live["audio_s"] > 0 and live["segments_count"] > 0
    ended = (await client.post("/v1/session/live-1/end", headers=AUTH)).json()
    assert ended["ended"] is True and ended["segments_count"] == live["segments_count"]
    # The end answers with the session's segments (the design's "accumulated segments").
    assert ended["segments"] == first["segments"]
    assert (await client.get("/v1/session/live-1", headers=AUTH)).status_code == 404
    assert (await client.post("/v1/session/live-1/end", headers=AUTH)).status_code == 404
    assert (await client.post("/v1/cleanup", headers=AUTH)).json() == {"removed": []}


async def test_feedback_pins_the_correction_and_names_the_voice_for_later_sessions(
    client: httpx.AsyncClient, settings: Settings, wav: bytes
) -> None:
    first = (await post(client, wav, session_id="fb-1")).json()
    target = next(s for s in first["segments"] if "plumber" in s["text"].lower())
    assert target["speaker"].startswith("unknown_")
    r = await client.post(
        "/v1/feedback",
        json={"session_id": "fb-1", "segment_id": target["segment_id"], "speaker": "Meera"},
        headers=AUTH,
    )
    assert r.status_code == 200, r.text
    assert r.json()["enrolled_style"] and r.json()["segment"]["pinned"] is True
    corrected = payloads(settings, "fb-1")[-1].segments[0]
    assert (corrected.segment_id, corrected.speaker, corrected.pinned) == (
        target["segment_id"],
        "Meera",
        True,
    )
    assert corrected.text == target["text"]  # only what was corrected changes
    r = await client.post(
        "/v1/feedback",
        json={"session_id": "fb-1", "segment_id": target["segment_id"],
              "emotion": {"label": "happy", "score": 1.0}},
        headers=AUTH,
    )  # fmt: skip
    assert r.json()["segment"]["emotion"] == {"label": "happy", "score": 1.0, "engine": "user"}
    assert r.json()["segment"]["speaker"] == "Meera"  # the pinned correction is the base
    # A new session recognises the named voice.
    later = (await post(client, wav, session_id="fb-2")).json()
    plumber = next(s for s in later["segments"] if "plumber" in s["text"].lower())
    assert plumber["speaker"] == "Meera"
    missing = {"session_id": "fb-1", "segment_id": "nope", "speaker": "X"}
    assert (await client.post("/v1/feedback", json=missing, headers=AUTH)).status_code == 404
    nothing = {"session_id": "fb-1", "segment_id": target["segment_id"]}
    assert (await client.post("/v1/feedback", json=nothing, headers=AUTH)).status_code == 422
    tricky = {"session_id": "../fb-1", "segment_id": "x", "speaker": "X"}
    assert (await client.post("/v1/feedback", json=tricky, headers=AUTH)).status_code == 422
