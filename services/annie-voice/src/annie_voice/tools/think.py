"""`think`: a scratchpad for the model. It records a private note and hands it back, nothing else.

Giving the model a place to reason between tool calls improves multi-step answers; the note is
logged (at debug) for the operator but never spoken, shown on the client page or stored.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import Field

from annie_voice.tools.base import Tool, ToolArguments, ToolResult
from her_os_shared.logging import get_logger

log = get_logger(__name__)


class ThinkTool(Tool):
    name: ClassVar[str] = "think"
    description: ClassVar[str] = (
        "Think step by step in private before answering or between tool calls. The thought is "
        "not shown or spoken to the user and changes nothing; use it to plan, check facts "
        "against earlier tool results, or decide what to do next."
    )

    class Arguments(ToolArguments):
        thought: str = Field(min_length=1, max_length=8_000)

    async def _run(self, args: Arguments) -> ToolResult:
        thought = args.thought
        log.debug("think", chars=len(thought))
        return ToolResult.success(f"Thought noted: {thought}")
