"""A running audio pipeline for tests (real app, real models) and helpers to talk to it.
Imported by the API, sweep and wearable tests."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx
import pytest
from asgi_lifespan import LifespanManager

from audio_pipeline.app import create_app
from audio_pipeline.config import Settings
from her_os_shared.jsonl import JsonlReader
from her_os_shared.transcript import TranscriptPayload

TOKEN = "a" * 32
AUTH = {"X-Internal-Token": TOKEN}
DEADLINE_S = 180.0  # real inference on a slow 2-core machine
T = TypeVar("T")


def make_settings(root: Path, **overrides: Any) -> Settings:
    """Settings whose every directory is under `root` (tests never write into data/)."""
    base: dict[str, Any] = {
        "internal_token": TOKEN,
        "transcripts_dir": root / "transcripts",
        "events_dir": root / "events",
        "models_dir": root / "models",
        "enrollment_dir": root / "enrollment",
        "spool_dir": root / "spool",
        "max_audio_seconds": 60,
        # Off unless a test is about it: a slow machine's pause would start a sweep that
        # races the manual sweeps the other tests count (test_design_api turns it on).
        "sweep_auto": False,
    }
    return Settings(**(base | overrides))


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The app with its models loaded, and a client for it."""
    app = create_app(settings)
    async with (
        LifespanManager(app, startup_timeout=60, shutdown_timeout=30),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://a") as c,
    ):
        await asyncio.wait_for(app.state.runtime.ready.wait(), 120)
        yield c


async def running(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """`serving` as a generator, for fixtures."""
    async with serving(settings) as c:
        yield c


async def post(c: httpx.AsyncClient, body: bytes, **form: str) -> httpx.Response:
    """POST /v1/transcribe with a WAV body and form fields."""
    files = {"file": ("clip.wav", body, "audio/wav")}
    return await c.post("/v1/transcribe", data=form, files=files, headers=AUTH)


def payloads(settings: Settings, session_id: str) -> list[TranscriptPayload]:
    path = settings.transcripts_dir / f"{session_id}.jsonl"
    return [rec.value for rec in JsonlReader(path, TranscriptPayload)] if path.exists() else []


def events(settings: Settings) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for f in sorted(settings.events_dir.glob("*.jsonl"))
        for line in f.read_text().splitlines()
    ]


async def eventually(check: Callable[[], Awaitable[T | None]], what: str) -> T:
    """Poll `check` until it returns something other than None (or fail after the deadline)."""
    deadline = asyncio.get_running_loop().time() + DEADLINE_S
    while True:
        found = await check()
        if found is not None:
            return found
        if asyncio.get_running_loop().time() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        await asyncio.sleep(0.2)


def two_voice_wav() -> bytes:
    """Two synthetic voices, a request and its answer: one clip the API tests share."""
    from speech_synth import VOICE_A, VOICE_B, conversation, to_wav_bytes

    samples, rate, _ = conversation(
        [
            (VOICE_A, "Remember to call the plumber about the kitchen sink."),
            (VOICE_B, "I will call him tomorrow morning before work."),
        ]
    )
    return to_wav_bytes(samples, rate)
