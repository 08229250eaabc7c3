"""Ollama's native embedding endpoint, `POST /api/embed` (production: Qwen3-Embedding).

One request embeds a whole batch (`input` is a list). Ollama truncates over-long inputs to the
model's context itself (`truncate: true`). Vectors are Matryoshka-truncated to `embed_dim` and
re-normalised here (`matryoshka`), so any dimension up to the model's works without asking the
server for one. Errors name the server and, for a dimension the model cannot give, the setting.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import httpx
import numpy as np

from context_engine.embed.base import Embedder, EmbedderError, matryoshka, server_url

if TYPE_CHECKING:
    from context_engine.config import Settings

# Inputs per request: large enough to keep a GPU busy, small enough to bound one request.
BATCH = 64


class OllamaEmbedder(Embedder):
    def __init__(
        self,
        base_url: str,
        model: str,
        dim: int,
        *,
        timeout_s: float = 120.0,
        query_prefix: str = "",
        dim_setting: str = "CONTEXT_ENGINE_EMBED_DIM",
    ) -> None:
        self.base_url = base_url.rstrip("/").removesuffix("/v1")
        self.model = model
        self.dim = dim
        self.name = f"ollama:{model}"
        self.query_prefix = query_prefix
        self._dim_setting = dim_setting
        self._client = httpx.AsyncClient(base_url=self.base_url, timeout=timeout_s)

    @classmethod
    def from_settings(cls, settings: Settings) -> OllamaEmbedder:
        return cls(
            server_url(settings, "http://127.0.0.1:11434"),
            settings.embed_model,
            settings.embed_dim,
            timeout_s=settings.llm_timeout_s,
            query_prefix=settings.embed_query_prefix,
            dim_setting=settings.env_name("embed_dim"),
        )

    async def _request(self, batch: list[str]) -> list[Any]:
        try:
            response = await self._client.post(
                "/api/embed", json={"model": self.model, "input": batch, "truncate": True}
            )
        except httpx.HTTPError as exc:
            raise EmbedderError(
                f"embedding server {self.base_url} failed: {type(exc).__name__}: {exc}"
            ) from exc
        if response.status_code != 200:
            raise EmbedderError(
                f"embedding server {self.base_url} answered {response.status_code}: "
                f"{response.text[:300]} (is model {self.model!r} pulled?)"
            )
        try:
            embeddings = response.json()["embeddings"]
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbedderError(f"embedding server {self.base_url}: no embeddings") from exc
        if not isinstance(embeddings, list) or len(embeddings) != len(batch):
            got = len(embeddings) if isinstance(embeddings, list) else "no"
            raise EmbedderError(f"embedding server returned {got} vectors for {len(batch)} inputs")
        return embeddings

    async def _embed(self, texts: list[str]) -> np.ndarray:
        rows: list[Any] = []
        for i in range(0, len(texts), BATCH):
            rows.extend(await self._request(texts[i : i + BATCH]))
        try:
            vectors = np.asarray(rows, dtype=np.float32)
        except (ValueError, TypeError) as exc:
            raise EmbedderError(f"embedding server returned malformed vectors: {exc}") from exc
        return matryoshka(vectors, self.dim, self.model, self._dim_setting)

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        return await self._embed(list(texts))

    async def embed_query(self, text: str) -> np.ndarray:
        return (await self._embed([self.query_prefix + text]))[0]

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        return await self._embed([self.query_prefix + t for t in texts])

    async def close(self) -> None:
        await self._client.aclose()
