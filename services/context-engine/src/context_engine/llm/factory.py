"""`make_llm_client(settings)`: the configured LLM — the OpenAI-compatible server, with Claude as
its fallback when a Claude key is set, each call observed when a recorder is given — or None
when no LLM is configured. Backends are imported only when chosen."""

from __future__ import annotations

from typing import TYPE_CHECKING

from context_engine.llm.client import LLMClient
from context_engine.llm.errors import LLMConfigError
from context_engine.llm.openai_compat import OpenAICompatibleClient

if TYPE_CHECKING:
    from context_engine.config import Settings
    from context_engine.observe.recorder import EventRecorder


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
