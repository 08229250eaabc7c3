"""The auth rule and the common service shape (health, body limit, startup refusal)."""

from __future__ import annotations

import httpx
import pytest
from asgi_lifespan import LifespanManager
from fastapi import Depends
from pydantic import SecretStr
from pydantic_settings import SettingsConfigDict

from her_os_shared.auth import TOKEN_HEADER, TokenConfigError, require_token, token_matches
from her_os_shared.service import HealthReport, create_service_app
from her_os_shared.settings import ServiceSettings

TOKEN = "t" * 32


class DemoSettings(ServiceSettings):
    model_config = SettingsConfigDict(env_prefix="DEMO_")
    port: int = 9999


def _app(**settings):
    settings.setdefault("internal_token", TOKEN)
    s = DemoSettings(**settings)
    failures: list[str] = []

    async def on_failure(request, reason: str) -> None:
        failures.append(reason)

    app = create_service_app(service="demo", title="demo", version="0", settings=s)

    @app.post("/v1/echo", dependencies=[Depends(require_token(s.internal_token, on_failure))])
    async def echo(body: dict) -> dict:
        return body

    query_ok = require_token(s.internal_token, on_failure, allow_query=True)

    @app.get("/v1/stream", dependencies=[Depends(query_ok)])
    async def stream() -> dict:
        return {"ok": True}

    return app, failures


async def _client(app):
    transport = httpx.ASGITransport(app=app)
    return httpx.AsyncClient(transport=transport, base_url="http://t")


def test_token_comparison() -> None:
    assert token_matches(TOKEN, TOKEN)
    assert not token_matches(None, TOKEN)
    assert not token_matches("", TOKEN)
    assert not token_matches(TOKEN + "x", TOKEN)
    assert not token_matches("é" * 8, TOKEN)  # non-ASCII input must not raise


def test_service_refuses_to_start_without_a_token(monkeypatch) -> None:
    monkeypatch.delenv("DEMO_INTERNAL_TOKEN", raising=False)
    with pytest.raises(
        TokenConfigError, match=r"DEMO_INTERNAL_TOKEN.*DEMO_ALLOW_INSECURE_NO_TOKEN"
    ):
        create_service_app(service="d", title="d", version="0", settings=DemoSettings())
    with pytest.raises(TokenConfigError, match="too short"):
        create_service_app(
            service="d", title="d", version="0", settings=DemoSettings(internal_token="short")
        )
    # The explicit development setting lets it start, with /v1 open.
    create_service_app(
        service="d", title="d", version="0", settings=DemoSettings(allow_insecure_no_token=True)
    )


def test_token_is_read_from_the_service_prefix(monkeypatch) -> None:
    monkeypatch.setenv("DEMO_INTERNAL_TOKEN", TOKEN)
    assert DemoSettings().internal_token == SecretStr(TOKEN)
    assert TOKEN not in repr(DemoSettings())  # never printed by accident


async def test_health_is_open_and_says_nothing_else() -> None:
    app, _ = _app()
    async with LifespanManager(app), await _client(app) as c:
        r = await c.get("/health")
    assert r.status_code == 200 and r.json() == {"status": "ok"}


async def test_health_reports_unavailable_when_the_check_fails() -> None:
    async def down(app) -> bool:
        return False

    s = DemoSettings(internal_token=TOKEN)
    app = create_service_app(service="d", title="d", version="0", settings=s, health_check=down)
    async with LifespanManager(app), await _client(app) as c:
        r = await c.get("/health")
    assert r.status_code == 503 and r.json() == {"status": "unavailable"}


@pytest.mark.parametrize(
    ("report", "status", "body"),
    [
        (HealthReport(ready=True), 200, {"status": "ok"}),
        (HealthReport(ready=True, degraded=("graph", "llm")), 200,
         {"status": "degraded", "degraded": ["graph", "llm"]}),
        (HealthReport(ready=False, degraded=("graph",)), 503,
         {"status": "unavailable", "degraded": ["graph"]}),
    ],
)  # fmt: skip
async def test_health_names_the_degraded_layers(
    report: HealthReport, status: int, body: dict[str, object]
) -> None:
    async def check(app) -> HealthReport:
        return report

    s = DemoSettings(internal_token=TOKEN)
    app = create_service_app(service="d", title="d", version="0", settings=s, health_check=check)
    async with LifespanManager(app), await _client(app) as c:
        r = await c.get("/health")
    assert r.status_code == status and r.json() == body


@pytest.mark.parametrize(
    ("headers", "reason"),
    [({}, "missing"), ({TOKEN_HEADER: "wrong"}, "invalid"), ({TOKEN_HEADER: ""}, "invalid")],
)
async def test_v1_requires_the_token(headers: dict, reason: str) -> None:
    app, failures = _app()
    async with LifespanManager(app), await _client(app) as c:
        r = await c.post("/v1/echo", json={"a": 1}, headers=headers)
        ok = await c.post("/v1/echo", json={"a": 1}, headers={TOKEN_HEADER: TOKEN})
    assert r.status_code == 401 and r.json() == {"detail": f"{reason} X-Internal-Token header"}
    assert failures == [reason]
    assert ok.status_code == 200 and ok.json() == {"a": 1}


