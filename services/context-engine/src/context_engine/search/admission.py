"""How many searches run at once: past `limit` in flight, a new one is refused at once
(`Overloaded`, which the route answers 503 with Retry-After) instead of queueing behind the
others until its client times out. The event loop is one thread, so a counter is enough;
memory stays bounded by the limit.

Of those admitted, at most `running` execute at once; the others wait their turn (first come,
first served) without costing the event loop anything; work that needs no turn (the query's
embedding, in a worker thread) starts while it waits. A search is mostly work on the loop and
the CPU: with every admitted search interleaved, each loop turn carried all their callbacks and
everything else the engine serves (`/health`, ingestion, Annie's other calls) waited behind
them, while running fewer at once keeps the same throughput (docs/benchmarks.md)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

# Seconds a refused client is asked to wait (Retry-After): a search takes tens of ms.
RETRY_AFTER_S = 1


class OverloadedError(RuntimeError):
    """Too many searches in flight; try again after `retry_after_s`."""

    def __init__(self, inflight: int) -> None:
        super().__init__(
            f"{inflight} searches are running, the most this engine takes at once "
            f"(CONTEXT_ENGINE_MAX_INFLIGHT_SEARCHES); try again in {RETRY_AFTER_S} s"
        )
        self.retry_after_s = RETRY_AFTER_S


class SearchGate:
    """At most `limit` searches in flight, of which at most `running` execute (0: all)."""

    def __init__(self, limit: int, running: int = 0) -> None:
        if limit < 1 or running < 0:
            raise ValueError("limit must be at least 1 and running not negative")
        self.limit = limit
        self.inflight = 0
        self.refused = 0
        self._turns = asyncio.Semaphore(running) if running else None

    @asynccontextmanager
    async def admit(self) -> AsyncIterator[None]:
        """Count a search in flight, or refuse it (`OverloadedError`) past `limit`."""
        if self.inflight >= self.limit:
            self.refused += 1
            raise OverloadedError(self.inflight)
        self.inflight += 1
        try:
            yield
        finally:
            self.inflight -= 1

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Execute an admitted search: wait until fewer than `running` execute."""
        if self._turns is None:
            yield
        else:
            async with self._turns:
                yield
