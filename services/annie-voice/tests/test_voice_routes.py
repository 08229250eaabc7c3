"""The voice endpoints and the pipeline's assembly from settings."""

from __future__ import annotations

import asyncio
import sys
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from annie_doubles import TOKEN, EngineDouble
from asgi_lifespan import LifespanManager
from pydantic import ValidationError

from annie_voice.app import create_app
from annie_voice.config import Settings
from annie_voice.runtime import Runtime
from annie_voice.voice.brain import AnnieLLMProcessor, TranscriptLookaheadProcessor
from annie_voice.voice.errors import VoiceBackendError
from annie_voice.voice.filters import ToolCallTextFilterProcessor, VoiceObserverProcessor
from annie_voice.voice.pipeline import VoiceModels, build_processors
from annie_voice.voice.rtc import AUDIO_PREFETCH, BUFFER_ATTR
from annie_voice.voice.stt import LocalSTTService
from annie_voice.voice.tts import SynthTTSService

AUTH = {"X-Internal-Token": TOKEN}


@asynccontextmanager
async def client(**settings: Any):
    s = Settings(internal_token=TOKEN, events_enabled=False, **settings)
    app = create_app(s, engine_transport=EngineDouble().transport())
    async with (
        LifespanManager(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
    ):
        yield c


async def test_page_is_served_without_a_token_and_takes_it_from_the_query() -> None:
    async with client() as c:
        r = await c.get("/")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    page = r.text
    for needle in ("Connect", "Disconnect", "RTCPeerConnection", "createDataChannel", "/start"):
        assert needle in page
    assert "X-Internal-Token" in page and 'searchParams.get("token")' in page
    assert "innerHTML" not in page  # untrusted text is set as textContent only


async def test_page_has_a_chat_box_that_streams_from_v1_chat() -> None:
    async with client() as c:
        page = (await c.get("/")).text
    for needle in ('<form id="ask"', 'id="question"', 'id="send"', 'fetch("/v1/chat"'):
        assert needle in page
    assert "getReader()" in page and "session_id" in page  # the stream read; the session kept
    assert "new EventSource" not in page  # it cannot POST or send the token header


async def test_start_requires_the_token_and_returns_a_session_with_its_backends() -> None:
    async with client() as c:
        assert (await c.post("/start")).status_code == 401
        r = await c.post("/start", headers=AUTH)
        assert r.status_code == 200, r.text
        body = r.json()
        assert len(body["session_id"]) == 32
        assert body["stt"] == "moonshine" and body["tts"] == "hibari"
        assert body["llm"] == "none" and body["connected"] is False
        other = (await c.post("/start", headers=AUTH)).json()["session_id"]
        assert other != body["session_id"]
        status = (await c.get("/api/status", headers=AUTH)).json()
        assert status["voice"]["sessions"] == 2


async def test_offers_require_the_token_and_a_real_sdp_offer() -> None:
    async with client() as c:
        sid = (await c.post("/start", headers=AUTH)).json()["session_id"]
        offer = {"sdp": "v=0\r\n", "type": "offer"}
        assert (await c.post(f"/sessions/{sid}/api/offer", json=offer)).status_code == 401
        assert (await c.post("/api/offer", json=offer)).status_code == 401
        assert (await c.patch(f"/sessions/{sid}/api/offer", json={})).status_code == 401
        bad = await c.post(
            f"/sessions/{sid}/api/offer", json={"sdp": "hello", "type": "offer"}, headers=AUTH
        )
        assert bad.status_code == 400 and "SDP offer" in bad.json()["detail"]
        answer = await c.post(
            f"/sessions/{sid}/api/offer", json={"sdp": "hi", "type": "answer"}, headers=AUTH
        )
        assert answer.status_code == 400
        garbled = await c.post(
            f"/sessions/{sid}/api/offer",
            json={"sdp": "v=0\r\nnot really sdp", "type": "offer"},
            headers=AUTH,
        )
        assert garbled.status_code == 400
        unknown = await c.post(f"/sessions/{'a' * 32}/api/offer", json=offer, headers=AUTH)
        assert unknown.status_code == 404
        compat = await c.post("/api/offer", json={"sdp": "nope", "type": "offer"}, headers=AUTH)
        assert compat.status_code == 400
        patch = await c.patch(
            f"/sessions/{sid}/api/offer", json={"pc_id": "x", "candidates": []}, headers=AUTH
        )
        assert patch.status_code == 400  # not connected: no pc_id belongs to it


async def test_voice_sessions_are_bounded() -> None:
    async with client(max_voice_sessions=1) as c:
        assert (await c.post("/start", headers=AUTH)).status_code == 200
        r = await c.post("/start", headers=AUTH)
        assert r.status_code == 429 and "ANNIE_VOICE_MAX_VOICE_SESSIONS" in r.json()["detail"]


async def test_the_embedded_pipeline_is_assembled_from_default_settings() -> None:
    settings = Settings(internal_token=TOKEN, events_enabled=False)
    runtime = Runtime(settings, engine_transport=EngineDouble().transport())
    try:
        processors = build_processors(
            settings, VoiceModels.from_settings(settings), runtime.chat, "s1"
        )
    finally:
        await runtime.stop()
    kinds = [type(p) for p in processors]
    assert kinds[0] is LocalSTTService and kinds[1] is VoiceObserverProcessor
    assert kinds[2] is TranscriptLookaheadProcessor  # sees transcripts before the turn ends
    llm = kinds.index(AnnieLLMProcessor)
    assert kinds[llm + 1] is ToolCallTextFilterProcessor and kinds[llm + 2] is SynthTTSService
    assert "UserAggregator" in kinds[3].__name__ and "AssistantAggregator" in kinds[-1].__name__


def test_whisper_gpu_without_cuda_fails_naming_the_setting(tmp_path: Path) -> None:
    import ctranslate2

    if ctranslate2.get_cuda_device_count() > 0:
        pytest.skip("a CUDA device is present")
    settings = Settings(internal_token=TOKEN, stt_backend="whisper-gpu", whisper_model_dir=tmp_path)
    with pytest.raises(VoiceBackendError, match="ANNIE_VOICE_STT_BACKEND=whisper-gpu"):
        VoiceModels.from_settings(settings).check()


def test_kokoro_without_its_package_fails_naming_the_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "kokoro_onnx", None)  # not importable here
    (tmp_path / "m.onnx").write_bytes(b"x")
    settings = Settings(
        internal_token=TOKEN,
        tts_backend="kokoro",
        kokoro_model_path=tmp_path / "m.onnx",
        kokoro_voices_path=tmp_path / "v.bin",
    )
    with pytest.raises(
        VoiceBackendError, match="ANNIE_VOICE_TTS_BACKEND=kokoro needs the kokoro-onnx"
    ):
        VoiceModels.from_settings(settings).check()


