"""Our embedders as graphiti-core's `EmbedderClient`, and a reranker built on them.

graphiti embeds entity names and facts (stored passages) and, inside add_episode, compares
them with each other: those calls get passage vectors. Search queries get a query vector
from `embed_query`, passed to graphiti's search as `query_vector` by the graph layer, so the
asymmetric e5 prefixes are used as intended.

`EmbeddingReranker` implements graphiti's `CrossEncoderClient` by cosine similarity of our
embeddings: a bi-encoder ranking (not a cross-encoder), with no LLM, no API key and no model
download, for the search recipes that ask for a reranker.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np

os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"  # before graphiti is imported

from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.embedder.client import EmbedderClient

from context_engine.embed.base import Embedder, EmbedderError


class GraphitiEmbedder(EmbedderClient):
    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    async def create(
        self, input_data: str | list[str] | Iterable[int] | Iterable[Iterable[int]]
    ) -> list[float]:
        """The vector of one text (graphiti passes `[text]` and uses the first vector)."""
        if isinstance(input_data, str):
            text = input_data
        else:
            items = list(input_data)
            if not items or not isinstance(items[0], str):
                raise EmbedderError("graphiti asked to embed token ids; only text is supported")
            text = items[0]
        vectors = await self.embedder.embed_passages([text])
        return vectors[0].tolist()

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        vectors = await self.embedder.embed_passages(list(input_data_list))
        return vectors.tolist()


class EmbeddingReranker(CrossEncoderClient):
    """Ranks passages by cosine similarity to the query (our embedder, no LLM)."""

    def __init__(self, embedder: Embedder) -> None:
        self.embedder = embedder

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        if not passages:
            return []
        q = await self.embedder.embed_query(query)
        p = await self.embedder.embed_passages(passages)
        scores = p @ q
        order = np.argsort(-scores, kind="stable")
        return [(passages[i], float(scores[i])) for i in order]
