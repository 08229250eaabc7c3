"""The MCP server over stdio (`her-os mcp`, for desktop clients that start their servers as
processes), its tools calling a running engine over HTTP.

stdout carries the protocol and nothing else: logs go to stderr. A token the engine refuses
ends the process at once with the reason on stderr (a client then reports the server failed
to start, with that line in its log) rather than every tool failing later; an engine that
does not answer yet is only a warning, since desktop clients often start before the engine.
"""

from __future__ import annotations

import anyio

from context_engine.mcp.client import MemoryApi, MemoryApiError
from context_engine.mcp.server import build_server
from her_os_shared.logging import configure_logging, get_logger

log = get_logger("her-os-mcp")
SERVICE = "her-os-mcp"
# A usable token check that reads almost nothing.
PROBE = "/v1/sessions"


class StdioRefused(RuntimeError):
    """The engine refused the token: serving would only fail every call."""


async def check_engine(api: MemoryApi) -> None:
    """Raise StdioRefused when the engine refuses the token; warn when it does not answer."""
    try:
        await api.get(PROBE, {"limit": 1})
    except MemoryApiError as exc:
        if exc.status in (401, 429):
            raise StdioRefused(
                f"{exc} at {api.base_url}: give its token with --token-file or HER_OS_MCP_TOKEN"
            ) from None
        log.warning("mcp.engine_not_ready", url=api.base_url, reason=str(exc))


async def serve_stdio(url: str, token: str, *, read_only: bool = False) -> None:
    api = MemoryApi.over_http(url, token)
    try:
        await check_engine(api)
        server = build_server(lambda: api, read_only=read_only)
        log.info("mcp.stdio_serving", url=api.base_url, read_only=read_only)
        await server.run_stdio_async()
    finally:
        await api.aclose()


def run_stdio(url: str, token: str, *, read_only: bool = False, log_level: str = "warning") -> None:
    """Serve until the client closes stdin. Raises StdioRefused when the engine refuses the
    token (the caller says so on stderr and exits non-zero)."""
    configure_logging(SERVICE, log_level)  # stderr: stdout is the protocol's
    try:
        anyio.run(lambda: serve_stdio(url, token, read_only=read_only))
    except KeyboardInterrupt:
        pass
