"""The SER sidecar (emotion/sidecar.py) and the pipeline's `sidecar` emotion backend
(emotion/remote.py): the real sidecar app, on real espeak-ng speech, against the in-process
classifier; the client against the sidecar served by uvicorn on a real port; the audio
pipeline transcribing with the sidecar down and then up; and the process itself."""

from __future__ import annotations

import asyncio
import functools
import io
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
import soundfile as sf
import uvicorn
from api_harness import AUTH, TOKEN, make_settings, post, serving, two_voice_wav
from asgi_lifespan import LifespanManager
from fastapi import FastAPI
from pydantic import SecretStr, ValidationError
from speech_synth import VOICE_A, VOICE_B, have_espeak, speak, to_wav_bytes

from audio_pipeline.app import create_app as create_pipeline_app
from audio_pipeline.audio import SAMPLE_RATE, decode_audio
from audio_pipeline.config import Settings
from audio_pipeline.emotion import SpeechEmotion, create_emotion
from audio_pipeline.emotion import remote as remote_mod
from audio_pipeline.emotion import sidecar as sidecar_mod
from audio_pipeline.emotion.heuristic import HeuristicEmotion
from audio_pipeline.emotion.remote import SidecarEmotion
from audio_pipeline.emotion.wire import (
    BATCH_PATH,
    EMOTION_PATH,
    MAX_BATCH,
    STATUS_PATH,
    SidecarStatus,
    wav_bytes,
)
from audio_pipeline.runtime import AudioRuntime
from her_os_shared.transcript import Emotion

needs_espeak = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")

BEARER = {"Authorization": f"Bearer {TOKEN}"}
POSITIVE = "I love this, what a wonderful day. Everything is great!"
NEGATIVE = "I hate this. It is terrible and everything is awful."
NEUTRAL = "The meeting is on Tuesday at the office on the second floor."
DEADLINE_S = 60.0


@functools.cache
def _speech16k(text: str, voice: str) -> np.ndarray:
    """espeak-ng speech as the pipeline holds it: decoded to 16 kHz float32 mono."""
    samples, rate = speak(text, voice)
    return decode_audio(to_wav_bytes(samples, rate), max_seconds=60).samples


def _call() -> list[tuple[np.ndarray, int, str]]:
    """The segments of one clip: three sentences and a too-short blip."""
    return [
        (_speech16k(POSITIVE, VOICE_A), SAMPLE_RATE, POSITIVE),
        (_speech16k(NEGATIVE, VOICE_B), SAMPLE_RATE, NEGATIVE),
        (_speech16k(NEUTRAL, VOICE_A), SAMPLE_RATE, NEUTRAL),
        (np.full(800, 0.01, np.float32), SAMPLE_RATE, "hm"),
    ]


def _float_wav(samples: np.ndarray, rate: int) -> bytes:
    return wav_bytes(samples, rate)


def _files(*wavs: bytes) -> list[tuple[str, tuple[str, bytes, str]]]:
    return [("audio", (f"{i}.wav", w, "audio/wav")) for i, w in enumerate(wavs)]


# ---------------------------------------------------------------- the sidecar app


