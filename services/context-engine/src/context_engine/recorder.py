"""The engine modules' way to report an observability event: `await recorder.emit(...)`.

It hands the event to the chronicler (chronicler.py: ring, live stream, batched writes to
`observability_events` on the events pool). Recording never fails the caller and never waits
for PostgreSQL: a slow or broken events path degrades the Aquarium, never ingestion or the API.
"""

from __future__ import annotations

from typing import Any

from context_engine.chronicler import Chronicler
from her_os_shared.events import EventType, ObservabilityEvent


class EventRecorder:
    def __init__(self, chronicler: Chronicler) -> None:
        self.chronicler = chronicler

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
        return self.chronicler.record_event(
            creature, event_type, session_id=session_id, data=data, reasoning=reasoning
        )
