"""A primary LLM with a fallback: the fallback answers when the primary cannot.

The fallback is asked when the primary is unavailable (connection refused, timeout, 5xx, 429)
or answers with nothing readable as JSON. A refused request (4xx: wrong model name, bad key) is
not hidden behind the fallback: it is a configuration error, raised for the operator to fix.
"""

from __future__ import annotations

from typing import Any

from context_engine.llm.client import LLMClient
from context_engine.llm.errors import LLMOutputError, LLMUnavailableError
from context_engine.llm.parse import parse_json_payload
from her_os_shared.logging import get_logger

log = get_logger(__name__)


class FallbackClient:
    def __init__(self, primary: LLMClient, fallback: LLMClient) -> None:
        self.primary = primary
        self.fallback = fallback
        self.name = f"{primary.name}, falling back to {fallback.name}"

    async def complete_json(
        self, system: str, user: str, schema: dict[str, Any], schema_name: str
    ) -> str:
        try:
            text = await self.primary.complete_json(system, user, schema, schema_name)
            parse_json_payload(text)  # unreadable output is a failure of the primary
            return text
        except (LLMUnavailableError, LLMOutputError) as exc:
            log.warning(
                "llm_fallback", primary=self.primary.name, fallback=self.fallback.name,
                reason=type(exc).__name__, error=str(exc)[:300],
            )  # fmt: skip
            primary_error = exc
        try:
            return await self.fallback.complete_json(system, user, schema, schema_name)
        except (LLMUnavailableError, LLMOutputError) as exc:
            raise type(exc)(
                f"{exc} (after the primary {self.primary.name} failed: {primary_error})"
            ) from exc

    async def aclose(self) -> None:
        try:
            await self.primary.aclose()
        finally:
            await self.fallback.aclose()
