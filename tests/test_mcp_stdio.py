"""`her-os mcp` (the CLI) serving the memory over stdio to the official SDK's client, which
spawns it as desktop clients do, against a real context engine (uvicorn on a free port, real
PostgreSQL): list tools, search, add; a wrong token ends it at once with the reason on stderr;
`--read-only` offers no writing tool; stdout carries nothing but the protocol."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from engine_harness import TOKEN, ServedEngine, engine_settings, eventually, serve_engine
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.shared.exceptions import MCPError
from pg_harness import fresh_database

from context_engine.mcp.tools import READ_TOOLS

pytestmark = [pytest.mark.platform, pytest.mark.asyncio(loop_scope="module")]

READ_TIMEOUT_S = 120.0  # a guard against a hang, not a measurement


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def engine(
    postgres_server: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServedEngine]:
    root = tmp_path_factory.mktemp("mcp-stdio")
    async with fresh_database(postgres_server) as url:
        settings = engine_settings(
            root, url, vector_index_enabled=False, watch_debounce_s=0.1, gc_freeze=False
        )
        async for served in serve_engine(settings):
            yield served


def token_file(tmp_path: Path, token: str = TOKEN) -> Path:
    path = tmp_path / "token"
    path.write_text(token + "\n")
    path.chmod(0o600)
    return path


def her_os_mcp(url: str, token_path: Path, cwd: Path, *extra: str) -> StdioServerParameters:
    """`her-os mcp` as a desktop client's configuration starts it."""
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "her_os", "mcp", "--url", url, "--token-file", str(token_path), *extra],
        cwd=cwd,
    )


@asynccontextmanager  # entered in the test itself: the SDK's task groups stay in one task
async def connect(params: StdioServerParameters, errlog: Path) -> AsyncIterator[Client]:
    with errlog.open("w") as err:
        async with Client(
            stdio_client(params, errlog=err), read_timeout_seconds=READ_TIMEOUT_S
        ) as client:
            yield client


async def call(client: Client, tool: str, /, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, result.content)
    assert result.structured_content is not None
    return result.structured_content


async def test_search_and_add_over_stdio(engine: ServedEngine, tmp_path: Path) -> None:
    params = her_os_mcp(engine.base_url, token_file(tmp_path), tmp_path)
    async with connect(params, tmp_path / "stderr.log") as mcp:
        names = {t.name for t in (await mcp.list_tools()).tools}
        assert {"search_memory", "add_memory", "forget_person"} <= names
        empty = await call(mcp, "search_memory", query="heron")
        assert empty["results"] == []
        added = await call(
            mcp, "add_memory", episode_body="A grey heron nests by the Kafue river.",
            speaker="Ravi",
        )  # fmt: skip

        async def found() -> dict[str, Any] | None:
            page = await call(mcp, "search_memory", query="where does the heron nest?")
            return page if page["results"] else None

        page = await eventually(found, "the added memory to be searchable", deadline_s=120)
        [hit] = page["results"]
        assert hit["session_id"] == added["session_id"] and hit["speaker"] == "Ravi"
        assert "Kafue" in hit["text"]


async def test_read_only_over_stdio(engine: ServedEngine, tmp_path: Path) -> None:
    params = her_os_mcp(engine.base_url, token_file(tmp_path), tmp_path, "--read-only")
    async with connect(params, tmp_path / "stderr.log") as mcp:
        assert {t.name for t in (await mcp.list_tools()).tools} == set(READ_TOOLS)
        refused = await mcp.call_tool("add_memory", {"episode_body": "x"})
        assert refused.is_error


async def test_a_wrong_token_is_a_clear_error_not_a_hang(
    engine: ServedEngine, tmp_path: Path
) -> None:
    params = her_os_mcp(engine.base_url, token_file(tmp_path, "w" * 32), tmp_path)
    errlog = tmp_path / "stderr.log"
    with pytest.raises((MCPError, BaseExceptionGroup, OSError)):
        async with connect(params, errlog) as mcp:
            await mcp.list_tools()
    said = errlog.read_text()
    assert "refused the token" in said and "--token-file" in said, said
    assert "w" * 32 not in said and TOKEN not in said  # no token in what it prints


async def test_stdout_carries_only_the_protocol(engine: ServedEngine, tmp_path: Path) -> None:
    """Raw: one request in, one JSON-RPC line out, then nothing when stdin closes."""
    params = her_os_mcp(engine.base_url, token_file(tmp_path), tmp_path)
    proc = await asyncio.create_subprocess_exec(
        params.command, *params.args, cwd=tmp_path,
        stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "raw", "version": "1"}},
    }  # fmt: skip
    request = json.dumps(initialize).encode() + b"\n"
    assert proc.stdin is not None
    proc.stdin.write(request)
    await proc.stdin.drain()
    proc.stdin.close()
    out, err = await asyncio.wait_for(proc.communicate(), READ_TIMEOUT_S)
    lines = out.decode().splitlines()
    assert len(lines) == 1, (lines, err.decode()[-2000:])
    answer = json.loads(lines[0])
    assert answer["id"] == 1 and answer["result"]["serverInfo"]["name"] == "her-os"
    assert proc.returncode == 0, err.decode()[-2000:]