async def test_start_answers_503_naming_the_setting_when_a_backend_cannot_run(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "kokoro_onnx", None)
    async with client(
        tts_backend="kokoro", kokoro_model_path=tmp_path / "m", kokoro_voices_path=tmp_path / "v"
    ) as c:
        r = await c.post("/start", headers=AUTH)
    assert r.status_code == 503 and "ANNIE_VOICE_TTS_BACKEND" in r.json()["detail"]


def test_production_backends_need_their_model_settings() -> None:
    with pytest.raises(ValidationError, match="ANNIE_VOICE_WHISPER_MODEL_DIR"):
        Settings(internal_token=TOKEN, stt_backend="whisper-gpu")
    with pytest.raises(ValidationError, match="ANNIE_VOICE_KOKORO_MODEL_PATH"):
        Settings(internal_token=TOKEN, tts_backend="kokoro")


async def test_a_real_webrtc_offer_gets_an_answer_and_the_app_closes_the_connection(
    tmp_path: Path,
) -> None:
    from aiortc import RTCPeerConnection

    peer = RTCPeerConnection()
    peer.addTransceiver("audio", direction="sendrecv")
    peer.createDataChannel("chat")
    await peer.setLocalDescription(await peer.createOffer())
    offer = {"sdp": peer.localDescription.sdp, "type": "offer"}
    app = create_app(
        Settings(internal_token=TOKEN, events_enabled=False, models_dir=tmp_path),
        engine_transport=EngineDouble().transport(),
    )
    try:
        async with (
            LifespanManager(app),
            httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
        ):
            sid = (await c.post("/start", headers=AUTH)).json()["session_id"]
            r = await c.post(f"/sessions/{sid}/api/offer", json=offer, headers=AUTH)
            assert r.status_code == 200, r.text
            answer = r.json()
            assert answer["type"] == "answer" and answer["sdp"].startswith("v=0")
            assert answer["session_id"] == sid and answer["pc_id"]
            # Annie's receiver hands on each packet without aiortc's 80 ms of prefetch.
            annie_pc = app.state.runtime.voice.sessions[sid].connection.pc
            buffers = [getattr(r, BUFFER_ATTR) for r in annie_pc.getReceivers()]
            assert [b._prefetch for b in buffers] == [AUDIO_PREFETCH]
            again = await c.post(f"/sessions/{sid}/api/offer", json=offer, headers=AUTH)
            assert again.status_code == 409  # one peer connection per session
            status = (await c.get("/api/status", headers=AUTH)).json()
            assert status["voice"]["sessions"] == 1
    finally:
        await peer.close()


@pytest.mark.parametrize("stt", ["moonshine", "faster-whisper"])
async def test_the_models_load_in_the_background_at_start(tmp_path: Path, stt: str) -> None:
    settings = Settings(
        internal_token=TOKEN,
        events_enabled=False,
        voice_preload=True,
        models_dir=tmp_path,
        stt_backend=stt,
    )
    runtime = Runtime(settings, engine_transport=EngineDouble().transport())
    await runtime.start()
    try:
        assert runtime.preload is not None
        await asyncio.wait_for(runtime.preload, 300)  # a real load: seconds when the CPU is busy
        assert runtime.voice.ready
        # Whisper base is assembled from its two wheels into models_dir; Moonshine needs nothing.
        whisper = (tmp_path / "whisper-base-ct2" / "model.bin").is_file()
        assert whisper is (stt == "faster-whisper")
        assert runtime.voice.models.stt.backend == stt
        # The offline responder's openings are already spoken.
        assert set(runtime.chat.backend.phrases) <= set(runtime.voice.models.tts.cached())
        assert (await runtime.status())["voice"]["ready"] is True
    finally:
        await runtime.stop()


async def test_a_backend_that_cannot_run_does_not_stop_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "kokoro_onnx", None)
    settings = Settings(
        internal_token=TOKEN,
        events_enabled=False,
        voice_preload=True,
        tts_backend="kokoro",
        kokoro_model_path=tmp_path / "m",
        kokoro_voices_path=tmp_path / "v",
    )
    app = create_app(settings, engine_transport=EngineDouble().transport())
    async with (
        LifespanManager(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
    ):
        runtime = app.state.runtime
        await asyncio.wait_for(runtime.preload, 60)
        assert not runtime.voice.ready
        assert (await c.get("/health")).status_code == 200
        r = await c.post("/start", headers=AUTH)
    assert r.status_code == 503 and "ANNIE_VOICE_TTS_BACKEND" in r.json()["detail"]
