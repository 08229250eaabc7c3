"""One way to keep what an async call computed: a bounded LRU whose concurrent misses on one
key share a single call (`AsyncLRU`). Used where a request repeats work it did moments ago
(a query's vector, a query's parse in PostgreSQL).

`await lru.get(key, compute)`: the kept value, else the running call for that key, else a
new `compute()`. The call is shielded, so a caller that gives up (a timeout cancelling it)
leaves it to the others waiting on the same key; a failed or cancelled call is not kept (the
next caller tries again). `size=0` keeps nothing: only callers that overlap share a call (a
health check asked by several probes at once is run once)."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class AsyncLRU(Generic[K, V]):
    def __init__(self, size: int) -> None:
        if size < 0:
            raise ValueError("size must not be negative")
        self.size = size
        self._kept: OrderedDict[K, V] = OrderedDict()
        self._pending: dict[K, asyncio.Future[V]] = {}
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        return len(self._kept)

    async def get(self, key: K, compute: Callable[[], Awaitable[V]]) -> V:
        if key in self._kept:
            self._kept.move_to_end(key)
            self.hits += 1
            return self._kept[key]
        task = self._pending.get(key)
        if task is None:
            self.misses += 1
            task = asyncio.ensure_future(compute())
            self._pending[key] = task
            task.add_done_callback(lambda done: self._settle(key, done))
        else:  # the same key, being computed now
            self.hits += 1
        return await asyncio.shield(task)

    def _settle(self, key: K, done: asyncio.Future[V]) -> None:
        self._pending.pop(key, None)
        if done.cancelled() or done.exception() is not None:
            return  # exception() also marks it retrieved when every caller gave up
        if self.size == 0:
            return
        self._kept[key] = done.result()
        if len(self._kept) > self.size:
            self._kept.popitem(last=False)
