"""The vector-store interface both backends implement (`make_vector_store` is in factory.py).

A *space* holds the vectors of one embedding model at one dimension, compared by one distance
(`SpaceName`): a Qdrant collection, or one Qdrant Edge shard, named `{prefix}_{model}_{dim}`
(cosine) or `{prefix}_{model}_{dim}_dot` (inner product). A new model or layout fills a new
space in the background; `drop_space` retires the old one.

Point ids are uuid5 of the point's kind and key (`segment:{session_id}/{segment_id}`,
`entity:{entity_id}`), so writing the same segment twice replaces it: upserts are idempotent
and a retried job never duplicates a point. Every stored payload records the model and
dimension of its vector beside the design's fields (`PAYLOAD_FIELDS`).
"""

from __future__ import annotations

import math
import re
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Literal, Self

import numpy as np

if TYPE_CHECKING:
    pass

Kind = Literal["segment", "entity"]
KINDS: tuple[Kind, ...] = ("segment", "entity")

# Fixed forever: point ids are derived from it, so changing it orphans every stored point.
POINT_NAMESPACE = uuid.UUID("6f1c2b8e-3d4a-5e6f-8a9b-0c1d2e3f4a5b")
# Stored text is a preview for the caller (the full text lives in PostgreSQL).
TEXT_LIMIT = 1000
# Payload fields with an index in both backends (what searches filter on).
INDEXED_FIELDS: dict[str, Literal["keyword", "float"]] = {
    "kind": "keyword",
    "session_id": "keyword",
    "spoken_at": "float",
}
PAYLOAD_FIELDS = (
    "kind",
    "session_id",
    "segment_id",
    "speaker",
    "spoken_at",  # epoch seconds (float), for range filters
    "text",
    "entity_id",
    "name",
    "type",
    "model",
    "dim",
)
Distance = Literal["cosine", "dot"]
DISTANCES: tuple[Distance, ...] = ("cosine", "dot")
# The largest `limit` a search may ask for.
MAX_LIMIT = 1000

# HNSW graph and search ef of both backends, chosen on evidence
# (bench/context_engine/vector_latency.py: realistic 384-d points, 200 real questions,
# recall@10 against exact search, 2 cores).
# At 100k, m=16/ef_construct=100 (Qdrant's defaults) gave recall 0.945 at ef 64, 0.98 at
# ef 128, 0.997 at ef 256; m=24 or ef_construct 128–200 bought under 0.01 of recall for
# 30–130 % more build time; m=8 or ef_construct 48 fell below 0.95 at ef 128. At 1M, ef 128
# fell to 0.939 and ef 256 held 0.977 (p95 5 ms warm), so searches use ef 256. It also
# covers filtered searches: with a window holding half the points, ef 128 gave 0.944 at 20k
# (0.967 at 256) and queries with recall 0 at 100k (none at 256).
HNSW_M = 16
HNSW_EF_CONSTRUCT = 100
SEARCH_EF = 256


class VectorStoreError(RuntimeError):
    """A vector backend failed (storage, server, response)."""


class VectorStoreConfigError(VectorStoreError):
    """The settings do not describe a usable vector store; the message names the setting."""


class VectorStoreUnavailable(VectorStoreError):
    """The backend cannot be reached (Qdrant server down, wrong URL, bad API key)."""


class UnknownSpaceError(VectorStoreError, KeyError):
    """The space does not exist (call `ensure_space` first)."""

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0]) if self.args else ""


def slug(model: str) -> str:
    """A model name as it may appear in a collection or directory name: [a-z0-9-]."""
    s = re.sub(r"[^a-z0-9]+", "-", model.lower()).strip("-")
    if not s:
        raise ValueError(f"model name {model!r} has no letters or digits")
    return s


@dataclass(frozen=True, slots=True)
class SpaceName:
    """The vectors of one embedding model (`Embedder.name`) at one dimension. `cosine`
    spaces hold unit vectors; `dot` spaces are searched by inner product, for points that
    are not unit length (the mean of two unit vectors: embedding.py)."""

    model: str
    dim: int
    distance: Distance = "cosine"

    def __post_init__(self) -> None:
        if not isinstance(self.dim, int) or self.dim < 1:
            raise ValueError(f"dimension must be a positive integer, got {self.dim!r}")
        if self.distance not in DISTANCES:
            raise ValueError(f"distance must be one of {DISTANCES}, got {self.distance!r}")
        slug(self.model)  # fails early on an unusable name

    def name(self, prefix: str) -> str:
        """The collection / shard name: `{prefix}_{slug(model)}_{dim}`, `_dot` after it for
        an inner-product space (cosine spaces keep the names they always had)."""
        suffix = "" if self.distance == "cosine" else f"_{self.distance}"
        return f"{prefix}_{slug(self.model)}_{self.dim}{suffix}"

    @classmethod
    def of(cls, embedder: Any, distance: Distance = "cosine") -> SpaceName:
        """The space of an `Embedder` (its `name` and `dim`)."""
        return cls(embedder.name, embedder.dim, distance)


