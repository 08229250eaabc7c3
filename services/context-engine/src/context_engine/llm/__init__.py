"""LLM backends (issue 5): one interface, `LLMClient.complete_json`, for every server.

- `client.py`: the interface; `factory.py`: `make_llm_client(settings)`;
- `openai_compat.py`: `OpenAICompatibleClient` (Ollama, llama-server, vLLM; JSON-schema
  structured output);
- `claude.py`: `ClaudeClient` (Anthropic Messages API, tool use), the optional fallback;
- `fallback.py`: `FallbackClient(primary, fallback)`;
- `parse.py`: reading JSON out of real model answers (reasoning blocks, fences, prose);
- `errors.py`: unavailable (transient) / request refused / unreadable output / bad settings.

SDKs are imported lazily, when a backend is built: importing this package loads none.
"""

from context_engine.llm.client import LLMClient
from context_engine.llm.errors import (
    LLMConfigError,
    LLMError,
    LLMOutputError,
    LLMRequestError,
    LLMUnavailableError,
)
from context_engine.llm.factory import make_llm_client
from context_engine.llm.openai_compat import OpenAICompatibleClient
from context_engine.llm.parse import as_list, parse_json_payload

__all__ = [
    "LLMClient",
    "LLMConfigError",
    "LLMError",
    "LLMOutputError",
    "LLMRequestError",
    "LLMUnavailableError",
    "OpenAICompatibleClient",
    "as_list",
    "make_llm_client",
    "parse_json_payload",
]
