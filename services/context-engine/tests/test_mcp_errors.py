"""What an MCP client reads when a call goes wrong (issue 39), through the SDK's own client: a
bad argument is one `argument: reason` line per problem, without the value it was given or
pydantic's link; a missing or wrong token is the 401's reason, over streamable HTTP (/mcp)
and from a tool whose engine refuses its token (as `her-os mcp` meets one that changed).
No platform: the checks fail before anything is read, so the engine app is not started."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
import pytest
from engine_harness import TOKEN, engine_settings
from fastapi import FastAPI
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult

from context_engine.app import create_app
from context_engine.mcp.client import MemoryApi
from context_engine.mcp.server import build_server

SECRET = "4891-confidential-value"  # what a bad argument carried: never in the message
NOT_IN_MESSAGES = ("input_value", "errors.pydantic.dev", "validation error for", "Arguments")


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


@pytest.fixture
def app(tmp_path: Path) -> FastAPI:
    # Never started: nothing here reaches PostgreSQL (the URL names no server).
    return create_app(engine_settings(tmp_path, "postgresql+asyncpg://nobody@/none"))


@asynccontextmanager
async def tools(app: FastAPI, token: str = TOKEN) -> AsyncIterator[Client]:
    """The MCP server in process (the SDK's memory transport), its tools calling `app`."""
    api = MemoryApi(
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://engine",
            headers={"X-Internal-Token": token} if token else {},
        )
    )  # fmt: skip
    try:
        async with Client(build_server(lambda: api, read_only=False)) as client:
            yield client
    finally:
        await api.aclose()


async def error_of(client: Client, tool: str, /, **arguments: object) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, (tool, result.structured_content)
    message = text_of(result)
    for noise in (*NOT_IN_MESSAGES, SECRET):
        assert noise not in message, message
    return message


async def test_a_bad_argument_names_it_and_why_in_one_line(app: FastAPI) -> None:
    async with tools(app) as mcp:
        message = await error_of(mcp, "search_memory", query="coffee", limit=SECRET)
        assert message == (
            "Error executing tool search_memory: invalid arguments\n"
            "limit: Input should be a valid integer, unable to parse string as an integer"
        )
        over = await error_of(mcp, "search_memory", query="coffee", limit=10**9)
        assert over.splitlines()[1:] == ["limit: Input should be less than or equal to 50"]
        missing = await error_of(mcp, "search_memory")
        assert missing.splitlines()[1:] == ["query: Field required"]
        # Every problem of the call, one line each; a list item by its position.
        several = await error_of(
            mcp, "search_memory", query=SECRET * 100, limit=0, tiers=["L0", SECRET]
        )
        assert several.splitlines()[1:] == [
            "query: String should have at most 512 characters",
            "limit: Input should be greater than or equal to 1",
            "tiers.1: Input should be 'L0', 'L1' or 'L2'",
        ]
        # A rule of the tool's own (a custom validator): its reason, not pydantic's prefix.
        bad_id = await error_of(mcp, "get_episode", session_id=f"../{SECRET}")
        assert bad_id.splitlines()[1:] == [
            "session_id: must be 1-128 characters of A-Z a-z 0-9 _ - (no dots, slashes or spaces)"
        ]
        bad_key = await error_of(mcp, "add_memory", episode_body="x", idempotency_key="")
        assert bad_key.splitlines()[1:] == ["idempotency_key: must not be empty"]


async def test_over_http_a_refused_token_is_the_401s_reason(app: FastAPI) -> None:
    for headers, reason in (
        ({}, "unauthorized: missing X-Internal-Token header"),
        ({"X-Internal-Token": "w" * 32}, "unauthorized: invalid X-Internal-Token header"),
        ({"Authorization": "Bearer " + "w" * 32}, "unauthorized: invalid X-Internal-Token header"),
    ):
        http = httpx2.AsyncClient(
            transport=httpx2.ASGITransport(app=app), base_url="http://127.0.0.1",
            headers=headers, timeout=30,
        )  # fmt: skip
        with pytest.raises((MCPError, BaseExceptionGroup)) as refused:
            async with (
                http,
                Client(streamable_http_client("http://127.0.0.1/mcp", http_client=http)),
            ):
                pass
        errors = [e for e in leaves(refused.value) if isinstance(e, MCPError)]
        assert [str(e) for e in errors] == [reason], refused.value
        assert "w" * 32 not in str(errors[0])


async def test_a_tool_whose_engine_refuses_the_token_says_so(app: FastAPI) -> None:
    async with tools(app, token="w" * 32) as mcp:
        message = await error_of(mcp, "search_memory", query="coffee")
        assert message == (
            "Error executing tool search_memory: the context engine refused the token "
            "(invalid X-Internal-Token header)"
        )
    async with tools(app, token="") as mcp:
        message = await error_of(mcp, "add_memory", episode_body="remember this")
        assert "refused the token (missing X-Internal-Token header)" in message


def leaves(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]