async def test_oversized_bodies_get_413_with_or_without_content_length() -> None:
    app, _ = _app(max_body_bytes=2048)
    big = b'{"a":"' + b"x" * 5000 + b'"}'

    async def chunks():
        for i in range(0, len(big), 1000):
            yield big[i : i + 1000]

    headers = {TOKEN_HEADER: TOKEN, "content-type": "application/json"}
    async with LifespanManager(app), await _client(app) as c:
        declared = await c.post("/v1/echo", content=big, headers=headers)
        streamed = await c.post("/v1/echo", content=chunks(), headers=headers)
        small = await c.post("/v1/echo", json={"a": "x"}, headers=headers)
    assert declared.status_code == 413
    assert streamed.status_code == 413
    assert "larger than 2048 bytes" in streamed.json()["detail"]
    assert small.status_code == 200


async def test_a_lone_surrogate_in_invalid_input_is_a_422_not_a_500() -> None:
    """The 422 echoes the input; one holding a lone surrogate (valid JSON, not UTF-8) is
    escaped instead of failing to encode."""
    app, _ = _app()

    @app.post("/v1/typed", dependencies=[Depends(require_token(SecretStr(TOKEN), None))])
    async def typed(body: dict[str, int]) -> dict[str, int]:
        return body

    headers = {TOKEN_HEADER: TOKEN, "content-type": "application/json"}
    async with LifespanManager(app), await _client(app) as c:
        r = await c.post("/v1/typed", content=b'{"n": "\\ud800 x"}', headers=headers)
        ok = await c.post("/v1/typed", json={"n": "not a number"}, headers=headers)
    assert r.status_code == 422, r.text
    assert r.json()["detail"][0]["loc"] == ["body", "n"]
    assert r.json()["detail"][0]["input"] == "\ud800 x"
    assert ok.status_code == 422 and ok.json()["detail"][0]["input"] == "not a number"


async def test_openapi_docs_are_served() -> None:
    app, _ = _app()
    async with LifespanManager(app), await _client(app) as c:
        schema = (await c.get("/openapi.json")).json()
        docs = await c.get("/docs")
    assert "/health" in schema["paths"] and docs.status_code == 200


@pytest.mark.parametrize(
    ("params", "headers", "status", "reason"),
    [
        ({"token": TOKEN}, {}, 200, None),
        ({}, {TOKEN_HEADER: TOKEN}, 200, None),
        ({}, {}, 401, "missing"),
        ({"token": "wrong"}, {}, 401, "invalid"),
        ({"token": TOKEN + "x"}, {}, 401, "invalid"),
        # The header, when given, is the one that counts.
        ({"token": TOKEN}, {TOKEN_HEADER: "wrong"}, 401, "invalid"),
    ],
)
async def test_a_route_may_also_take_the_token_from_the_query(
    params: dict, headers: dict, status: int, reason: str | None
) -> None:
    app, failures = _app()
    async with LifespanManager(app), await _client(app) as c:
        r = await c.get("/v1/stream", params=params, headers=headers)
        header_only = await c.post("/v1/echo", json={}, params={"token": TOKEN})
    assert r.status_code == status
    if reason:
        assert r.json() == {"detail": f"{reason} X-Internal-Token header or token parameter"}
    assert header_only.status_code == 401  # only routes that ask for it take the query
    assert failures == ([reason] if reason else []) + ["missing"]


def test_tokens_in_query_strings_are_redacted_from_the_access_log() -> None:
    import subprocess
    import sys
    import textwrap

    from her_os_shared.logging import redact_query_tokens

    assert redact_query_tokens("/s?token=abc&x=1") == "/s?token=[redacted]&x=1"
    assert redact_query_tokens("/s?x=1&TOKEN=abc") == "/s?x=1&TOKEN=[redacted]"
    assert redact_query_tokens("/s?tokens=1&x=token=2") == "/s?tokens=1&x=token=2"
    # The configured logging of a service (in a child: it is process-wide), and uvicorn's
    # access-log call as uvicorn makes it.
    code = textwrap.dedent(
        """
        import logging
        from her_os_shared.logging import configure_logging
        configure_logging("demo", "info", "json")
        logging.getLogger("uvicorn.access").info(
            '%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", "/v1/s?token=SECRET&a=1", "1.1", 200
        )
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    # on /v1/ the access log drops the query whole (it may hold the owner's questions too)
    assert "SECRET" not in done.stderr and "/v1/s?[redacted] HTTP/1.1" in done.stderr