@asynccontextmanager
async def sidecar_client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The sidecar app, started (its classifier loaded, or failed to), and a client for it."""
    app = sidecar_mod.create_app(settings)
    async with (
        LifespanManager(app, startup_timeout=30, shutdown_timeout=10),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://ser") as c,
    ):
        runtime: sidecar_mod.SerRuntime = app.state.runtime
        deadline = time.monotonic() + DEADLINE_S
        while not runtime.ready.is_set() and runtime.load_error is None:
            assert time.monotonic() < deadline, "the classifier never loaded"
            await asyncio.sleep(0.05)
        yield c


@pytest.fixture
async def ser(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with sidecar_client(make_settings(tmp_path)) as c:
        yield c


async def test_health_and_status_say_ready_and_which_classifier(
    ser: httpx.AsyncClient, tmp_path: Path
) -> None:
    health = await ser.get("/health")
    # The shared /health: anonymous, no backend names (the classifier is in /v1/status).
    assert (health.status_code, health.json()) == (200, {"status": "ok"})
    status = await ser.get(STATUS_PATH, headers=BEARER)
    assert status.status_code == 200
    body = SidecarStatus.model_validate(status.json())
    assert (body.ready, body.classifier, body.engine) == (True, "heuristic", "heuristic")
    assert body.load_error is None and body.max_batch == MAX_BATCH
    assert body.max_audio_seconds == make_settings(tmp_path).max_audio_seconds


def test_the_sidecar_listens_on_its_own_port_by_default(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    assert settings.port == 9100 and settings.ser_port == 9101
    app = sidecar_mod.create_app(settings)
    assert app.state.settings.port == 9101


@needs_espeak
async def test_a_real_clip_gets_what_the_in_process_heuristic_gives(
    ser: httpx.AsyncClient,
) -> None:
    heuristic = HeuristicEmotion()
    for text, voice, label in ((POSITIVE, VOICE_A, "happy"), (NEGATIVE, VOICE_B, "sad")):
        samples, rate = speak(text, voice)
        wav = to_wav_bytes(samples, rate)  # espeak's own 22.05 kHz PCM16, as curl would send
        expected = heuristic.classify(decode_audio(wav, max_seconds=60).samples, SAMPLE_RATE, text)
        assert expected is not None and expected.label == label
        r = await ser.post(EMOTION_PATH, files=_files(wav), data={"text": text}, headers=BEARER)
        assert r.status_code == 200, r.text
        assert r.json() == {"emotion": expected.model_dump(), "classifier": "heuristic"}

    # What the client sends (16 kHz float32): exactly the in-process result, score included.
    samples = _speech16k(POSITIVE, VOICE_A)
    r = await ser.post(
        EMOTION_PATH,
        files=_files(_float_wav(samples, SAMPLE_RATE)),
        data={"text": POSITIVE},
        headers=BEARER,
    )
    assert Emotion.model_validate(r.json()["emotion"]) == heuristic.classify(
        samples, SAMPLE_RATE, POSITIVE
    )
    # No text: the heuristic cannot tell valence (neutral, low score), as in process.
    r = await ser.post(EMOTION_PATH, files=_files(_float_wav(samples, SAMPLE_RATE)), headers=BEARER)
    assert r.json()["emotion"] == {"label": "neutral", "score": 0.2, "engine": "heuristic"}


@needs_espeak
async def test_a_batch_is_classify_many_of_the_clip(ser: httpx.AsyncClient) -> None:
    segments = _call()
    expected = HeuristicEmotion().classify_many(segments)
    assert [e.label if e else None for e in expected] == ["happy", "sad", "neutral", None]
    r = await ser.post(
        BATCH_PATH,
        files=_files(*(_float_wav(s, rate) for s, rate, _ in segments)),
        data={"text": [text for *_, text in segments]},
        headers=BEARER,
    )
    assert r.status_code == 200, r.text
    assert r.json() == {
        "emotions": [e.model_dump() if e else None for e in expected],
        "classifier": "heuristic",
    }


def _zero_length_wav() -> bytes:
    buf = io.BytesIO()
    sf.write(buf, np.zeros(0, np.float32), SAMPLE_RATE, format="WAV", subtype="PCM_16")
    return buf.getvalue()


@pytest.mark.parametrize(
    ("body", "status", "reason"),
    [
        (b"", 400, "empty body"),
        (b"this is not audio at all", 400, "not audio"),
        (b"RIFF\x10\x00\x00\x00WAVEfmt ", 400, "corrupt WAV"),
        (b"fLaC\x00\x00\x00\x22" + b"\x00" * 40, 415, "FLAC"),
        (_zero_length_wav(), 422, "zero-length"),
    ],
    ids=["empty", "text", "truncated-wav", "flac", "zero-length"],
)
async def test_bad_audio_is_a_clear_4xx(
    ser: httpx.AsyncClient, body: bytes, status: int, reason: str
) -> None:
    r = await ser.post(EMOTION_PATH, files=_files(body), headers=BEARER)
    assert r.status_code == status, r.text
    assert reason in r.json()["detail"]
    # In a batch, the bad part is named.
    good = _float_wav(np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE)
    r = await ser.post(BATCH_PATH, files=_files(good, body), headers=BEARER)
    assert r.status_code == status, r.text
    assert r.json()["detail"].startswith("audio[1]: ")


async def test_bad_requests_are_4xx_not_500(ser: httpx.AsyncClient) -> None:
    silence = _float_wav(np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE)
    cases = [
        ser.post(EMOTION_PATH, data={"text": "no audio"}, headers=BEARER),
        ser.post(EMOTION_PATH, json={"audio": "x"}, headers=BEARER),
        ser.post(
            EMOTION_PATH,
            content=b"--nope\r\n",
            headers={**BEARER, "Content-Type": "multipart/form-data; boundary=nope"},
        ),
        ser.post(
            BATCH_PATH, files=_files(silence, silence), data={"text": ["one"]}, headers=BEARER
        ),
        ser.post(f"{EMOTION_PATH}?classifier=emotion2vec", files=_files(silence), headers=BEARER),
    ]
    for r in await asyncio.gather(*cases):
        assert 400 <= r.status_code < 500, (r.status_code, r.text)
    # Silence: a valid clip with no speech → no emotion, as in process.
    r = await ser.post(EMOTION_PATH, files=_files(silence), headers=BEARER)
    assert r.json() == {"emotion": None, "classifier": "heuristic"}


async def test_a_batch_over_the_limit_is_refused(
    ser: httpx.AsyncClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sidecar_mod, "MAX_BATCH", 2)
    silence = _float_wav(np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE)
    r = await ser.post(BATCH_PATH, files=_files(silence, silence, silence), headers=BEARER)
    assert r.status_code == 422 and "at most 2" in r.json()["detail"]


async def test_the_token_is_required(ser: httpx.AsyncClient) -> None:
    silence = _float_wav(np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE)
    for headers in ({}, {"Authorization": "Bearer " + "b" * 32}, {"X-Internal-Token": "nope"}):
        for r in (
            await ser.post(EMOTION_PATH, files=_files(silence), headers=headers),
            await ser.post(BATCH_PATH, files=_files(silence), headers=headers),
            await ser.get(STATUS_PATH, headers=headers),
        ):
            assert r.status_code == 401, r.text
            assert r.headers["WWW-Authenticate"] == "Bearer"
    # Either form of the right token.
    r = await ser.post(EMOTION_PATH, files=_files(silence), headers=AUTH)
    assert r.status_code == 200


async def test_every_operation_but_health_needs_the_token(tmp_path: Path) -> None:
    """From the app's own OpenAPI schema, so a route added later is covered too (no lifespan:
    the token is checked before a route touches the runtime)."""
    app = sidecar_mod.create_app(make_settings(tmp_path))
    paths = app.openapi()["paths"]
    assert set(paths) == {"/health", STATUS_PATH, EMOTION_PATH, BATCH_PATH}
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://ser") as c:
        for path, item in paths.items():
            for method in item if path != "/health" else ():
                r = await c.request(method.upper(), path)
                assert r.status_code == 401, (method, path)


async def test_oversized_bodies_and_audio_are_413(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, max_body_bytes=64 * 1024, max_audio_seconds=1.0)
    async with sidecar_client(settings) as c:
        big = _float_wav(np.zeros(2 * SAMPLE_RATE, np.float32), SAMPLE_RATE)  # 128 KB
        r = await c.post(EMOTION_PATH, files=_files(big), headers=BEARER)
        assert r.status_code == 413 and "request body larger than" in r.json()["detail"]
        long = to_wav_bytes(np.zeros(2 * 8000, np.float32), 8000)  # 2 s, in 32 KB
        r = await c.post(EMOTION_PATH, files=_files(long), headers=BEARER)
        assert r.status_code == 413 and "audio too long" in r.json()["detail"]


async def test_a_classifier_that_cannot_load_is_503_with_the_reason(tmp_path: Path) -> None:
    from audio_pipeline.emotion import emotion2vec

    if "funasr" not in emotion2vec.missing_packages():
        pytest.skip("funasr is installed here")
    async with sidecar_client(make_settings(tmp_path, ser_backend="emotion2vec")) as c:
        assert (await c.get("/health")).status_code == 503
        status = (await c.get(STATUS_PATH, headers=BEARER)).json()
        assert status["ready"] is False and status["classifier"] == "emotion2vec"
        # It names the sidecar's own setting, and how to get going without funasr.
        assert "AUDIO_PIPELINE_SER_BACKEND=emotion2vec cannot run here" in status["load_error"]
        assert "AUDIO_PIPELINE_SER_BACKEND=heuristic" in status["load_error"]
        silence = _float_wav(np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE)
        r = await c.post(EMOTION_PATH, files=_files(silence), headers=BEARER)
        assert r.status_code == 503 and "funasr" in r.json()["detail"]


# ---------------------------------------------------------------- served on a real port


def _bound_socket() -> socket.socket:
    """A socket bound to a free local port, not listening yet: connections are refused until
    a server listens on it (nothing else can take the port meanwhile)."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


