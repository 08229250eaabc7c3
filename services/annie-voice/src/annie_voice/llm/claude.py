"""The Claude responder: the Messages API streamed with tools, through the `anthropic`
package (imported when first built)."""

from __future__ import annotations

import inspect
import json
from collections.abc import AsyncIterator, Sequence
from typing import Any

from annie_voice.llm.base import (
    LLMError,
    Message,
    StreamEvent,
    TextDelta,
    Tool,
    ToolCall,
    Usage,
    tool_schema,
)


def to_claude_messages(messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Tool results go back as `tool_result` blocks of a user message; consecutive results
    share one message, as the API requires."""
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            block = {"type": "tool_result", "tool_use_id": m.tool_call_id, "content": m.content}
            last = out[-1] if out else None
            if (
                last is not None
                and last["role"] == "user"
                and isinstance(last["content"], list)
                and all(b.get("type") == "tool_result" for b in last["content"])
            ):
                last["content"].append(block)
            else:
                out.append({"role": "user", "content": [block]})
        elif m.role == "assistant" and m.tool_calls:
            blocks: list[dict[str, Any]] = []
            if m.content:
                blocks.append({"type": "text", "text": m.content})
            blocks += [
                {"type": "tool_use", "id": c.id, "name": c.name, "input": c.arguments}
                for c in m.tool_calls
            ]
            out.append({"role": "assistant", "content": blocks})
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def to_claude_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    return [
        {"name": t.name, "description": t.description, "input_schema": tool_schema(t)}
        for t in tools
    ]


class ClaudeBackend:
    name = "claude"
    supports_tools = True

    def __init__(
        self,
        *,
        api_key: str,
        model: str,
        timeout_s: float,
        max_tokens: int,
        temperature: float,
        base_url: str | None = None,
    ) -> None:
        from anthropic import AsyncAnthropic  # imported only when this backend is chosen

        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        self._client = AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=0
        )
        # anthropic 2.x speaks API version 2026-10-21, which dropped the sampling parameters:
        # its create() raises TypeError on `temperature` and the API answers 400 to one sent
        # another way. Older SDKs (the dependency range allows them) still take it.
        create = inspect.signature(self._client.messages.create)
        self._sends_temperature = "temperature" in create.parameters

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[Tool]
    ) -> AsyncIterator[StreamEvent]:
        import anthropic

        kwargs: dict[str, Any] = {
            "model": self.model,
            "system": system,
            "messages": to_claude_messages(messages),
            "max_tokens": self.max_tokens,
            "stream": True,
        }
        if self._sends_temperature:
            kwargs["temperature"] = self.temperature
        if tools:
            kwargs["tools"] = to_claude_tools(tools)
        blocks: dict[int, dict[str, str]] = {}
        input_tokens = 0
        output_tokens = 0
        try:
            stream = await self._client.messages.create(**kwargs)
            async for event in stream:
                kind = event.type
                if kind == "message_start":
                    input_tokens = event.message.usage.input_tokens or 0
                elif kind == "content_block_start":
                    block = event.content_block
                    if block.type == "tool_use":
                        blocks[event.index] = {"id": block.id, "name": block.name, "json": ""}
                elif kind == "content_block_delta":
                    delta = event.delta
                    if delta.type == "text_delta" and delta.text:
                        yield TextDelta(delta.text)
                    elif delta.type == "input_json_delta" and event.index in blocks:
                        blocks[event.index]["json"] += delta.partial_json
                elif kind == "content_block_stop" and event.index in blocks:
                    yield _finish(blocks.pop(event.index))
                elif kind == "message_delta":
                    output_tokens = event.usage.output_tokens or 0
        except anthropic.APIStatusError as exc:
            raise LLMError(f"Claude answered HTTP {exc.status_code}") from exc
        except anthropic.APITimeoutError as exc:
            raise LLMError("Claude did not answer in time") from exc
        except anthropic.APIConnectionError as exc:
            raise LLMError(f"Claude is unreachable: {exc}") from exc
        except anthropic.AnthropicError as exc:
            raise LLMError(f"Claude failed: {exc}") from exc
        yield Usage(input_tokens=input_tokens, output_tokens=output_tokens)


def _finish(block: dict[str, str]) -> ToolCall:
    raw = block["json"].strip()
    try:
        args = json.loads(raw) if raw else {}
    except ValueError:
        return ToolCall(id=block["id"], name=block["name"], error="arguments are not valid JSON")
    if not isinstance(args, dict):
        return ToolCall(id=block["id"], name=block["name"], error="arguments must be an object")
    return ToolCall(id=block["id"], name=block["name"], arguments=args)