def point_id(kind: Kind, key: Sequence[str]) -> str:
    """The point id of a key: uuid5, the same on every run and in every backend."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if not key or any(not isinstance(k, str) or not k for k in key):
        raise ValueError(f"key must be non-empty strings, got {key!r}")
    return str(uuid.uuid5(POINT_NAMESPACE, f"{kind}:{'/'.join(key)}"))


def epoch_seconds(value: datetime | float) -> float:
    """`spoken_at` as stored: seconds since the epoch (a datetime must carry its zone)."""
    if isinstance(value, datetime):
        if value.tzinfo is None:
            raise ValueError("spoken_at must be timezone-aware (or epoch seconds)")
        return value.timestamp()
    return float(value)


@dataclass(frozen=True, slots=True)
class VectorPoint:
    """One vector to store. `key` is (session_id, segment_id) for a segment, (entity_id,)
    for an entity; `vector` is float32 of the space's dimension (unit length in a cosine
    space)."""

    kind: Kind
    key: tuple[str, ...]
    vector: np.ndarray
    payload: Mapping[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return point_id(self.kind, self.key)

    @classmethod
    def segment(
        cls,
        session_id: str,
        segment_id: str,
        vector: np.ndarray,
        *,
        spoken_at: datetime | float,
        text: str,
        speaker: str | None = None,
    ) -> VectorPoint:
        return cls(
            "segment",
            (session_id, segment_id),
            vector,
            {"speaker": speaker, "spoken_at": epoch_seconds(spoken_at), "text": text},
        )

    @classmethod
    def entity(
        cls, entity_id: str, vector: np.ndarray, *, name: str, type: str | None = None
    ) -> VectorPoint:
        return cls("entity", (entity_id,), vector, {"name": name, "type": type})


@dataclass(frozen=True, slots=True)
class VectorHit:
    id: str
    score: float  # cosine similarity (inner product in a dot space), higher is closer
    payload: dict[str, Any]

    @property
    def kind(self) -> str | None:
        return self.payload.get("kind")

    @property
    def key(self) -> tuple[str, ...]:
        """(session_id, segment_id) of a segment hit, (entity_id,) of an entity hit."""
        if self.payload.get("kind") == "entity":
            return (self.payload["entity_id"],)
        return (self.payload["session_id"], self.payload["segment_id"])


@dataclass(frozen=True, slots=True)
class Prepared:
    """A point checked and converted for a backend."""

    id: str
    vector: np.ndarray  # float32, (dim,)
    payload: dict[str, Any]


def prepare(space: SpaceName, points: Sequence[VectorPoint]) -> list[Prepared]:
    """Check every point (kind, key, dimension, finite values) and build its payload.

    Raises ValueError naming the first bad point; nothing is written when one is bad.
    (Vectors are checked and converted as one matrix: per-point numpy calls cost more than
    the store's own write.)
    """
    if not points:
        return []
    label = [f"{p.kind} {'/'.join(map(str, p.key))}" for p in points]
    vectors = [np.asarray(p.vector, dtype=np.float32) for p in points]
    for i, vec in enumerate(vectors):
        if vec.shape != (space.dim,):
            raise ValueError(
                f"vector of {label[i]} has shape {vec.shape}; space "
                f"{space.model}/{space.dim} takes vectors of {space.dim} dimensions"
            )
    matrix = np.stack(vectors)
    bad = ~(np.isfinite(matrix).all(axis=1) & matrix.any(axis=1))
    if bad.any():
        raise ValueError(f"vector of {label[int(np.argmax(bad))]} is zero or not finite")
    out: list[Prepared] = []
    for p, row in zip(points, matrix, strict=True):
        pid = p.id  # checks kind and key
        payload = {k: v for k, v in p.payload.items() if v is not None}
        if p.kind == "segment":
            if len(p.key) != 2:
                raise ValueError(f"a segment key is (session_id, segment_id), got {p.key!r}")
            payload["session_id"], payload["segment_id"] = p.key
            if "spoken_at" in payload:
                payload["spoken_at"] = epoch_seconds(payload["spoken_at"])
                if not math.isfinite(payload["spoken_at"]):
                    raise ValueError(f"spoken_at of segment {'/'.join(p.key)} is not finite")
        else:
            if len(p.key) != 1:
                raise ValueError(f"an entity key is (entity_id,), got {p.key!r}")
            payload["entity_id"] = p.key[0]
        text = payload.get("text")
        if isinstance(text, str) and len(text) > TEXT_LIMIT:
            payload["text"] = text[:TEXT_LIMIT]
        payload.update(kind=p.kind, model=space.model, dim=space.dim)
        out.append(Prepared(pid, row, payload))
    return out


@dataclass(frozen=True, slots=True)
class SearchFilter:
    """What a search keeps: `spoken_after <= spoken_at < spoken_before` (points without a
    `spoken_at`, i.e. entities, are left out by either bound), any of `session_ids`."""

    kind: Kind | None = None
    spoken_before: float | None = None
    spoken_after: float | None = None
    session_ids: tuple[str, ...] | None = None

    @property
    def empty_result(self) -> bool:
        """True when nothing can match (no session ids, or an empty time range)."""
        if self.session_ids is not None and not self.session_ids:
            return True
        return (
            self.spoken_before is not None
            and self.spoken_after is not None
            and self.spoken_after >= self.spoken_before
        )


def check_search(
    space: SpaceName,
    vector: np.ndarray,
    limit: int,
    kind: Kind | None,
    spoken_before: datetime | float | None,
    spoken_after: datetime | float | None,
    session_ids: Sequence[str] | None,
) -> tuple[list[float], SearchFilter]:
    """Validate a search's arguments (ValueError on a bad one) → query vector and filter."""
    vec = np.asarray(vector, dtype=np.float32)
    if vec.shape != (space.dim,):
        raise ValueError(
            f"query vector has shape {vec.shape}; space {space.model}/{space.dim} "
            f"takes vectors of {space.dim} dimensions"
        )
    if not np.all(np.isfinite(vec)) or not np.any(vec):
        raise ValueError("query vector is zero or not finite")
    if not 1 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit must be between 1 and {MAX_LIMIT}, got {limit}")
    if kind is not None and kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    if isinstance(session_ids, str):
        raise ValueError("session_ids is a list of ids, not one string")
    return vec.tolist(), SearchFilter(
        kind=kind,
        spoken_before=None if spoken_before is None else epoch_seconds(spoken_before),
        spoken_after=None if spoken_after is None else epoch_seconds(spoken_after),
        session_ids=None if session_ids is None else tuple(session_ids),
    )


# (point id, session_id, segment_id)
SegmentPointKey = tuple[str, str, str]
SCAN_PAGE = 1000


def segment_key(point_id_: object, payload: Mapping[str, Any] | None) -> SegmentPointKey | None:
    """The key of a scanned point, or None for an entity point (or a payload without one)."""
    p = payload or {}
    if p.get("kind", "segment") != "segment" or "session_id" not in p or "segment_id" not in p:
        return None
    return (str(point_id_), str(p["session_id"]), str(p["segment_id"]))


class VectorStore(ABC):
    """Vectors of segments and entities, searched by the space's distance.

    Every method is a coroutine that is safe to call from the event loop and from
    concurrent tasks: writes to one space are applied in the order they were called,
    searches may run beside each other and beside writes. `open()` before use; `close()`
    flushes and releases everything (idempotent).
    """

    prefix: str

    @abstractmethod
    async def open(self) -> None:
        """Connect / load; raises VectorStoreUnavailable when the backend is unreachable."""

    @abstractmethod
    async def close(self) -> None: ...

    def name_of(self, space: SpaceName | str) -> str:
        return space if isinstance(space, str) else space.name(self.prefix)

    @abstractmethod
    async def ensure_space(self, space: SpaceName) -> None:
        """Create the space (its distance, payload indexes) unless it exists; VectorStoreError
        when a space of that name holds other vectors (model, dimension or distance)."""

    @abstractmethod
    async def upsert(self, space: SpaceName, points: Sequence[VectorPoint]) -> None:
        """Insert or replace points (by id). ValueError on a bad point, before any write."""

    @abstractmethod
    async def delete(self, space: SpaceName, ids: Sequence[str]) -> None:
        """Delete points by id (`point_id(kind, key)`); unknown ids are ignored."""

    @abstractmethod
    async def delete_session(self, space: SpaceName, session_id: str) -> None:
        """Delete every point whose payload has this `session_id`."""

    @abstractmethod
    async def search(
        self,
        space: SpaceName,
        vector: np.ndarray,
        limit: int,
        *,
        kind: Kind | None = None,
        spoken_before: datetime | float | None = None,
        spoken_after: datetime | float | None = None,
        session_ids: Sequence[str] | None = None,
    ) -> list[VectorHit]:
        """The `limit` nearest points (cosine or inner product), best first, with payloads."""

    @abstractmethod
    async def count(self, space: SpaceName) -> int: ...

    async def segment_points(self, space: SpaceName | str) -> list[SegmentPointKey]:
        """(point id, session_id, segment_id) of every segment point in the space, read in
        pages (the drift check compares them with PostgreSQL)."""
        raise NotImplementedError(f"{type(self).__name__} cannot list its points")

    @abstractmethod
    async def spaces(self) -> list[str]:
        """Names of the spaces under this store's prefix."""

    @abstractmethod
    async def drop_space(self, space: SpaceName | str) -> None:
        """Delete a space and everything in it (by SpaceName or by name); no-op if absent."""

    async def __aenter__(self) -> Self:
        await self.open()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
