"""An LLM client that reports each call as the `leviathan` creature's events (start,
complete with timings and sizes, error), so the Aquarium shows every LLM call."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from context_engine.llm.client import LLMClient
    from context_engine.recorder import EventRecorder

CREATURE = "leviathan"


class ObservedLLM:
    def __init__(self, inner: LLMClient, recorder: EventRecorder) -> None:
        self.inner = inner
        self.recorder = recorder
        self.name = inner.name

    async def complete_json(
        self, system: str, user: str, schema: dict[str, Any], schema_name: str
    ) -> str:
        asked = {"model": self.name, "schema": schema_name, "prompt_chars": len(system) + len(user)}
        await self.recorder.emit(CREATURE, "start", data=asked)
        started = time.perf_counter()
        try:
            answer = await self.inner.complete_json(system, user, schema, schema_name)
        except Exception as exc:
            await self.recorder.emit(
                CREATURE,
                "error",
                data=asked | {"error": f"{type(exc).__name__}: {exc}"[:300]},
                reasoning=f"{self.name} failed on {schema_name}",
            )
            raise
        seconds = round(time.perf_counter() - started, 3)
        await self.recorder.emit(
            CREATURE,
            "complete",
            data=asked | {"answer_chars": len(answer), "seconds": seconds},
            reasoning=f"{self.name} answered {schema_name} in {seconds:.1f} s",
        )
        return answer

    async def aclose(self) -> None:
        await self.inner.aclose()
