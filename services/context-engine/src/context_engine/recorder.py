"""Records the engine's observability events in `observability_events` (the events pool).

Recording never fails the caller: an event that cannot be stored is logged and dropped, so a
slow or broken events path degrades the Aquarium, never ingestion or the API. The chronicler
(issue 8) streams and replays these rows.
"""

from __future__ import annotations

import asyncio
from typing import Any

from sqlalchemy import insert
from sqlalchemy.ext.asyncio import AsyncEngine

from context_engine.models import ObservabilityEventRow
from her_os_shared.events import EventType, ObservabilityEvent
from her_os_shared.logging import get_logger

log = get_logger(__name__)


class EventRecorder:
    def __init__(self, engine: AsyncEngine, timeout_s: float = 2.0) -> None:
        self.engine = engine
        self.timeout_s = timeout_s

    async def emit(
        self,
        creature: str,
        event_type: EventType | str,
        *,
        session_id: str | None = None,
        data: dict[str, Any] | None = None,
        reasoning: str | None = None,
    ) -> ObservabilityEvent | None:
        try:
            event = ObservabilityEvent.for_creature(
                creature, event_type, session_id=session_id, data=data, reasoning=reasoning
            )
        except ValueError as exc:  # a bug in the caller: say so, never break the caller
            log.error("events.invalid", creature=creature, error=str(exc)[:500])
            return None
        await self.record(event)
        return event

    async def record(self, event: ObservabilityEvent) -> bool:
        row = event.model_dump(mode="python", exclude={"schema_version"})
        try:
            async with asyncio.timeout(self.timeout_s), self.engine.begin() as conn:
                await conn.execute(insert(ObservabilityEventRow).values(**row))
        except Exception as exc:  # the events path is best effort by design (see above)
            log.warning("events.dropped", creature=event.creature, error=repr(exc)[:300])
            return False
        return True
