"""Tokens in query strings: which routes take them (the event stream's `?token=` and the
design's `?x_internal_token=`), and that no log line of a configured service shows one,
whatever its spelling. The proof on real processes: tests/test_token_not_in_logs.py."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import httpx
import pytest
from fastapi import Depends, FastAPI
from pydantic import SecretStr

from her_os_shared.auth import TOKEN_HEADER, TOKEN_QUERY_PARAMS, require_token
from her_os_shared.logging import REDACTED_PARAMS, redact_query_tokens

TOKEN = "q" * 32


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/v1/events/stream?token=S&x=1", "/v1/events/stream?token=[redacted]&x=1"),
        (
            "/v1/events/stream?creature=otter&x_internal_token=S",
            "/v1/events/stream?creature=otter&x_internal_token=[redacted]",
        ),
        ("/v1/e?X_Internal_Token=S", "/v1/e?X_Internal_Token=[redacted]"),
        # Starlette decodes parameter names: `%74oken` is `token` to the route.
        (
            "/v1/e?%74oken=S&%78_internal_token=S",
            "/v1/e?%74oken=[redacted]&%78_internal_token=[redacted]",
        ),
        # The header's name written as a parameter: not accepted, still a token.
        ("/v1/e?X-Internal-Token=S", "/v1/e?X-Internal-Token=[redacted]"),
        ("/v1/e?access_token=S", "/v1/e?access_token=[redacted]"),
        # An old webhook client's second `?`: each parameter on its own.
        (
            "/webhook/x?uid=u?token=S?sample_rate=16000",
            "/webhook/x?uid=u?token=[redacted]?sample_rate=16000",
        ),
        ("/v1/e?token=", "/v1/e?token=[redacted]"),
        # Not secrets: other names, a name that merely contains one, a value that does.
        ("/v1/e?tokens=1&max_token=2&x=token=3", "/v1/e?tokens=1&max_token=2&x=token=3"),
        ("no query: token=S", "no query: token=S"),
        # In a JSON-rendered line the request line's quotes are escaped: the escape stays.
        (
            '{"event": "\\"GET /v1/e?token=S HTTP/1.1\\" 200"}',
            '{"event": "\\"GET /v1/e?token=[redacted] HTTP/1.1\\" 200"}',
        ),
        ('"GET /v1/e?token=S"', '"GET /v1/e?token=[redacted]"'),
    ],
)
def test_query_tokens_are_redacted_in_any_spelling(line: str, expected: str) -> None:
    assert redact_query_tokens(line) == expected


def test_every_parameter_the_auth_rule_accepts_is_redacted() -> None:
    assert set(TOKEN_QUERY_PARAMS) == {"token", "x_internal_token"}
    assert set(TOKEN_QUERY_PARAMS) <= REDACTED_PARAMS


def _app() -> FastAPI:
    app = FastAPI()
    expected = SecretStr(TOKEN)

    @app.get("/v1/stream", dependencies=[Depends(require_token(expected, allow_query=True))])
    async def stream() -> dict[str, bool]:
        return {"ok": True}

    @app.get("/v1/other", dependencies=[Depends(require_token(expected))])
    async def other() -> dict[str, bool]:
        return {"ok": True}

    return app


@pytest.mark.parametrize(
    ("params", "headers", "status"),
    [
        ({"x_internal_token": TOKEN}, {}, 200),  # the design's EventSource URL
        ({"token": TOKEN}, {}, 200),
        ({}, {TOKEN_HEADER: TOKEN}, 200),
        ({"x_internal_token": "w" * 32}, {}, 401),
        ({"X_INTERNAL_TOKEN": TOKEN}, {}, 401),  # parameter names are case-sensitive
        # The header, when given, is the one that counts; then `token`, then the design's.
        ({"x_internal_token": TOKEN}, {TOKEN_HEADER: "w" * 32}, 401),
        ({"token": "w" * 32, "x_internal_token": TOKEN}, {}, 401),
    ],
)
async def test_the_stream_takes_the_designs_query_token(
    params: dict[str, str], headers: dict[str, str], status: int
) -> None:
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        assert (await c.get("/v1/stream", params=params, headers=headers)).status_code == status
        # Only a route that asks for it takes a query token.
        assert (await c.get("/v1/other", params={"x_internal_token": TOKEN})).status_code == 401


def test_a_configured_service_logs_no_query_token() -> None:
    """configure_logging (in a child: it is process-wide), then the lines that carry URLs:
    uvicorn's access log as uvicorn calls it, httpx's request line, a traceback."""
    code = textwrap.dedent(
        """
        import logging
        from her_os_shared.logging import configure_logging
        configure_logging("demo", "debug", "json")
        access = logging.getLogger("uvicorn.access")
        for path in ("/v1/events/stream?x_internal_token=SECRET1&creature=otter",
                     "/v1/events/stream?%74oken=SECRET2", "/?token=SECRET3"):
            access.info('%s - "%s %s HTTP/%s" %d', "127.0.0.1:5", "GET", path, "1.1", 200)
        logging.getLogger("httpx").info(
            'HTTP Request: %s %s "%s %d %s"', "GET",
            "http://e:8100/v1/events/stream?x_internal_token=SECRET4", "HTTP/1.1", 200, "OK")
        try:
            raise RuntimeError("fetching /v1/events/stream?token=SECRET5 failed")
        except RuntimeError:
            logging.getLogger("demo").exception("boom")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    logs = done.stdout + done.stderr
    assert "SECRET" not in logs, logs
    assert "creature=otter HTTP" not in logs  # a /v1/ query is private as a whole
    for seen in (
        "/v1/events/stream?[redacted] HTTP/1.1",  # on /v1/ the whole query goes
        "/?token=[redacted] HTTP/1.1",
        "http://e:8100/v1/events/stream?[redacted]",  # any logger: an API query goes whole
        "/v1/events/stream?[redacted] failed",
    ):
        assert seen in logs, seen


def test_no_logger_writes_an_api_query_and_loguru_goes_through_the_formatter() -> None:
    """The owner's question in a URL (Annie asking the engine through httpx), in our own
    events and in Pipecat's loguru lines: redacted alike, and loguru's lines are the service's
    JSON at the service's level (a debug line is dropped at info)."""
    code = textwrap.dedent(
        """
        import logging
        from loguru import logger
        from her_os_shared.logging import configure_logging, get_logger
        configure_logging("demo", "info", "json")
        logging.getLogger("httpx").info(
            'HTTP Request: %s %s "%s %d %s"', "GET",
            "http://e:8100/v1/context?query=where+is+PRIVATE1&limit=6", "HTTP/1.1", 200, "OK")
        get_logger("demo").warning("slow", url="/v1/search?q=PRIVATE2")
        logger.info("asked http://e:8100/v1/context?query=PRIVATE3")
        logger.debug("PRIVATE4 at debug")
        logger.success("loguru success")
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    lines = [json.loads(x) for x in (done.stdout + done.stderr).splitlines() if x.strip()]
    assert "PRIVATE" not in json.dumps(lines), lines
    events = [x["event"] for x in lines]
    assert 'HTTP Request: GET http://e:8100/v1/context?[redacted] "HTTP/1.1 200 OK"' in events
    assert "asked http://e:8100/v1/context?[redacted]" in events
    assert any(x.get("url") == "/v1/search?[redacted]" for x in lines), lines
    loguru = {x["event"]: x for x in lines if x["logger"] == "__main__"}
    assert loguru["loguru success"]["level"] == "info"  # loguru's SUCCESS is not a level here
    assert loguru["loguru success"]["service"] == "demo"
