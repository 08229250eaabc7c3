"""Annie's responders: an OpenAI-compatible LLM (and the design's llama-server, a second
one), Claude, or the offline memory responder, behind one `ChatBackend` interface; and the
`Tool` protocol the chat loop calls tools by."""

from __future__ import annotations

from annie_voice.config import Settings
from annie_voice.engine import EngineClient
from annie_voice.llm.base import (
    ChatBackend,
    LLMError,
    Message,
    StreamEvent,
    TextDelta,
    Tool,
    ToolCall,
    Usage,
)
from annie_voice.llm.pool import BackendName, BackendPool, BackendUnavailableError

__all__ = [
    "BackendName",
    "BackendPool",
    "BackendUnavailableError",
    "ChatBackend",
    "LLMError",
    "Message",
    "StreamEvent",
    "TextDelta",
    "Tool",
    "ToolCall",
    "Usage",
    "create_backend",
]


def create_backend(
    settings: Settings, engine: EngineClient, choice: BackendName | None = None
) -> ChatBackend:
    """The backend `choice` names (None: the one the settings choose, see
    Settings.resolved_llm_backend). The LLM SDKs are imported only here, only for the backend
    chosen."""
    choice = choice or settings.resolved_llm_backend()
    if choice == "openai":
        from annie_voice.llm.openai_compat import OpenAICompatibleBackend

        # checked by Settings (the default) or BackendPool (a session's choice)
        assert settings.llm_base_url and settings.llm_model
        return OpenAICompatibleBackend(
            base_url=settings.llm_base_url,
            model=settings.llm_model,
            api_key=settings.llm_api_key.get_secret_value() if settings.llm_api_key else None,
            timeout_s=settings.llm_timeout_s,
            max_tokens=settings.llm_max_tokens,
            temperature=settings.llm_temperature,
        )
    if choice == "qwen3.5-9b":  # the design's llama-server (pool.py), another OpenAI server
        from annie_voice.llm.openai_compat import OpenAICompatibleBackend

        assert settings.llama_server_url  # checked by BackendPool
        key = settings.llama_server_api_key
        return OpenAICompatibleBackend(
            base_url=settings.llama_server_url,
            model=settings.llama_server_model,
            api_key=key.get_secret_value() if key else None,
            timeout_s=settings.llm_timeout_s,
            max_tokens=settings.llm_max_tokens,
            temperature=settings.llm_temperature,
            name="qwen3.5-9b",
        )
    if choice == "claude":
        from annie_voice.llm.claude import ClaudeBackend

        assert settings.claude_api_key is not None  # checked by Settings or BackendPool
        return ClaudeBackend(
            api_key=settings.claude_api_key.get_secret_value(),
            model=settings.claude_model,
            timeout_s=settings.llm_timeout_s,
            max_tokens=settings.llm_max_tokens,
            temperature=settings.llm_temperature,
            base_url=settings.claude_base_url,
        )
    from annie_voice.llm.offline import OfflineMemoryResponder

    return OfflineMemoryResponder(
        engine, timezone=settings.timezone, owner_speakers=settings.owner_speakers
    )
