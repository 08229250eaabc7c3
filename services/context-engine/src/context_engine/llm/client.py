"""One way to ask an LLM for JSON: `LLMClient.complete_json(system, user, schema, name)`, the
interface every backend implements. Backends: `openai_compat.py` (any OpenAI-compatible `/v1`
server), `claude.py` (the fallback), wrapped by `fallback.py` and `observed.py`;
`factory.py`'s `make_llm_client(settings)` builds the configured one. Failures become the kinds
in `errors.py`. Backends import their SDK lazily: nothing here loads at module import and
nothing is ever downloaded.
"""

from __future__ import annotations

import json
from typing import Any, Protocol, runtime_checkable


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