def _url(sock: socket.socket) -> str:
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


@contextmanager
def uvicorn_serving(app: FastAPI, sock: socket.socket) -> Iterator[str]:
    """`app` under uvicorn on `sock`, in a thread, until its /health answers 200."""
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    url = _url(sock)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                if httpx.get(f"{url}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert thread.is_alive() and time.monotonic() < deadline, "the sidecar never came up"
            time.sleep(0.05)
        yield url
    finally:
        server.should_exit = True
        thread.join(15)


@pytest.fixture(scope="module")
def sidecar_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = make_settings(tmp_path_factory.mktemp("ser"))
    with uvicorn_serving(sidecar_mod.create_app(settings), _bound_socket()) as url:
        yield url


def _client(url: str, **kw: Any) -> SidecarEmotion:
    return SidecarEmotion(url, SecretStr(TOKEN), **kw)


@needs_espeak
def test_the_client_gets_what_the_in_process_classifier_gives(sidecar_url: str) -> None:
    client = _client(sidecar_url)
    assert isinstance(client, SpeechEmotion)
    heuristic = HeuristicEmotion()
    segments = _call()
    assert client.classify_many(segments) == heuristic.classify_many(segments)
    for samples, rate, text in segments:
        assert client.classify(samples, rate, text) == heuristic.classify(samples, rate, text)
    assert client.classify_many([]) == []
    assert client.engine == "heuristic"  # learnt from the sidecar's answers
    status = client.sidecar_status()
    assert status["configured"] is True and status["url"] == sidecar_url
    assert (status["reachable"], status["ready"], status["error"]) == (True, True, None)
    assert (status["classifier"], status["engine"]) == ("heuristic", "heuristic")
    assert not client.degraded
    client.close()


def test_the_probe_reads_the_sidecars_status(sidecar_url: str) -> None:
    client = _client(sidecar_url)
    assert client.probe_due()
    state = client.probe()
    assert (state.reachable, state.ready, state.classifier) == (True, True, "heuristic")
    assert not client.probe_due()
    # A wrong token: reached, but refused; said in the status, never raised.
    wrong = SidecarEmotion(sidecar_url, SecretStr("w" * 32))
    state = wrong.probe()
    assert state.reachable is True and "HTTP 401" in (state.error or "")
    assert wrong.classify(np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE, "x") is None
    assert wrong.degraded


def test_an_unreachable_sidecar_costs_the_emotion_only(
    caplog: pytest.LogCaptureFixture,
) -> None:
    sock = _bound_socket()  # nothing listens: connection refused
    client = _client(_url(sock), retries=0)
    segments = [(np.zeros(SAMPLE_RATE, np.float32), SAMPLE_RATE, "hello")] * 2
    assert client.classify_many(segments) == [None, None]
    status = client.sidecar_status()
    assert status["reachable"] is False and status["ready"] is None
    assert f"cannot reach {_url(sock)}" in str(status["error"])
    assert status["checked_at"] is not None and client.degraded
    sock.close()


class Recorder:
    """An httpx transport answering like a sidecar (or not), recording each request."""

    def __init__(self, answer: Callable[[httpx.Request], httpx.Response]) -> None:
        self.requests: list[httpx.Request] = []
        self.answer = answer

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        return self.answer(request)

    def client(self, **kw: Any) -> SidecarEmotion:
        return _client("http://ser:9101", transport=httpx.MockTransport(self), **kw)


def _batch_of(request: httpx.Request) -> int:
    return request.content.count(b'name="audio"')


def test_failures_degrade_with_the_reason_and_back_off() -> None:
    def loading(request: httpx.Request) -> httpx.Response:
        return httpx.Response(503, json={"detail": "the emotion classifier is loading"})

    seen = Recorder(loading)
    client = seen.client(retry_after_s=60)
    one = [(np.ones(SAMPLE_RATE, np.float32) * 0.1, SAMPLE_RATE, "hi")]
    assert client.classify_many(one) == [None]
    status = client.sidecar_status()
    assert (status["reachable"], status["ready"]) == (True, False)
    assert status["error"] == "HTTP 503: the emotion classifier is loading"
    # Backing off: the next segments get no emotion without a request.
    assert client.classify_many(one) == [None] and client.classify(*one[0]) is None
    assert len(seen.requests) == 1
    # The token travels as a Bearer token.
    assert seen.requests[0].headers["Authorization"] == f"Bearer {TOKEN}"


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (lambda r: httpx.Response(200, content=b"<html>"), "bad answer"),
        (lambda r: httpx.Response(200, json={"emotions": [], "classifier": "x"}), "0 emotions"),
        (
            lambda r: httpx.Response(
                200, json={"emotions": [{"label": "Angry!", "score": 2}], "classifier": "x"}
            ),
            "bad answer",
        ),
        (lambda r: httpx.Response(500, text="Internal Server Error"), "HTTP 500"),
    ],
    ids=["not-json", "short", "invalid-emotion", "500"],
)
def test_nonsense_answers_cost_the_emotion_only(
    answer: Callable[[httpx.Request], httpx.Response], reason: str
) -> None:
    client = Recorder(answer).client()
    one = [(np.ones(SAMPLE_RATE, np.float32) * 0.1, SAMPLE_RATE, "hi")]
    assert client.classify_many(one) == [None]
    assert reason in str(client.sidecar_status()["error"])


