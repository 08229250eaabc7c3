"""The internal token as `Authorization: Bearer <token>` (issue 26, item 5): what most HTTP
clients and wearable SDKs can set. `X-Internal-Token` still counts first when both are sent,
and neither header reaches a log line."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import httpx
import pytest
from fastapi import Depends, FastAPI
from pydantic import SecretStr

from her_os_shared.auth import TOKEN_HEADER, bearer_credentials, require_token

TOKEN = "b" * 32
WRONG = "w" * 32


def _app(failures: list[str] | None = None) -> FastAPI:
    app = FastAPI()
    expected = SecretStr(TOKEN)

    async def on_failure(request: object, reason: str) -> None:
        if failures is not None:
            failures.append(reason)

    @app.get("/v1/thing", dependencies=[Depends(require_token(expected, on_failure))])
    async def thing() -> dict[str, bool]:
        return {"ok": True}

    query_ok = require_token(expected, on_failure, allow_query=True)

    @app.get("/v1/stream", dependencies=[Depends(query_ok)])
    async def stream() -> dict[str, bool]:
        return {"ok": True}

    return app


async def _get(path: str, headers: dict[str, str], params: dict[str, str] | None = None):
    transport = httpx.ASGITransport(app=_app())
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        return await c.get(path, headers=headers, params=params)


@pytest.mark.parametrize(
    ("headers", "status", "detail"),
    [
        ({"Authorization": f"Bearer {TOKEN}"}, 200, None),
        # The scheme's name is case-insensitive (RFC 9110); spaces around the token are not
        # part of it.
        ({"Authorization": f"bearer {TOKEN}"}, 200, None),
        ({"Authorization": f"BEARER   {TOKEN} "}, 200, None),
        ({"Authorization": f"Bearer {WRONG}"}, 401, "invalid X-Internal-Token header"),
        ({"Authorization": "Bearer "}, 401, "invalid X-Internal-Token header"),
        ({"Authorization": f"Bearer {TOKEN}x"}, 401, "invalid X-Internal-Token header"),
        # Another scheme carries no token of ours: the request has none.
        ({"Authorization": f"Basic {TOKEN}"}, 401, "missing X-Internal-Token header"),
        ({"Authorization": TOKEN}, 401, "missing X-Internal-Token header"),
        # X-Internal-Token wins when both are sent, whichever of the two is right.
        ({TOKEN_HEADER: TOKEN, "Authorization": f"Bearer {WRONG}"}, 200, None),
        ({TOKEN_HEADER: WRONG, "Authorization": f"Bearer {TOKEN}"}, 401,
         "invalid X-Internal-Token header"),
    ],
)  # fmt: skip
async def test_the_token_as_a_bearer_header(
    headers: dict[str, str], status: int, detail: str | None
) -> None:
    r = await _get("/v1/thing", headers)
    assert r.status_code == status, r.text
    if detail is None:
        assert r.json() == {"ok": True}
    else:
        assert r.json() == {"detail": detail}
        assert r.headers["www-authenticate"] == "Bearer"
        assert TOKEN not in r.text and WRONG not in r.text  # never echoed


async def test_a_refused_bearer_token_is_reported_as_invalid() -> None:
    failures: list[str] = []
    transport = httpx.ASGITransport(app=_app(failures))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        await c.get("/v1/thing", headers={"Authorization": f"Bearer {WRONG}"})
        await c.get("/v1/thing", headers={"Authorization": f"Basic {WRONG}"})
    assert failures == ["invalid", "missing"]


@pytest.mark.parametrize(
    ("headers", "params", "status"),
    [
        ({"Authorization": f"Bearer {TOKEN}"}, {}, 200),
        # A header, when sent, counts before a query token.
        ({"Authorization": f"Bearer {WRONG}"}, {"token": TOKEN}, 401),
        ({"Authorization": f"Bearer {TOKEN}"}, {"token": WRONG}, 200),
        # A header of another scheme is no token: the query's is read.
        ({"Authorization": "Basic abc"}, {"x_internal_token": TOKEN}, 200),
    ],
)
async def test_a_route_taking_query_tokens_reads_headers_first(
    headers: dict[str, str], params: dict[str, str], status: int
) -> None:
    assert (await _get("/v1/stream", headers, params)).status_code == status


@pytest.mark.parametrize(
    ("value", "token"),
    [
        (None, None),
        ("", None),
        ("Bearer abc", "abc"),
        ("bEaReR abc", "abc"),
        ("  Bearer  abc  ", "abc"),
        ("Bearer", ""),
        ("Basic abc", None),
        ("Bearerabc", None),
    ],
)
def test_bearer_credentials(value: str | None, token: str | None) -> None:
    assert bearer_credentials(value) == token


def test_a_served_app_logs_no_bearer_token() -> None:
    """A real uvicorn server with her-os logging at debug level (access log on): requests
    with the token as a Bearer header, right and wrong, leave their request lines in the log
    and the tokens out of it."""
    code = textwrap.dedent(
        f"""
        import asyncio, socket
        import httpx, uvicorn
        from fastapi import Depends, FastAPI
        from pydantic import SecretStr
        from her_os_shared.auth import require_token
        from her_os_shared.logging import configure_logging

        configure_logging("demo", "debug", "json")
        app = FastAPI()

        @app.get("/v1/thing", dependencies=[Depends(require_token(SecretStr("{TOKEN}")))])
        async def thing():
            return {{"ok": True}}

        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, log_config=None, log_level="debug"))

        async def main():
            task = asyncio.create_task(server.serve(sockets=[sock]))
            while not server.started:
                await asyncio.sleep(0.05)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{{port}}") as c:
                ok = await c.get("/v1/thing", headers={{"Authorization": "Bearer {TOKEN}"}})
                bad = await c.get("/v1/thing", headers={{"Authorization": "Bearer {WRONG}"}})
            assert (ok.status_code, bad.status_code) == (200, 401)
            server.should_exit = True
            await task

        asyncio.run(main())
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )
    logs = done.stdout + done.stderr
    assert done.returncode == 0, logs
    assert 'GET /v1/thing HTTP/1.1\\" 200' in logs, logs  # the request lines were logged
    assert 'GET /v1/thing HTTP/1.1\\" 401' in logs, logs
    assert TOKEN not in logs and WRONG not in logs, logs
