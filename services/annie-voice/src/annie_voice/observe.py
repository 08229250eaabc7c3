"""Annie's observability: events of her creatures (the annie-voice ones of
`her_os_shared.creatures`: the chat session, the memory briefing, the responder, each tool, the
voice pipeline, its WebRTC connection, ears, voice and data channel) go into a bounded queue
and are POSTed to the engine's `/v1/events/emit` in batches every `events_flush_s` (2 s).

`emit` never blocks and never raises: when the queue is full the event is dropped and
counted; when the engine is down the batch is dropped, counted and logged.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from annie_voice.engine import EngineClient, EngineUnavailableError
from her_os_shared.creatures import Service, get_creature
from her_os_shared.events import EventType, ObservabilityEvent
from her_os_shared.logging import get_logger

log = get_logger(__name__)


@dataclass
class ObserverStats:
    queued: int = 0
    sent: int = 0
    dropped_full: int = 0
    dropped_failed: int = 0
    rejected: int = 0
    invalid: int = 0

    def as_dict(self) -> dict[str, int]:
        return dict(self.__dict__)


class Observer:
    def __init__(
        self,
        engine: EngineClient | None,
        *,
        queue_size: int = 500,
        flush_s: float = 2.0,
        batch_max: int = 500,
    ) -> None:
        self.engine = engine
        self.flush_s = flush_s
        self.batch_max = batch_max
        self.queue: asyncio.Queue[ObservabilityEvent] = asyncio.Queue(maxsize=queue_size)
        self.stats = ObserverStats()
        self._task: asyncio.Task[None] | None = None

    def emit(
        self,
        creature: str,
        event_type: EventType | str,
        *,
        session_id: str | None = None,
        data: dict[str, Any] | None = None,
        reasoning: str | None = None,
    ) -> None:
        """Queue one event; drop it (counted) when the queue is full or it is invalid."""
        if self.engine is None:
            return
        try:
            if get_creature(creature).service != Service.ANNIE_VOICE:
                raise ValueError(f"{creature!r} is not a creature of annie-voice")
            event = ObservabilityEvent.for_creature(
                creature, event_type, session_id=session_id, data=data, reasoning=reasoning
            )
        except (ValueError, KeyError) as exc:
            self.stats.invalid += 1
            log.warning("observe.invalid_event", creature=creature, error=str(exc)[:200])
            return
        try:
            self.queue.put_nowait(event)
        except asyncio.QueueFull:
            self.stats.dropped_full += 1
            return
        self.stats.queued += 1

    async def flush(self) -> int:
        """Send what is queued now, in batches of at most `batch_max`; returns how many were
        accepted. Never raises."""
        accepted = 0
        while not self.queue.empty() and self.engine is not None:
            batch: list[ObservabilityEvent] = []
            while len(batch) < self.batch_max and not self.queue.empty():
                batch.append(self.queue.get_nowait())
            payload = [e.model_dump(mode="json") for e in batch]
            try:
                answer = await self.engine.emit(payload)
            except EngineUnavailableError as exc:
                self.stats.dropped_failed += len(batch)
                log.warning("observe.batch_dropped", events=len(batch), reason=exc.reason)
                return accepted
            ok = answer.get("accepted", len(batch))
            ok = ok if isinstance(ok, int) else len(batch)
            # `rejected`: a count (the design's form); a list from an engine before it
            rejected = answer.get("rejected") or 0
            self.stats.sent += ok
            self.stats.rejected += len(rejected) if isinstance(rejected, list) else int(rejected)
            accepted += ok
        return accepted

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.flush_s)
            await self.flush()

    def start(self) -> None:
        if self._task is None and self.engine is not None:
            self._task = asyncio.create_task(self._run(), name="annie-observer")

    async def stop(self) -> None:
        """Stop the loop and send what is left (best effort)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self.flush()
        if self.stats.dropped_full or self.stats.dropped_failed:
            log.warning("observe.dropped", **self.stats.as_dict())
