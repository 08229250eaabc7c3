"""`her-os mcp`: the memory as an MCP server over stdio, for desktop clients (Claude Desktop,
Cursor), talking to a running context engine (docs/mcp.md).

Where the engine is: `--url`, else HER_OS_MCP_URL, else the running platform's (run state),
else the configured host and context port (the engine may start after the client).
The token: `--token-file`, else HER_OS_MCP_TOKEN, else the data directory's secret.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from her_os import credentials
from her_os.config import Settings
from her_os.paths import DataLayout
from her_os.services import CONTEXT_ENGINE
from her_os.state import live_state

URL_ENV = "HER_OS_MCP_URL"
TOKEN_ENV = "HER_OS_MCP_TOKEN"  # noqa: S105 (a variable's name, not a secret)


class McpSetupError(RuntimeError):
    """What is missing to serve (said on stderr; stdout belongs to the protocol)."""


@dataclass(frozen=True)
class Target:
    url: str
    token: str

    def __repr__(self) -> str:  # keep the token out of tracebacks
        return f"Target(url={self.url!r}, token=<redacted>)"


def engine_url(settings: Settings, url: str | None) -> str:
    if url:
        return url.rstrip("/")
    if env := os.environ.get(URL_ENV, "").strip():
        return env.rstrip("/")
    layout = DataLayout(settings.resolved_data_dir)
    state = live_state(layout.state_file)
    comp = state.components.get(CONTEXT_ENGINE.name) if state else None
    if state is not None and comp is not None:
        return CONTEXT_ENGINE.base_url(state.connect_host, comp.port)
    return CONTEXT_ENGINE.base_url(settings.connect_host, settings.context_port)


def engine_token(settings: Settings, token_file: Path | None) -> str:
    if token_file is not None:
        try:
            token = token_file.expanduser().read_text(encoding="utf-8").strip()
        except OSError as exc:
            raise McpSetupError(
                f"cannot read the token file {token_file}: {exc.strerror}"
            ) from None
        if not token:
            raise McpSetupError(f"the token file {token_file} is empty")
        return token
    if env := os.environ.get(TOKEN_ENV, "").strip():
        return env
    secrets = DataLayout(settings.resolved_data_dir).secrets
    path = secrets / credentials.INTERNAL_TOKEN
    try:
        token = path.read_text(encoding="utf-8").strip()
    except OSError:
        token = ""
    if not token:
        raise McpSetupError(
            f"no internal token in {secrets} (has `her-os up` run with this data directory?): "
            f"give --data-dir, --token-file or {TOKEN_ENV}"
        )
    return token


def find_target(settings: Settings, url: str | None, token_file: Path | None) -> Target:
    return Target(engine_url(settings, url), engine_token(settings, token_file))


def serve(target: Target, *, read_only: bool) -> None:
    """Serve over stdio until the client goes. The context engine package is imported only
    here: the rest of the CLI runs without it."""
    try:
        from context_engine.mcp.stdio import StdioRefused, run_stdio
    except ImportError as exc:
        raise McpSetupError(
            f"the context engine package is not installed here ({exc.name}): run `her-os mcp` "
            "from the her-os environment (.venv/bin/her-os), or point an HTTP client at the "
            "engine's /mcp"
        ) from None
    try:
        run_stdio(target.url, target.token, read_only=read_only)
    except StdioRefused as exc:
        raise McpSetupError(str(exc)) from None
