"""Annie's tools. `make_tools(config)` gives the enabled ones. Each call is an event of the
tool's creature (`her_os_shared.creatures.tool_creature`: web_search is the design's chimera,
fetch_webpage its selkie, the tool router griffin runs the rest).

Each tool has `name`, `description`, `parameters` (JSON schema) and `async run(args) ->
ToolResult`; `run` never raises. A result with `data` (render_table, render_chart) is for the
client page: send it over the data channel. A tool that cannot run safely on this host
(execute_python without a kernel sandbox) is left out; `tool_availability` says why.
"""

from __future__ import annotations

from annie_voice.tools import python_exec
from annie_voice.tools.base import (
    ALL_TOOL_NAMES,
    MAX_CONTENT_CHARS,
    Tool,
    ToolConfig,
    ToolResult,
)
from annie_voice.tools.fetch import FetchWebpageTool
from annie_voice.tools.python_exec import ExecutePythonTool
from annie_voice.tools.render import RenderChartTool, RenderTableTool
from annie_voice.tools.search import WebSearchTool
from annie_voice.tools.think import ThinkTool

__all__ = [
    "ALL_TOOL_NAMES",
    "MAX_CONTENT_CHARS",
    "ExecutePythonTool",
    "FetchWebpageTool",
    "RenderChartTool",
    "RenderTableTool",
    "ThinkTool",
    "Tool",
    "ToolConfig",
    "ToolResult",
    "WebSearchTool",
    "make_tools",
    "tool_availability",
]


def make_tools(config: ToolConfig) -> list[Tool]:
    """The tools named in `config.enabled`, in a stable order.

    web_search is listed even without a SearXNG URL (it then answers with a clear error naming
    ANNIE_VOICE_SEARXNG_URL, which the model can pass on); leave it out of `enabled` to hide it.
    execute_python is listed only where its sandbox can be built (a probe, once per process).
    """
    unknown = set(config.enabled) - ALL_TOOL_NAMES
    if unknown:
        raise ValueError(
            f"unknown tool names {sorted(unknown)}; known: {', '.join(sorted(ALL_TOOL_NAMES))}"
        )
    candidates: list[Tool] = [
        ThinkTool(),
        RenderTableTool(),
        RenderChartTool(),
        WebSearchTool(config),
        FetchWebpageTool(config),
    ]
    if "execute_python" in config.enabled and python_exec.sandbox_support().available:
        candidates.append(ExecutePythonTool(config))
    return [tool for tool in candidates if tool.name in config.enabled]


def tool_availability(config: ToolConfig) -> dict[str, dict[str, object]]:
    """Enabled tools that depend on the host, each with whether it runs here and why not
    (for /api/status). Blocking on the first call (the sandbox probe)."""
    if "execute_python" not in config.enabled:
        return {}
    return {"execute_python": python_exec.sandbox_support().status()}
