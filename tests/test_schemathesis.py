"""Schemathesis against each service's OpenAPI schema, in process (ASGI, with its lifespan:
the context engine on a real PostgreSQL, the audio pipeline with its models loaded, Annie
without an engine or LLM), with the token: no operation may answer a server error (5xx), but
for a 503 the operation documents (the graph routes without a graph, for instance).

Examples per operation are limited (HER_OS_SCHEMATHESIS_EXAMPLES, default 15) to keep CI
within budget; raise it locally to fuzz harder. Derandomized: a run is repeatable.
"""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.python import asgi

from her_os_shared.auth import TOKEN_HEADER

TOKEN = "f" * 32
AUTH = {TOKEN_HEADER: TOKEN}
EXAMPLES = int(os.environ.get("HER_OS_SCHEMATHESIS_EXAMPLES", "15"))


def fuzz(app: Any, skip: set[tuple[str, str]] = frozenset()) -> list[str]:
    """Every operation of the app's schema but /health and `skip`; the failures found."""
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    failures: list[str] = []
    for result in schema.get_all_operations():
        operation = result.ok()
        key = (operation.method.upper(), operation.path)
        if operation.path == "/health" or key in skip:
            continue

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            derandomize=True,
            database=None,
            phases=[Phase.explicit, Phase.generate],  # no shrinking: the first example will do
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy())
        def check(case: schemathesis.Case) -> None:
            try:
                response = case.call(headers=AUTH)
            except Exception as exc:  # the app raised: what a client sees as a 500
                raise AssertionError(
                    f"raised {type(exc).__name__}: {str(exc)[:300]}\n  {case.as_curl_command()}"
                ) from None
            documented_503 = "503" in (case.operation.definition.raw.get("responses") or {})
            if response.status_code >= 500 and not (response.status_code == 503 and documented_503):
                raise AssertionError(
                    f"{response.status_code} {response.text[:300]!r}\n  {case.as_curl_command()}"
                )

        try:
            check()
        except Exception as exc:  # AssertionError, or hypothesis's Flaky when it recurs once
            failures.append(f"{operation.method.upper()} {operation.path}: {exc}")
    return failures


def wait_healthy(app: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    with asgi.get_client(app) as client:  # entering starts the lifespan (kept until shutdown)
        while client.get("/health").status_code != 200:
            assert time.monotonic() < deadline, "the service never became healthy"
            time.sleep(0.2)


@pytest.fixture
def lifespans() -> Iterator[None]:
    # schemathesis starts an app's lifespan on its first request and keeps it: stop it here.
    yield
    asgi.shutdown_lifespans()


def test_annie_voice(tmp_path: Path, lifespans: None) -> None:
    from annie_voice.app import create_app
    from annie_voice.config import Settings

    app = create_app(
        Settings(
            internal_token=TOKEN,
            # nothing listens there: the offline answer, without memory
            context_engine_url="http://127.0.0.1:9",
            python_scratch_root=tmp_path / "scratch",
            voice_preload=False,
        )
    )
    assert fuzz(app) == []


def test_context_engine(postgres_server: tuple[str, str], tmp_path: Path, lifespans: None) -> None:
    from context_engine.app import create_app
    from context_engine.config import Settings

    socket_dir, user = postgres_server
    name = f"fuzz_{uuid.uuid4().hex[:12]}"

    async def create() -> None:
        conn = await asyncpg.connect(host=socket_dir, user=user, database="postgres")
        try:
            await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()

    asyncio.run(create())
    app = create_app(
        Settings(
            internal_token=TOKEN,
            database_url=f"postgresql+asyncpg://{user}@/{name}?host={socket_dir}",
            transcripts_dir=tmp_path / "transcripts",
            events_dir=tmp_path / "events",
            search_index_dir=tmp_path / "search-index",
            vector_dir=tmp_path / "vectors",
            gc_freeze=False,
        )
    )
    wait_healthy(app, 60)
    # the live stream never ends by itself; consolidation with wait=true may rightly wait for
    # minutes (timeout_s up to 3600)
    failures = fuzz(app, skip={("GET", "/v1/events/stream"), ("POST", "/v1/consolidate")})
    assert failures == [], "\n".join(failures)
    # what schemathesis found once (500s from PostgreSQL), pinned as plain requests
    with asgi.get_client(app) as c:
        assert c.post(f"/v1/jobs/{2**63}/retry", headers=AUTH).status_code == 422
        assert c.get("/v1/sessions", params={"offset": 2**63}, headers=AUTH).status_code == 422
        nul = c.post("/v1/forget", json={"person": "Pri\x00ya"}, headers=AUTH)
        assert nul.status_code == 422


def test_audio_pipeline(tmp_path: Path, lifespans: None) -> None:
    from audio_pipeline.app import create_app
    from audio_pipeline.config import Settings

    app = create_app(
        Settings(
            internal_token=TOKEN,
            transcripts_dir=tmp_path / "transcripts",
            events_dir=tmp_path / "events",
            models_dir=tmp_path / "models",
            enrollment_dir=tmp_path / "enrollment",
            spool_dir=tmp_path / "spool",
            max_audio_seconds=60,
        )
    )
    wait_healthy(app, 180)
    assert fuzz(app) == []
