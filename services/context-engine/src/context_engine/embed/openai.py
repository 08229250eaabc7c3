"""Any OpenAI-compatible `/v1/embeddings` server (Ollama Qwen3-Embedding in production,
vLLM, llama-server, OpenAI itself).

Vectors are Matryoshka-truncated to `embed_dim` and re-normalised here rather than asking the
server for `dimensions` (Ollama and llama-server ignore or reject that field). A server that
returns fewer dimensions than `embed_dim` is a configuration error, reported with the setting.
The API key is `embed_api_key` (local servers need none).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from context_engine.embed.base import Embedder, EmbedderError, matryoshka, server_url

if TYPE_CHECKING:
    from openai import AsyncOpenAI

    from context_engine.config import Settings

# Inputs per request (servers cap batch sizes; Ollama is happy with a few dozen).
BATCH = 64


class OpenAIEmbedder(Embedder):
    def __init__(
        self,
        base_url: str,
        model: str,
        dim: int,
        *,
        api_key: str = "not-needed",
        timeout_s: float = 120.0,
        query_prefix: str = "",
        passage_prefix: str = "",
        dim_setting: str = "CONTEXT_ENGINE_EMBED_DIM",
    ) -> None:
        self.base_url = base_url
        self.model = model
        self.dim = dim
        self.name = f"openai:{model}"
        self._api_key = api_key
        self._timeout_s = timeout_s
        # Instruction-tuned embedders (Qwen3-Embedding) want an instruction before queries.
        self.query_prefix = query_prefix
        self.passage_prefix = passage_prefix
        self._dim_setting = dim_setting
        self._client: AsyncOpenAI | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> OpenAIEmbedder:
        return cls(
            server_url(settings, "http://127.0.0.1:11434/v1"),
            settings.embed_model,
            settings.embed_dim,
            api_key=settings.embed_api_key.get_secret_value(),
            timeout_s=settings.llm_timeout_s,
            query_prefix=settings.embed_query_prefix,
            dim_setting=settings.env_name("embed_dim"),
        )

    def _get_client(self) -> AsyncOpenAI:
        if self._client is None:
            from openai import AsyncOpenAI

            self._client = AsyncOpenAI(
                base_url=self.base_url,
                api_key=self._api_key,
                timeout=self._timeout_s,
                max_retries=1,
            )
        return self._client

    async def _embed(self, texts: list[str]) -> np.ndarray:
        import openai

        rows: list[list[float]] = []
        for i in range(0, len(texts), BATCH):
            batch = texts[i : i + BATCH]
            try:
                response = await self._get_client().embeddings.create(model=self.model, input=batch)
            except openai.OpenAIError as exc:
                raise EmbedderError(
                    f"embedding server {self.base_url} failed: {type(exc).__name__}: {exc}"
                ) from exc
            data = sorted(response.data, key=lambda d: d.index)
            if len(data) != len(batch):
                raise EmbedderError(
                    f"embedding server returned {len(data)} vectors for {len(batch)} inputs"
                )
            rows.extend(list(d.embedding) for d in data)
        vectors = np.asarray(rows, dtype=np.float32)
        return matryoshka(vectors, self.dim, self.model, self._dim_setting)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        items = [self.passage_prefix + t for t in texts]
        if not items:
            return np.empty((0, self.dim), dtype=np.float32)
        return await self._embed(items)

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self._embed([self.query_prefix + text]))[0]

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        return await self._embed([self.query_prefix + t for t in texts])

    async def close(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
