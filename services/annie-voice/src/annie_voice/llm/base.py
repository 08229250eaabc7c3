"""The interfaces of the chat loop: tools, messages, and what a backend streams.

A tool is anything with a `name`, a `description`, a JSON-schema `parameters` object and
`async run(args) -> dict`; the chat loop offers the tools to the model, runs the calls it
makes, and gives the results back. A backend streams `TextDelta`, `ToolCall` and `Usage`, and
one that searched memory itself `MemoryUsed`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from annie_voice.engine import KnownFact, Memory


@runtime_checkable
class Tool(Protocol):
    """A tool Annie may call. `parameters` is the JSON schema of `run`'s argument object
    (`{"type": "object", "properties": {...}, "required": [...]}`). `run` returns a
    JSON-serialisable dict; raising is allowed (the chat loop turns it into an error result
    for the model)."""

    name: str
    description: str
    parameters: dict[str, Any]

    async def run(self, args: dict[str, Any]) -> dict[str, Any]: ...


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A call the model asked for. `error` is set when its arguments were not a JSON object
    (the call is then answered with that error, not run)."""

    id: str
    name: str
    arguments: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


@dataclass(frozen=True, slots=True)
class Message:
    """One message of a conversation, backend-neutral. An assistant message may carry the
    tool calls it made; a `tool` message is the result of one call (`tool_call_id`)."""

    role: Literal["user", "assistant", "tool"]
    content: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class TextDelta:
    text: str


@dataclass(frozen=True, slots=True)
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True, slots=True)
class MemoryUsed:
    """What a backend that searched memory itself (the offline responder) answered from."""

    facts: tuple[KnownFact, ...] = ()
    memories: tuple[Memory, ...] = ()


StreamEvent = TextDelta | ToolCall | Usage | MemoryUsed


class ChatBackend(Protocol):
    """A responder. `name` is what the session reports (`none`, `openai`, `claude`)."""

    name: str
    # Whether the backend can call tools at all (the offline responder cannot).
    supports_tools: bool

    def stream(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[Tool]
    ) -> AsyncIterator[StreamEvent]: ...

    async def aclose(self) -> None: ...


class LLMError(RuntimeError):
    """The LLM failed (unreachable, refused, bad answer); the message says which and why."""


def tool_schema(tool: Tool) -> dict[str, Any]:
    """A tool's parameters as a JSON schema object (an empty object schema when unset)."""
    params = dict(tool.parameters or {})
    params.setdefault("type", "object")
    params.setdefault("properties", {})
    return params
