"""The security rules of every service, checked on each service's real app and generated from
its OpenAPI schema where they concern routes: the token on every operation, the token never
in logs, constant-time comparison only, CORS only for the dashboard, body limits, and rate
limiting after repeated auth failures. (Apps run without their lifespan: every check here
happens before a route touches the service's runtime.)"""

from __future__ import annotations

import ast
import asyncio
import contextlib
import importlib
import logging
import re
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import structlog
import uvicorn
from fastapi import FastAPI

from her_os_shared.logging import configure_logging
from her_os_shared.service import server_config

ROOT = Path(__file__).resolve().parents[1]
TOKEN = "Tk" + "9" * 30  # distinctive, so a leak is found by plain search
WRONG = "W" * 32
PACKAGES = ["audio_pipeline", "context_engine", "annie_voice"]
DASHBOARD = "http://127.0.0.1:5174"


def build(package: str, **settings: Any):
    app_module = importlib.import_module(f"{package}.app")
    config_module = importlib.import_module(f"{package}.config")
    return app_module.create_app(
        config_module.Settings(**{"internal_token": TOKEN, "auth_failure_limit": 0, **settings})
    )


def operations(app) -> list[tuple[str, str, dict]]:
    """(METHOD, concrete path, operation) for every operation but /health."""
    return [
        (method.upper(), re.sub(r"\{[^}]+\}", "x1", path), op)
        for path, item in app.openapi()["paths"].items()
        if path != "/health"
        for method, op in item.items()
        if method != "parameters"
    ]


def client(app, host: str = "127.0.0.1") -> httpx.AsyncClient:
    # raise_app_exceptions=False: a handler that needs the (absent) runtime answers 500
    # instead of raising here; these checks all happen before that.
    transport = httpx.ASGITransport(app=app, client=(host, 50000), raise_app_exceptions=False)
    return httpx.AsyncClient(transport=transport, base_url="http://t")


@pytest.mark.parametrize("package", PACKAGES)
async def test_every_operation_refuses_a_missing_or_wrong_token(package: str) -> None:
    app = build(package)
    ops = operations(app)
    assert any(path.startswith("/v1/") for _, path, _ in ops)
    async with client(app) as c:
        for method, path, _ in ops:
            for headers in ({}, {"X-Internal-Token": WRONG}, {"X-Internal-Token": TOKEN[:-1]}):
                r = await c.request(method, path, headers=headers)
                assert r.status_code in (401, 403), f"{method} {path} {headers}: {r.status_code}"
            # a query token counts only where a route asks for it, and never a wrong one
            r = await c.request(method, path, params={"token": WRONG})
            assert r.status_code in (401, 403), f"{method} {path}?token=: {r.status_code}"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def service_logging() -> Iterator[None]:
    """configure_logging is process-wide: put pytest's logging back afterwards."""
    root = logging.getLogger()
    names = ("uvicorn", "uvicorn.error", "uvicorn.access")
    saved = (root.handlers[:], root.level, structlog.get_config())
    saved_named = {
        n: (logging.getLogger(n).handlers[:], logging.getLogger(n).propagate) for n in names
    }
    yield
    root.handlers[:], level, config = saved
    root.setLevel(level)
    structlog.configure(**config)
    for n, (handlers, propagate) in saved_named.items():
        logging.getLogger(n).handlers[:] = handlers
        logging.getLogger(n).propagate = propagate
    structlog.contextvars.clear_contextvars()


