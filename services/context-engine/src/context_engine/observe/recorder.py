"""The engine modules' way to report an observability event: `await recorder.emit(...)`.

It hands the event to the chronicler (chronicler.py: ring, live stream, batched writes to
`observability_events` on the events pool). Recording never fails the caller and never waits
for PostgreSQL: a slow or broken events path degrades the Aquarium, never ingestion or the API.

Every LLM call, the extractor's and graphiti's alike, is an event of its model's creature
(`her_os_shared.creatures.ENGINE_LLMS`): its outcome ("complete" or "error") is also what the
engine's health knows of the LLM (health.py).
"""

from __future__ import annotations

from typing import Any

from context_engine.observe.chronicler import Chronicler
from context_engine.observe.health import Outcomes
from her_os_shared.creatures import ENGINE_LLMS
from her_os_shared.events import EventType, ObservabilityEvent


class EventRecorder:
    def __init__(self, chronicler: Chronicler, outcomes: Outcomes | None = None) -> None:
        self.chronicler = chronicler
        self.outcomes = outcomes if outcomes is not None else Outcomes()

    async def emit(
        self,
        creature: str,
        event_type: EventType | str,
        *,
        session_id: str | None = None,
        data: dict[str, Any] | None = None,
        reasoning: str | None = None,
    ) -> ObservabilityEvent | None:
        """Record an event of `creature` (its service, process and zone come from the
        registry); None when the event is invalid (logged: a bug in the caller)."""
        if creature in ENGINE_LLMS and event_type in (EventType.COMPLETE, EventType.ERROR):
            if event_type == EventType.COMPLETE:
                self.outcomes.succeeded("llm")
            else:
                self.outcomes.failed("llm", str((data or {}).get("error") or "LLM call failed"))
        return self.chronicler.record_event(
            creature, event_type, session_id=session_id, data=data, reasoning=reasoning
        )
