"""Claude (Anthropic Messages API) as an `LLMClient`, the optional fallback.

Structured output through tool use: the schema is the input schema of one tool the model is
made to call (`tool_choice`), and the tool call's input is the answer. Should the model answer in
text instead, that text is returned for `parse_json_payload` to read.
"""

from __future__ import annotations

import json
import re
from typing import Any

from context_engine.llm.client import schema_instruction
from context_engine.llm.errors import LLMOutputError, LLMRequestError, LLMUnavailableError
from her_os_shared.logging import get_logger

log = get_logger(__name__)

_TOOL_NAME = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(schema_name: str) -> str:
    """A valid tool name (`^[a-zA-Z0-9_-]{1,64}$`) from a schema name."""
    return (_TOOL_NAME.sub("_", schema_name) or "answer")[:64]


class ClaudeClient:
    def __init__(
        self,
        api_key: str,
        model: str,
        *,
        base_url: str | None = None,
        timeout_s: float = 120.0,
        max_tokens: int = 4096,
        max_retries: int = 1,
    ) -> None:
        from anthropic import AsyncAnthropic  # lazy: only when Claude is configured

        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.name = f"claude({model})"
        self._client = AsyncAnthropic(
            api_key=api_key, base_url=base_url, timeout=timeout_s, max_retries=max_retries
        )

    async def complete_json(
        self, system: str, user: str, schema: dict[str, Any], schema_name: str
    ) -> str:
        import anthropic

        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "messages": [{"role": "user", "content": user}],
        }
        name = tool_name(schema_name)
        if schema.get("type") == "object":
            request["system"] = system
            request["tools"] = [
                {
                    "name": name,
                    "description": "Record the answer. Always call this tool exactly once.",
                    "input_schema": schema,
                }
            ]
            request["tool_choice"] = {"type": "tool", "name": name}
        else:  # tool inputs must be objects: ask for the JSON in text
            request["system"] = system + schema_instruction(schema)
        try:
            message = await self._client.messages.create(**request)
        except anthropic.APITimeoutError as exc:
            raise LLMUnavailableError(
                f"{self.name} did not answer within {self.timeout_s:g} s"
            ) from exc
        except anthropic.APIConnectionError as exc:
            raise LLMUnavailableError(f"cannot reach the Anthropic API: {exc}") from exc
        except anthropic.APIStatusError as exc:
            if exc.status_code in (408, 429) or exc.status_code >= 500:
                raise LLMUnavailableError(
                    f"{self.name} answered HTTP {exc.status_code}: {exc}"
                ) from exc
            raise LLMRequestError(
                f"{self.name} refused the request with HTTP {exc.status_code} (check "
                f"CONTEXT_ENGINE_CLAUDE_API_KEY and CONTEXT_ENGINE_CLAUDE_MODEL): {exc}"
            ) from exc
        texts: list[str] = []
        for block in message.content:
            if block.type == "tool_use" and block.name == name:
                return json.dumps(block.input)
            if block.type == "text":
                texts.append(block.text)
        text = "".join(texts)
        log.debug("llm_answer", client=self.name, stop_reason=message.stop_reason, chars=len(text))
        if not text.strip():
            raise LLMOutputError(
                f"{self.name} answered with neither a tool call nor text "
                f"(stop_reason={message.stop_reason})"
            )
        return text

    async def aclose(self) -> None:
        await self._client.close()
