"""How many searches run at once: past `limit` in flight, a new one is refused at once
(`Overloaded`, which the route answers 503 with Retry-After) instead of queueing behind the
others until its client times out. The event loop is one thread, so a counter is enough;
memory stays bounded by the limit."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

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
    """At most `limit` searches in flight."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError("limit must be at least 1")
        self.limit = limit
        self.inflight = 0
        self.refused = 0

    @contextmanager
    def admit(self) -> Iterator[None]:
        if self.inflight >= self.limit:
            self.refused += 1
            raise OverloadedError(self.inflight)
        self.inflight += 1
        try:
            yield
        finally:
            self.inflight -= 1
