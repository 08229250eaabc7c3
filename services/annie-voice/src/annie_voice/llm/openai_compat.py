"""The OpenAI-compatible responder (Ollama, llama-server, vLLM, OpenAI): streamed chat
completions with tool calls, through the `openai` package (imported when first built)."""

from __future__ import annotations

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


def to_openai_messages(system: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "system", "content": system}]
    for m in messages:
        if m.role == "tool":
            out.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role == "assistant" and m.tool_calls:
            out.append(
                {
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            out.append({"role": m.role, "content": m.content})
    return out


def to_openai_tools(tools: Sequence[Tool]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {
                "name": t.name,
                "description": t.description,
                "parameters": tool_schema(t),
            },
        }
        for t in tools
    ]


def finish_call(index: int, parts: dict[str, str]) -> ToolCall:
    """A streamed call's accumulated pieces → a ToolCall (with `error` when its arguments are
    not a JSON object)."""
    call_id = parts.get("id") or f"call_{index}"
    name = parts.get("name", "")
    raw = parts.get("arguments", "").strip()
    try:
        args = json.loads(raw) if raw else {}
    except ValueError:
        return ToolCall(id=call_id, name=name, error=f"arguments are not valid JSON: {raw[:200]}")
    if not isinstance(args, dict):
        return ToolCall(id=call_id, name=name, error="arguments must be a JSON object")
    return ToolCall(id=call_id, name=name, arguments=args)


class OpenAICompatibleBackend:
    name = "openai"
    supports_tools = True

    def __init__(
        self,
        *,
        base_url: str,
        model: str,
        api_key: str | None,
        timeout_s: float,
        max_tokens: int,
        temperature: float,
        name: str = "openai",
    ) -> None:
        from openai import AsyncOpenAI  # imported only when this backend is chosen

        self.name = name  # what sessions report: `openai`, or `qwen3.5-9b` (llama-server)
        self.model = model
        self.max_tokens = max_tokens
        self.temperature = temperature
        # Local servers need no key; the SDK insists on one.
        self._client = AsyncOpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s, max_retries=0
        )

    async def aclose(self) -> None:
        await self._client.close()

    async def stream(
        self, *, system: str, messages: Sequence[Message], tools: Sequence[Tool]
    ) -> AsyncIterator[StreamEvent]:
        import openai

        kwargs: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(system, messages),
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if tools:
            kwargs["tools"] = to_openai_tools(tools)
        calls: dict[int, dict[str, str]] = {}
        try:
            stream = await self._client.chat.completions.create(**kwargs)
            async for chunk in stream:
                if chunk.usage is not None:
                    yield Usage(
                        input_tokens=chunk.usage.prompt_tokens or 0,
                        output_tokens=chunk.usage.completion_tokens or 0,
                    )
                if not chunk.choices:
                    continue
                delta = chunk.choices[0].delta
                if delta is None:
                    continue
                if delta.content:
                    yield TextDelta(delta.content)
                for tc in delta.tool_calls or []:
                    parts = calls.setdefault(tc.index, {})
                    if tc.id:
                        parts["id"] = tc.id
                    if tc.function is not None:
                        if tc.function.name:
                            parts["name"] = parts.get("name", "") + tc.function.name
                        if tc.function.arguments:
                            parts["arguments"] = parts.get("arguments", "") + tc.function.arguments
        except openai.APIStatusError as exc:
            raise LLMError(f"the LLM server answered HTTP {exc.status_code}") from exc
        except openai.APITimeoutError as exc:
            raise LLMError("the LLM server did not answer in time") from exc
        except openai.APIConnectionError as exc:
            raise LLMError(f"the LLM server is unreachable: {exc}") from exc
        except openai.OpenAIError as exc:
            raise LLMError(f"the LLM failed: {exc}") from exc
        for index in sorted(calls):
            yield finish_call(index, calls[index])
