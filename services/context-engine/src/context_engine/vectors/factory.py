"""`make_vector_store(settings)`: the store the settings choose, its backend imported only then."""

from __future__ import annotations

from typing import TYPE_CHECKING

from context_engine.vectors.base import VectorStore, VectorStoreConfigError

if TYPE_CHECKING:
    from context_engine.config import Settings


def make_vector_store(settings: Settings) -> VectorStore:
    """The store the settings choose (`vector_backend`: "edge" or "qdrant")."""
    prefix = settings.qdrant_collection_prefix
    if settings.vector_backend == "edge":
        from context_engine.vectors.edge import EdgeVectorStore

        return EdgeVectorStore(settings.vector_dir, prefix=prefix)
    if settings.vector_backend == "qdrant":
        if not settings.qdrant_url:
            raise VectorStoreConfigError(
                "vector_backend is 'qdrant' but no Qdrant server URL is set: set "
                f"{settings.env_name('qdrant_url')} (e.g. http://qdrant:6333), or "
                f"{settings.env_name('vector_backend')}=edge for the embedded store"
            )
        # Imported here: qdrant-client is only needed when a server is configured.
        from context_engine.vectors.qdrant import QdrantVectorStore

        key = settings.qdrant_api_key
        return QdrantVectorStore(
            url=settings.qdrant_url,
            api_key=key.get_secret_value() if key is not None else None,
            prefix=prefix,
        )
    raise VectorStoreConfigError(  # pragma: no cover (Settings validates the literal)
        f"unknown vector backend {settings.vector_backend!r}; set "
        f"{settings.env_name('vector_backend')}"
    )
