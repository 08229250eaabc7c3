"""The rules every service follows: /health open and bare, OpenAPI served, no unbuilt
endpoints, settings under its own prefix, and a process that refuses to start without a token."""

from __future__ import annotations

import importlib
import subprocess
import sys

import httpx
import pytest
from asgi_lifespan import LifespanManager

TOKEN = "s" * 32
SERVICES = [
    ("audio_pipeline", "AUDIO_PIPELINE", 9100),
    ("context_engine", "CONTEXT_ENGINE", 8100),
    ("annie_voice", "ANNIE_VOICE", 7860),
]
ids = [s[0] for s in SERVICES]


def _load(package: str):
    app_module = importlib.import_module(f"{package}.app")
    config_module = importlib.import_module(f"{package}.config")
    return app_module.create_app, config_module.Settings


@pytest.mark.parametrize(("package", "prefix", "port"), SERVICES, ids=ids)
def test_settings_use_the_service_prefix_and_port(package, prefix, port, monkeypatch) -> None:
    _, settings_cls = _load(package)
    assert settings_cls(internal_token=TOKEN).port == port
    monkeypatch.setenv(f"{prefix}_PORT", "12345")
    monkeypatch.setenv(f"{prefix}_INTERNAL_TOKEN", TOKEN)
    s = settings_cls()
    assert s.port == 12345 and s.internal_token.get_secret_value() == TOKEN


# The endpoints each service has built, with their methods. Endpoints that are not built yet
# are absent, never placeholders.
BUILT_ENDPOINTS: dict[str, dict[str, set[str]]] = {
    "audio_pipeline": {
        "/health": {"get"},
        "/v1/status": {"get"},
        "/v1/transcribe": {"post"},
        "/v1/enroll": {"post"},
        "/v1/enrollment": {"get", "delete"},
        "/v1/enrollment/{style}": {"delete"},
        "/v1/enrollment/persons/{person}": {"delete"},
        "/v1/session/{session_id}": {"get"},
        "/v1/session/{session_id}/end": {"post"},
        "/v1/cleanup": {"post"},
        "/v1/feedback": {"post"},
        "/v1/sweep/{session_id}": {"post"},
        "/webhook/audio": {"post"},
        "/webhook/transcript": {"post"},
    },
    "context_engine": {
        "/health": {"get"},
        "/v1/context": {"get"},
        "/v1/entities": {"get"},
        "/v1/entities/search": {"get"},
        "/v1/entities/{entity_id}": {"get", "delete"},
        "/v1/entities/{entity_id}/profile": {"get"},
        "/v1/graph/entities/{entity_id}": {"get"},
        "/v1/facts": {"get"},
        "/v1/graph/search": {"get"},
        "/v1/ingest/{session_id}": {"post"},
        "/v1/memories": {"post"},
        "/v1/sessions": {"get"},
        "/v1/sessions/{session_id}": {"get", "delete"},
        "/v1/forget": {"get", "post"},
        "/v1/forget/{request_id}": {"get"},
        "/v1/check": {"get"},
        "/v1/check/repair": {"post"},
        "/v1/stats": {"get"},
        "/v1/jobs": {"get"},
        "/v1/jobs/{job_id}/retry": {"post"},
        "/v1/consolidate": {"post"},
        "/v1/consolidate/runs": {"get"},
        "/v1/consolidate/runs/{run_id}": {"get"},
        "/v1/tiers/stats": {"get"},
        "/v1/daily": {"get"},
        "/v1/promises": {"get"},
        "/v1/promises/{entity_id}/fulfil": {"post"},
        "/v1/events/emit": {"post"},
        "/v1/events": {"get"},
        "/v1/events/stream": {"get"},
    },
    "annie_voice": {
        "/health": {"get"},
        "/v1/chat": {"post"},
        "/v1/chat/sessions": {"get"},
        "/api/status": {"get"},
        "/start": {"post"},
        "/sessions/{session_id}/api/offer": {"post", "patch"},
        "/api/offer": {"post"},
    },
}


@pytest.mark.parametrize(("package", "prefix", "port"), SERVICES, ids=ids)
def test_openapi_lists_only_built_endpoints(package, prefix, port) -> None:
    create_app, settings_cls = _load(package)
    app = create_app(settings_cls(internal_token=TOKEN))
    paths = app.openapi()["paths"]
    found = {path: set(item) - {"parameters"} for path, item in paths.items()}
    assert found == BUILT_ENDPOINTS[package]


@pytest.mark.parametrize(
    ("package", "prefix", "port"), [s for s in SERVICES if s[0] == "annie_voice"], ids=["annie"]
)
async def test_health_answers_ok_and_nothing_else(package, prefix, port) -> None:
    # (the context engine's health depends on PostgreSQL, the audio pipeline's on its models
    # being loaded: see their own tests)
    create_app, settings_cls = _load(package)
    app = create_app(settings_cls(internal_token=TOKEN))
    transport = httpx.ASGITransport(app=app)
    async with (
        LifespanManager(app),
        httpx.AsyncClient(transport=transport, base_url="http://t") as c,
    ):
        health = await c.get("/health")
        docs = await c.get("/docs")
    assert health.status_code == 200 and health.json() == {"status": "ok"}
    assert docs.status_code == 200


@pytest.mark.parametrize(("package", "prefix", "port"), SERVICES, ids=ids)
def test_process_refuses_to_start_without_a_token(package, prefix, port) -> None:
    env = {"PATH": "/usr/bin:/bin", f"{prefix}_PORT": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", package], env=env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 2
    assert f"{prefix}_INTERNAL_TOKEN" in proc.stderr
    assert "service.refused_to_start" in proc.stderr


# The token on every operation (missing, wrong, in the query), CORS, body limits and rate
# limiting after auth failures: tests/test_security.py, generated from each OpenAPI schema.
