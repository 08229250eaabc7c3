"""An LLM client that reports each call as events (start, complete with timings and sizes,
error) of its model's creature, so the Aquarium shows every LLM call: the design's creature of
the model's family (qwen3:8b → unicorn), else kelpie (`creatures.engine_llm_creature`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from her_os_shared.creatures import engine_llm_creature
from her_os_shared.events import EventType

if TYPE_CHECKING:
    from context_engine.llm.client import LLMClient
    from context_engine.observe.recorder import EventRecorder


class ObservedLLM:
    def __init__(self, inner: LLMClient, recorder: EventRecorder, model: str | None = None) -> None:
        self.inner = inner
        self.recorder = recorder
        self.name = inner.name
        # The model's name as its server knows it (the client's `model`), else the client's name.
        self.creature = engine_llm_creature(model or getattr(inner, "model", None) or inner.name)

    async def complete_json(
        self, system: str, user: str, schema: dict[str, Any], schema_name: str
    ) -> str:
        asked = {"model": self.name, "schema": schema_name, "prompt_chars": len(system) + len(user)}
        await self.recorder.emit(self.creature, EventType.START, data=asked)
        started = time.perf_counter()
        try:
            answer = await self.inner.complete_json(system, user, schema, schema_name)
        except Exception as exc:
            await self.recorder.emit(
                self.creature,
                EventType.ERROR,
                data=asked | {"error": f"{type(exc).__name__}: {exc}"[:300]},
                reasoning=f"{self.name} failed on {schema_name}",
            )
            raise
        seconds = round(time.perf_counter() - started, 3)
        await self.recorder.emit(
            self.creature,
            EventType.COMPLETE,
            data=asked | {"answer_chars": len(answer), "seconds": seconds},
            reasoning=f"{self.name} answered {schema_name} in {seconds:.1f} s",
        )
        return answer

    async def aclose(self) -> None:
        await self.inner.aclose()
