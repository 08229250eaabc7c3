"""Vector stores behind one interface: Qdrant Edge in process (the embedded default,
`edge.py`) and a Qdrant server through qdrant-client (production, `qdrant.py`).

The backends are imported by `make_vector_store` when chosen, not here (the child process
that builds Edge indexes runs `python -m context_engine.vectors.edge`)."""

from context_engine.vectors.base import (
    KINDS,
    PAYLOAD_FIELDS,
    Kind,
    SpaceName,
    UnknownSpaceError,
    VectorHit,
    VectorPoint,
    VectorStore,
    VectorStoreConfigError,
    VectorStoreError,
    VectorStoreUnavailable,
    point_id,
)
from context_engine.vectors.factory import make_vector_store

__all__ = [
    "KINDS",
    "PAYLOAD_FIELDS",
    "Kind",
    "SpaceName",
    "UnknownSpaceError",
    "VectorHit",
    "VectorPoint",
    "VectorStore",
    "VectorStoreConfigError",
    "VectorStoreError",
    "VectorStoreUnavailable",
    "make_vector_store",
    "point_id",
]
