"""Wearable webhooks with an `Idempotency-Key` (issue 39): a re-sent batch (a transcript, an
audio chunk) is stored once and answered as the first time, concurrent re-sends too; the key
reused for another batch is a 409; a malformed key a 422; Omi's own header name works; keys
are the wearable's own (per uid); they expire after the window (the clock is moved, not
waited for) and survive a restart (the SQLite file in the spool folder). Real app."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_harness import AUTH, make_settings, payloads
from asgi_lifespan import LifespanManager
from fastapi import FastAPI

from audio_pipeline.app import create_app
from audio_pipeline.config import Settings
from her_os_shared.idempotency import HEADER, MAX_KEY_CHARS, REPLAYED_HEADER

OMI_HEADER = "X-Omi-Idempotency-Key"
SEGMENTS = [
    {"text": "Did you book the train?", "speaker": "SPEAKER_01", "speaker_id": 1,
     "is_user": False, "start": 1.5, "end": 3.0},
    {"text": "Yes, for Saturday at nine.", "speaker_id": 0, "is_user": True,
     "start": 3.2, "end": 4.9},
]  # fmt: skip
READY_S = 180.0  # models load on a slow two-core machine: a guard, not a measurement


@asynccontextmanager
async def started(
    settings: Settings, *, ready: bool
) -> AsyncIterator[tuple[FastAPI, httpx.AsyncClient]]:
    """The app and a client for it; with `ready`, once its models are loaded (the transcript
    webhook needs none, the audio one does)."""
    app = create_app(settings)
    async with (
        LifespanManager(app, startup_timeout=60, shutdown_timeout=30),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://a") as c,
    ):
        if ready:
            await asyncio.wait_for(app.state.runtime.ready.wait(), READY_S)
        yield app, c


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return make_settings(tmp_path)


async def send_transcript(
    c: httpx.AsyncClient, body: Any, key: str | bytes | None, *, uid: str = "phone1",
    header: str = HEADER, session: str = "omi-abc",
) -> httpx.Response:  # fmt: skip
    headers: dict[str, str | bytes] = dict(AUTH)
    if key is not None:
        headers[header] = key
    query = f"session_id={session}&uid={uid}"
    return await c.post(f"/webhook/transcript?{query}", json=body, headers=headers)


async def test_a_resent_transcript_is_written_once_and_answered_the_same(
    settings: Settings,
) -> None:
    async with started(settings, ready=False) as (_, c):
        key = str(uuid.uuid4())
        first = await send_transcript(c, {"segments": SEGMENTS}, key)
        assert first.status_code == 200, first.text
        assert first.json()["written"] == 2 and REPLAYED_HEADER.lower() not in first.headers
        again = await send_transcript(c, {"segments": SEGMENTS}, key)
        assert again.status_code == 200 and again.content == first.content
        assert again.headers[REPLAYED_HEADER] == "true"
        # The same batch re-serialised (its keys in another order) is the same batch.
        reordered = [dict(reversed(list(s.items()))) for s in SEGMENTS]
        assert (await send_transcript(c, {"segments": reordered}, key)).content == first.content
        assert len(payloads(settings, "omi-abc")) == 1
        # Without a key, the batch is written again (as before keys existed).
        assert (await send_transcript(c, {"segments": SEGMENTS}, None)).status_code == 200
        assert len(payloads(settings, "omi-abc")) == 2


async def test_concurrent_resends_write_once_and_share_the_answer(settings: Settings) -> None:
    async with started(settings, ready=False) as (_, c):
        key = str(uuid.uuid4())
        answers = await asyncio.gather(
            *(send_transcript(c, {"segments": SEGMENTS}, key) for _ in range(3))
        )
        assert [r.status_code for r in answers] == [200] * 3, [r.text for r in answers]
        assert len({r.content for r in answers}) == 1
        assert sorted(r.headers.get(REPLAYED_HEADER, "no") for r in answers) == [
            "no", "true", "true",
        ]  # fmt: skip
        assert len(payloads(settings, "omi-abc")) == 1


async def test_a_key_reused_for_another_batch_is_a_409_and_writes_nothing(
    settings: Settings,
) -> None:
    async with started(settings, ready=False) as (_, c):
        key = str(uuid.uuid4())
        assert (await send_transcript(c, {"segments": SEGMENTS}, key)).status_code == 200
        before = payloads(settings, "omi-abc")
        grown = [{**SEGMENTS[0], "text": "Did you book the train to Pune?"}]
        for body, session in (({"segments": grown}, "omi-abc"), ({"segments": SEGMENTS}, "s2")):
            r = await send_transcript(c, body, key, session=session)
            assert r.status_code == 409, r.text
            assert "already used for a different request" in r.json()["detail"]
        assert payloads(settings, "omi-abc") == before
        assert payloads(settings, "s2") == []


@pytest.mark.parametrize(
    ("key", "reason"),
    [
        ("", "must not be empty"),
        ("k" * (MAX_KEY_CHARS + 1), f"at most {MAX_KEY_CHARS} characters"),
        ("a\x7fb", "printable ASCII"),
        ("cl\xe9".encode("latin-1"), "printable ASCII"),
    ],
    ids=["empty", "too-long", "control", "not-ascii"],
)
async def test_a_malformed_key_is_a_422_naming_the_header(
    settings: Settings, key: str | bytes, reason: str
) -> None:
    async with started(settings, ready=False) as (_, c):
        for header in (HEADER, OMI_HEADER):
            r = await send_transcript(c, {"segments": SEGMENTS}, key, header=header)
            assert r.status_code == 422, r.text
            [problem] = r.json()["detail"]
            assert problem["loc"] == ["header", header] and reason in problem["msg"]
        assert payloads(settings, "omi-abc") == []


async def test_omis_header_name_and_keys_per_wearable(settings: Settings) -> None:
    async with started(settings, ready=False) as (_, c):
        key = str(uuid.uuid4())
        first = await send_transcript(c, {"segments": SEGMENTS}, key, header=OMI_HEADER)
        again = await send_transcript(c, {"segments": SEGMENTS}, key, header=OMI_HEADER)
        assert again.content == first.content and again.headers[REPLAYED_HEADER] == "true"
        # Another wearable's key is its own, even when the strings match.
        other = await send_transcript(c, {"segments": SEGMENTS}, key, uid="phone2")
        assert other.status_code == 200 and REPLAYED_HEADER.lower() not in other.headers
        assert len(payloads(settings, "omi-abc")) == 2


async def test_keys_survive_a_restart_and_expire_after_the_window(settings: Settings) -> None:
    key = str(uuid.uuid4())
    async with started(settings, ready=False) as (_, c):
        first = await send_transcript(c, {"segments": SEGMENTS}, key)
        assert first.status_code == 200, first.text
    assert settings.idempotency_file.parent == settings.spool_dir
    async with started(settings, ready=False) as (app, c):
        again = await send_transcript(c, {"segments": SEGMENTS}, key)
        assert again.content == first.content and again.headers[REPLAYED_HEADER] == "true"
        assert len(payloads(settings, "omi-abc")) == 1
        # A day later (the clock moves; nothing waits) the key is free: the batch is new.
        later = timedelta(seconds=settings.idempotency_window_s + 60)
        app.state.runtime.idempotency.clock = lambda: datetime.now(UTC) + later
        expired = await send_transcript(c, {"segments": SEGMENTS}, key)
        assert expired.status_code == 200 and REPLAYED_HEADER.lower() not in expired.headers
        assert len(payloads(settings, "omi-abc")) == 2


def silence(seconds: float, rate: int = 16000) -> bytes:
    return b"\x00\x00" * round(seconds * rate)


async def test_a_resent_audio_chunk_is_buffered_once(settings: Settings) -> None:
    async with started(settings, ready=True) as (_, c):
        url = "/webhook/audio?sample_rate=16000&uid=pendant1"
        octets = {**AUTH, "Content-Type": "application/octet-stream"}
        key = str(uuid.uuid4())
        first = await c.post(url, content=silence(0.5), headers={**octets, HEADER: key})
        assert first.status_code == 200, first.text
        assert first.json()["buffered_s"] == 0.5
        again = await c.post(url, content=silence(0.5), headers={**octets, HEADER: key})
        assert again.content == first.content and again.headers[REPLAYED_HEADER] == "true"
        other = await c.post(url, content=silence(0.25), headers={**octets, HEADER: key})
        assert other.status_code == 409, other.text
        # The next chunk finds one chunk buffered before it, not two.
        after = await c.post(url, content=silence(0.5), headers=octets)
        assert after.status_code == 200 and after.json()["buffered_s"] == 1.0
