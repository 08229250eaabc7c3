"""Memory searches started before a turn asks for them.

In a voice turn the user's words are known before the turn ends: the transcript arrives
while Annie still waits out the silence that ends a turn (0.3 s after the VAD's stop). The
voice pipeline hands that transcript to `ChatService.prepare`, which starts the search the
offline responder will make; the turn then takes the result instead of searching again.

Forgetting stays exact: a search is started only with the engine's forget marker read just
before it, and every turn that could take one first reads the marker again and drops the
searches started under another (`keep_only`). A search the turn does not take (the final
words differ, it is older than `ttl_s`, it failed) costs nothing but the request: the turn
searches as it always did.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from her_os_shared.logging import get_logger

log = get_logger(__name__)

Found = TypeVar("Found")  # what a search gives (the offline responder's: engine.Recall)
Search = Callable[[str], Awaitable[Found]]
_WORDS = re.compile(r"\w+")


def query_key(text: str) -> str:
    """The words of `text`, case-folded: two transcripts of the same words (punctuation and
    spacing aside, as Pipecat joins the parts of a turn) are the same query."""
    return " ".join(_WORDS.findall(text.casefold()))


@dataclass
class _Started(Generic[Found]):
    marker: str
    at: float
    task: asyncio.Task[Found]


def _retrieve(task: asyncio.Task[object]) -> None:
    # A search nobody takes may fail; its error is the turn's to report, not the loop's.
    if not task.cancelled():
        task.exception()


class MemoryLookahead(Generic[Found]):
    def __init__(self, search: Search[Found], *, ttl_s: float = 5.0, capacity: int = 4) -> None:
        self._search = search
        self.ttl_s = ttl_s
        self.capacity = capacity
        self._started: OrderedDict[str, _Started[Found]] = OrderedDict()
        self.used = 0
        self.unused = 0

    def __len__(self) -> int:
        return len(self._started)

    def start(self, query: str, marker: str | None) -> None:
        """Start searching for `query` (once per query and marker). Without a marker (the
        engine did not say what it has forgotten) nothing starts: the result could never be
        trusted."""
        key = query_key(query)
        if marker is None or not key:
            return
        now = time.monotonic()
        old = self._started.get(key)
        if old is not None and old.marker == marker and now - old.at < self.ttl_s:
            return
        self._drop(key)
        task = asyncio.create_task(self._search(query), name="memory-lookahead")
        task.add_done_callback(_retrieve)
        self._started[key] = _Started(marker, now, task)
        while len(self._started) > self.capacity:
            self._drop(next(iter(self._started)))

    def pending(self, query: str) -> bool:
        return query_key(query) in self._started

    def keep_only(self, marker: str | None) -> None:
        """Drop the searches started under another forget marker (all of them when the
        marker is unknown)."""
        for key in [k for k, s in self._started.items() if marker is None or s.marker != marker]:
            self._drop(key)

    async def take(self, query: str) -> Found | None:
        """The memories the search for `query` found, or None (none started, too old, failed):
        then the caller searches itself."""
        started = self._started.pop(query_key(query), None)
        if started is None:
            return None
        if time.monotonic() - started.at >= self.ttl_s:
            self._discard(started)
            return None
        try:
            memories = await started.task
        except Exception as exc:  # the caller's own search reports the failure
            log.info("chat.lookahead_failed", error=str(exc)[:200])
            self.unused += 1
            return None
        self.used += 1
        return memories

    def _drop(self, key: str) -> None:
        started = self._started.pop(key, None)
        if started is not None:
            self._discard(started)

    def _discard(self, started: _Started) -> None:
        started.task.cancel()
        self.unused += 1

    def stats(self) -> dict[str, int]:
        return {"used": self.used, "unused": self.unused, "pending": len(self._started)}
