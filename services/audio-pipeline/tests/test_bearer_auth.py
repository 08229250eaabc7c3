"""How a wearable or phone client authenticates (docs/wearables.md): the internal token as
`X-Internal-Token` or `Authorization: Bearer` on /v1 and on the webhooks, and the separate
webhook token as `?token=` or in a header on the webhooks only. The app's auth runs before its
runtime is touched, so these tests stand a small runtime in for the models."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_harness import TOKEN, make_settings

from audio_pipeline.app import create_app
from audio_pipeline.wearable import OmiTranscript
from her_os_shared.idempotency import Idempotency
from her_os_shared.idempotency_sqlite import SqliteIdempotencyStore

HOOK_TOKEN = "h" * 24
WRONG = "x" * 32


class RuntimeStandIn:
    """What the two routes under test call; no models."""

    def __init__(self, state_dir: Path) -> None:
        self.transcripts: list[tuple[str, str, int]] = []
        # The webhooks' idempotency keys (used only by a request that sends one).
        self.idempotency = Idempotency(SqliteIdempotencyStore(state_dir / "idempotency.sqlite3"))

    def status(self) -> dict[str, Any]:
        return {"stand_in": True}

    def wearable_transcript(
        self, session_id: str, uid: str, transcript: OmiTranscript
    ) -> dict[str, Any]:
        self.transcripts.append((session_id, uid, len(transcript.segments)))
        return {"session_id": session_id, "segments": len(transcript.segments)}


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(make_settings(tmp_path, webhook_token=HOOK_TOKEN))
    app.state.runtime = RuntimeStandIn(tmp_path)  # no lifespan: nothing loads
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://a") as c:
        yield c


@pytest.mark.parametrize(
    ("headers", "status"),
    [
        ({"Authorization": f"Bearer {TOKEN}"}, 200),
        ({"X-Internal-Token": TOKEN}, 200),
        ({"Authorization": f"Bearer {WRONG}"}, 401),
        ({}, 401),
        # The header the project always used still wins over a Bearer token.
        ({"X-Internal-Token": WRONG, "Authorization": f"Bearer {TOKEN}"}, 401),
        # The webhook token opens the webhooks only.
        ({"Authorization": f"Bearer {HOOK_TOKEN}"}, 401),
    ],
)
async def test_v1_takes_the_internal_token_as_a_bearer_header(
    client: httpx.AsyncClient, headers: dict[str, str], status: int
) -> None:
    r = await client.get("/v1/status", headers=headers)
    assert r.status_code == status, r.text
    if status == 200:
        assert r.json() == {"stand_in": True}


SEGMENTS = [{"text": "call the plumber", "speaker_id": 0, "start": 0.0, "end": 1.5}]


@pytest.mark.parametrize(
    ("query", "headers", "status"),
    [
        ("", {"Authorization": f"Bearer {TOKEN}"}, 200),
        ("", {"X-Internal-Token": TOKEN}, 200),
        (f"token={HOOK_TOKEN}&", {}, 200),  # an Omi app: the URL is all it can set
        ("", {"Authorization": f"Bearer {HOOK_TOKEN}"}, 200),  # a client that sets a header
        ("", {"Authorization": f"Bearer {WRONG}"}, 401),
        ("", {}, 401),
        # The internal token is never taken from a URL (URLs reach logs and histories).
        (f"token={TOKEN}&", {}, 401),
    ],
)
async def test_webhooks_take_either_token_in_a_header_and_the_webhook_token_in_the_url(
    client: httpx.AsyncClient, query: str, headers: dict[str, str], status: int
) -> None:
    r = await client.post(
        f"/webhook/transcript?{query}uid=pendant1&session_id=walk1", json=SEGMENTS, headers=headers
    )
    assert r.status_code == status, r.text
    if status == 200:
        assert r.json() == {"session_id": "walk1", "segments": 1}
    else:
        assert r.headers["www-authenticate"] == "Bearer"
        assert TOKEN not in r.text and HOOK_TOKEN not in r.text