def test_a_slow_sidecar_times_out() -> None:
    def slow(request: httpx.Request) -> httpx.Response:
        raise httpx.ReadTimeout("timed out", request=request)

    client = Recorder(slow).client(timeout_s=2.5)
    assert client.classify(np.ones(100, np.float32), SAMPLE_RATE, "") is None
    assert client.sidecar_status()["error"] == "no answer from http://ser:9101 within 2.5 s"


def test_a_long_call_is_split_into_batches_in_order(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(remote_mod, "MAX_BATCH", 2)

    def answer(request: httpx.Request) -> httpx.Response:
        # Echo each segment's text back as its score, so the order can be checked.
        texts = [
            part.split(b"\r\n\r\n", 1)[1].split(b"\r\n", 1)[0].decode()
            for part in request.content.split(b'name="text"')[1:]
        ]
        emotions = [{"label": "neutral", "score": float(t), "engine": "fake"} for t in texts]
        return httpx.Response(200, json={"emotions": emotions, "classifier": "fake"})

    seen = Recorder(answer)
    client = seen.client()
    speech = np.ones(SAMPLE_RATE, np.float32) * 0.1
    empty = np.zeros(0, np.float32)
    segments = [(speech, SAMPLE_RATE, f"0.{i}") for i in range(5)]
    segments.insert(2, (empty, SAMPLE_RATE, "0.9"))  # no audio: not sent, no emotion
    found = client.classify_many(segments)
    assert [e.score if e else None for e in found] == [0.0, 0.1, None, 0.2, 0.3, 0.4]
    assert [_batch_of(r) for r in seen.requests] == [2, 2, 1]
    assert all(r.url.path == BATCH_PATH for r in seen.requests)
    # Long audio is split too, so a request stays under the sidecar's body limit.
    monkeypatch.setattr(remote_mod, "MAX_BATCH", 256)
    monkeypatch.setattr(remote_mod, "MAX_BATCH_SAMPLES", 2 * SAMPLE_RATE)
    seen.requests.clear()
    found = client.classify_many(segments)
    assert [e.score if e else None for e in found] == [0.0, 0.1, None, 0.2, 0.3, 0.4]
    assert [_batch_of(r) for r in seen.requests] == [2, 2, 1]


def test_connections_are_retried_with_backoff() -> None:
    sock = _bound_socket()
    timings = {}
    for retries in (0, 2):
        client = _client(_url(sock), retries=retries)
        started = time.monotonic()
        assert client.classify(np.ones(100, np.float32), SAMPLE_RATE, "") is None
        timings[retries] = time.monotonic() - started
    # httpx's backoff between the attempts: 0 s, then 0.5 s.
    assert timings[2] >= 0.45 > timings[0]
    sock.close()


# ---------------------------------------------------------------- settings


def test_the_sidecar_backend_needs_its_url(tmp_path: Path, monkeypatch) -> None:
    for url in (None, ""):
        with pytest.raises(ValidationError) as info:
            make_settings(tmp_path, emotion_backend="sidecar", ser_url=url)
        message = str(info.value)
        assert "AUDIO_PIPELINE_EMOTION_BACKEND=sidecar needs AUDIO_PIPELINE_SER_URL" in message
    with pytest.raises(ValidationError, match="must be an http"):
        make_settings(tmp_path, emotion_backend="sidecar", ser_url="ser:9101")
    # From the environment, as compose sets it; a trailing slash is dropped.
    monkeypatch.setenv("AUDIO_PIPELINE_EMOTION_BACKEND", "sidecar")
    monkeypatch.setenv("AUDIO_PIPELINE_SER_URL", "http://ser:9101/")
    settings = Settings(internal_token=TOKEN)
    assert settings.ser_url == "http://ser:9101"
    # Building the backend contacts nothing (the sidecar may start after the pipeline).
    emotion = create_emotion(settings)
    assert isinstance(emotion, SidecarEmotion) and emotion.name == "sidecar"
    assert emotion.sidecar_status()["reachable"] is None
    emotion.close()
    # Unset, the embedded default stays in process.
    monkeypatch.delenv("AUDIO_PIPELINE_EMOTION_BACKEND")
    assert isinstance(create_emotion(Settings(internal_token=TOKEN)), HeuristicEmotion)


def test_the_pipeline_refuses_to_start_without_the_url(tmp_path: Path) -> None:
    env = _clean_env(tmp_path, AUDIO_PIPELINE_EMOTION_BACKEND="sidecar")
    done = subprocess.run(
        [sys.executable, "-m", "audio_pipeline"], env=env, capture_output=True, text=True,
        timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode != 0
    assert "AUDIO_PIPELINE_SER_URL" in done.stderr


# ---------------------------------------------------------------- the audio pipeline with it


@asynccontextmanager
async def pipeline_serving(
    settings: Settings,
) -> AsyncIterator[tuple[httpx.AsyncClient, AudioRuntime]]:
    """The audio pipeline app with its models loaded, a client for it, and its runtime."""
    app = create_pipeline_app(settings)
    async with (
        LifespanManager(app, startup_timeout=60, shutdown_timeout=30),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://a") as c,
    ):
        runtime: AudioRuntime = app.state.runtime
        await asyncio.wait_for(runtime.ready.wait(), 120)
        yield c, runtime


@needs_espeak
async def test_the_pipeline_transcribes_with_the_sidecar_down_then_up(tmp_path: Path) -> None:
    sock = _bound_socket()
    settings = make_settings(tmp_path, emotion_backend="sidecar", ser_url=_url(sock))
    wav = two_voice_wav()
    async with pipeline_serving(settings) as (c, runtime):
        emotion = runtime.models.emotion
        assert isinstance(emotion, SidecarEmotion)
        # Down: the segments are transcribed and stored, without emotion; the status says why.
        r = await post(c, wav, session_id="ser-down")
        assert r.status_code == 200, r.text
        segments = r.json()["segments"]
        assert segments and all(s["text"] and s["emotion"] is None for s in segments)
        stored = _stored(settings, "ser-down")
        assert stored and all(s["emotion"] is None for s in stored)
        ser = (await c.get("/v1/status", headers=AUTH)).json()["ser"]
        assert ser["configured"] is True and ser["reachable"] is False
        assert "cannot reach" in ser["error"]
        health = await c.get("/health")
        assert health.json() == {"status": "degraded", "degraded": ["emotion"]}

        # Up (and the back-off waived): the same clip gets the sidecar's emotions.
        sidecar_app = sidecar_mod.create_app(make_settings(tmp_path / "ser"))
        with uvicorn_serving(sidecar_app, sock):
            emotion.retry_after_s = 0
            r = await post(c, wav, session_id="ser-up")
            assert r.status_code == 200, r.text
            labelled = [s["emotion"] for s in r.json()["segments"] if s["emotion"]]
            assert labelled and all(e["engine"] == "heuristic" for e in labelled)
            ser = (await c.get("/v1/status", headers=AUTH)).json()["ser"]
            assert (ser["reachable"], ser["ready"], ser["error"]) == (True, True, None)
            assert (ser["classifier"], ser["engine"]) == ("heuristic", "heuristic")
            assert (await c.get("/health")).json() == {"status": "ok"}


def _stored(settings: Settings, session_id: str) -> list[dict[str, Any]]:
    path = settings.transcripts_dir / f"{session_id}.jsonl"
    return [seg for line in path.read_text().splitlines() for seg in json.loads(line)["segments"]]


async def test_in_process_emotion_reports_no_sidecar(tmp_path: Path) -> None:
    async with serving(make_settings(tmp_path)) as c:
        ser = (await c.get("/v1/status", headers=AUTH)).json()["ser"]
        assert ser == {
            "configured": False, "url": None, "reachable": None, "ready": None,
            "classifier": "heuristic", "engine": "heuristic", "error": None, "checked_at": None,
        }  # fmt: skip
        assert (await c.get("/health")).json() == {"status": "ok"}


# ---------------------------------------------------------------- the process


def _clean_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AUDIO_PIPELINE_")}
    env.update(
        AUDIO_PIPELINE_INTERNAL_TOKEN=TOKEN,
        AUDIO_PIPELINE_MODELS_DIR=str(tmp_path / "models"),
        AUDIO_PIPELINE_LOG_FORMAT="json",
        **extra,
    )
    return env


def test_python_m_runs_the_sidecar_with_structured_logs(tmp_path: Path) -> None:
    sock = _bound_socket()
    port = sock.getsockname()[1]
    sock.close()  # the process binds it itself
    env = _clean_env(tmp_path, AUDIO_PIPELINE_SER_PORT=str(port))
    proc = subprocess.Popen(
        [sys.executable, "-m", "audio_pipeline.emotion.sidecar"],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the sidecar process never came up"
            time.sleep(0.1)
        r = httpx.get(f"http://127.0.0.1:{port}{STATUS_PATH}", headers=BEARER, timeout=5)
        assert r.json()["classifier"] == "heuristic"
    finally:
        proc.terminate()
        _, stderr = proc.communicate(timeout=30)
    lines = [json.loads(line) for line in stderr.splitlines() if line.startswith("{")]
    started = next(e for e in lines if e["event"] == "service.starting")
    assert (started["service"], started["port"]) == ("ser", port)
    assert any(e["event"] == "ser.loaded" and e["classifier"] == "heuristic" for e in lines)
    assert TOKEN not in stderr
