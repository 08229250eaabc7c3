"""An embedder that reports the outcome of each call to the engine's health (health.py):
the model or server behind it is too costly to probe for `/health`, so its real calls are
the evidence — a failure marks "embedder" degraded until a call succeeds."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from context_engine.embed.base import Embedder
from context_engine.observe.health import Outcomes

LAYER = "embedder"


class ObservedEmbedder(Embedder):
    def __init__(self, inner: Embedder, outcomes: Outcomes) -> None:
        self.inner = inner
        self.outcomes = outcomes
        self.name = inner.name
        self.dim = inner.dim

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        try:
            vectors = await self.inner.embed_passages(texts)
        except Exception as exc:
            self.outcomes.failed(LAYER, exc)
            raise
        self.outcomes.succeeded(LAYER)
        return vectors

    async def embed_query(self, text: str) -> np.ndarray:
        try:
            vector = await self.inner.embed_query(text)
        except Exception as exc:
            self.outcomes.failed(LAYER, exc)
            raise
        self.outcomes.succeeded(LAYER)
        return vector

    async def close(self) -> None:
        await self.inner.close()