@contextlib.asynccontextmanager
async def served(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    """The app under real uvicorn as `serve` configures it (server_config; no lifespan), and
    a client for it."""
    config = server_config(app, app.state.settings)
    config.lifespan = "off"
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:  # noqa: ASYNC110 (uvicorn offers only this flag)
            await asyncio.sleep(0.02)
        base = f"http://127.0.0.1:{app.state.settings.port}"
        async with httpx.AsyncClient(base_url=base, timeout=10) as client:
            yield client
    finally:
        server.should_exit = True
        await serving


@pytest.mark.parametrize("package", PACKAGES)
async def test_the_token_never_reaches_the_logs(package: str, capfd, service_logging) -> None:
    """Structured logs and uvicorn's access log (debug level, as `serve` runs it), through
    requests with the token in the header and in `?token=` — right and wrong."""
    port = _free_port()
    app = build(package, log_level="debug", port=port)
    configure_logging(package, "debug", "json")
    ops = [(m, p) for m, p, _ in operations(app) if m == "GET" and p.startswith("/v1/")]
    async with served(app) as c:
        for method, path in ops:
            for token in (TOKEN, WRONG + TOKEN):
                await c.request(method, path, headers={"X-Internal-Token": token})
                await c.request(method, path, params={"token": token, "q": "x"})
                await c.request(method, f"{path}?x=1&token={token}")
    out, err = capfd.readouterr()
    logs = out + err
    assert "?[redacted] HTTP/1.1" in logs  # the access log was written and seen
    assert TOKEN not in logs


def _identifiers(node: ast.AST) -> set[str]:
    found = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            found.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            found.add(sub.attr)
    return found


def test_tokens_are_compared_in_constant_time_only() -> None:
    """No `==`/`!=`/`in` on anything named like a token or secret anywhere in the services or
    the CLI: her_os_shared.auth.token_matches (hmac.compare_digest) is the one comparison."""
    sources = [*ROOT.glob("services/*/src/**/*.py"), *ROOT.glob("cli/src/**/*.py")]
    offending = []
    for path in sources:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if not isinstance(node, ast.Compare):
                continue
            if not any(isinstance(o, ast.Eq | ast.NotEq | ast.In | ast.NotIn) for o in node.ops):
                continue
            names = {n.lower() for n in _identifiers(node)}
            if any("token" in n or "secret" in n for n in names):
                offending.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert offending == []
    auth = (ROOT / "services/shared/src/her_os_shared/auth.py").read_text()
    assert "hmac.compare_digest" in auth


@pytest.mark.parametrize("package", PACKAGES)
async def test_cors_answers_only_the_dashboard_origin(package: str) -> None:
    app = build(package)
    _, path, _ = next(op for op in operations(app) if op[1].startswith("/v1/"))
    preflight = {
        "Access-Control-Request-Method": "GET",
        "Access-Control-Request-Headers": "X-Internal-Token",
    }
    async with client(app) as c:
        for origin in ("http://evil.example", "null", "http://127.0.0.1:5174.evil.example"):
            r = await c.options(path, headers={"Origin": origin, **preflight})
            assert "access-control-allow-origin" not in r.headers, origin
            r = await c.get(path, headers={"Origin": origin, "X-Internal-Token": WRONG})
            assert "access-control-allow-origin" not in r.headers, origin
            assert "access-control-allow-credentials" not in r.headers
        dashboard = await c.options(path, headers={"Origin": DASHBOARD, **preflight})
    # Only the context engine is called from the dashboard's origin; the others serve no
    # cross-origin browser at all (Annie's page is same-origin).
    allowed = dashboard.headers.get("access-control-allow-origin")
    assert allowed == (DASHBOARD if package == "context_engine" else None)


def _body_operations(app) -> list[tuple[str, str, str]]:
    """(METHOD, path, the content type it declares) of each operation that takes a body."""
    found = []
    for method, path, op in operations(app):
        if "requestBody" in op:
            ctype = next(iter(op["requestBody"]["content"]))
            if ctype == "multipart/form-data":
                ctype += "; boundary=b0undary"
            found.append((method, path, ctype))
    return found


@pytest.mark.parametrize("package", PACKAGES)
async def test_oversized_bodies_get_413_on_every_operation_that_takes_one(package: str) -> None:
    limit = 4096
    app = build(package, max_body_bytes=limit)
    ops = _body_operations(app)
    assert ops

    def oversized(ctype: str) -> bytes:
        # well-formed for its type, so a parser reads on instead of failing on the first bytes
        if ctype.startswith("multipart/"):
            head = b'--b0undary\r\nContent-Disposition: form-data; name="file"; filename="a.wav"'
            return head + b"\r\n\r\n" + b"x" * limit + b"\r\n--b0undary--\r\n"
        return b'{"x": "' + b"x" * limit + b'"}'

    async with client(app) as c:
        for method, path, ctype in ops:
            big = oversized(ctype)

            async def chunked(big: bytes = big):
                for i in range(0, len(big), 1000):
                    yield big[i : i + 1000]

            headers = {"X-Internal-Token": TOKEN, "Content-Type": ctype}
            r = await c.request(method, path, content=big, headers=headers)
            assert r.status_code == 413, f"{method} {path}: {r.status_code}"
            # without Content-Length: counted while streaming
            r = await c.request(method, path, content=chunked(), headers=headers)
            assert r.status_code == 413, f"{method} {path} (chunked): {r.status_code}"


@pytest.mark.parametrize("package", PACKAGES)
async def test_repeated_auth_failures_from_one_address_get_429(package: str) -> None:
    app = build(package, auth_failure_limit=5, auth_failure_window_s=120)
    _, path, _ = next(op for op in operations(app) if op[0] == "GET" and "{" not in op[1])
    async with client(app, "198.51.100.7") as attacker, client(app, "198.51.100.8") as other:
        for _ in range(5):
            assert (await attacker.get(path, headers={"X-Internal-Token": WRONG})).status_code in (
                401,
                403,
            )
        locked = await attacker.get(path, headers={"X-Internal-Token": TOKEN})
        assert locked.status_code == 429
        assert 1 <= int(locked.headers["Retry-After"]) <= 120
        # another address is not affected
        assert (await other.get(path, headers={"X-Internal-Token": WRONG})).status_code == 401


@pytest.mark.parametrize("package", PACKAGES)
async def test_a_forged_forwarded_for_does_not_escape_the_lockout(package: str) -> None:
    """Served as `serve` runs it (real uvicorn, server_config): a client rotating
    X-Forwarded-For is still one TCP peer, and its failures still lock it out. uvicorn trusts
    that header from 127.0.0.1 unless told otherwise, and every client of the embedded
    platform connects from there."""
    app = build(package, port=_free_port(), auth_failure_limit=3, auth_failure_window_s=120)
    _, path, _ = next(op for op in operations(app) if op[0] == "GET" and "{" not in op[1])
    async with served(app) as c:
        codes = [
            (
                await c.get(
                    path, headers={"X-Internal-Token": WRONG, "X-Forwarded-For": f"203.0.113.{i}"}
                )
            ).status_code
            for i in range(1, 6)
        ]
    assert codes[:3] == [401, 401, 401] and codes[3:] == [429, 429], codes
