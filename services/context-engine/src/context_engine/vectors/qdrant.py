"""A Qdrant server through qdrant-client (production): one collection per space, by the
space's distance (cosine or dot), payload indexes on `kind`, `session_id` (keyword) and
`spoken_at` (float).

`AsyncQdrantClient` speaks HTTP without blocking the event loop. Writes to one collection
go out one at a time, in call order (a lock per space), in batches of `batch` points, each
acknowledged (`wait=True`) before the call returns; searches are not serialised.

`path=` / `location=":memory:"` select qdrant-client's local mode (exact numpy search, in
process, blocking, no payload indexes): for tests and tools only, never for serving.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Sequence
from datetime import datetime
from typing import Any, TypeVar

import httpx
import numpy as np
from qdrant_client import AsyncQdrantClient, models
from qdrant_client.http.exceptions import ResponseHandlingException, UnexpectedResponse

from context_engine.vectors.base import (
    HNSW_EF_CONSTRUCT,
    HNSW_M,
    INDEXED_FIELDS,
    SCAN_PAGE,
    SEARCH_EF,
    Kind,
    SearchFilter,
    SegmentPointKey,
    SpaceName,
    UnknownSpaceError,
    VectorHit,
    VectorPoint,
    VectorStore,
    VectorStoreError,
    VectorStoreUnavailable,
    check_search,
    prepare,
    segment_key,
)
from her_os_shared.logging import get_logger

log = get_logger(__name__)
T = TypeVar("T")

_DISTANCE = {"cosine": models.Distance.COSINE, "dot": models.Distance.DOT}
_SCHEMA = {
    "keyword": models.PayloadSchemaType.KEYWORD,
    "float": models.PayloadSchemaType.FLOAT,
}


def _env(field: str) -> str:
    from context_engine.config import Settings

    return Settings.env_name(field)


def to_filter(f: SearchFilter) -> models.Filter | None:
    must: list[models.Condition] = []
    if f.kind is not None:
        must.append(models.FieldCondition(key="kind", match=models.MatchValue(value=f.kind)))
    if f.spoken_before is not None or f.spoken_after is not None:
        must.append(
            models.FieldCondition(
                key="spoken_at", range=models.Range(gte=f.spoken_after, lt=f.spoken_before)
            )
        )
    if f.session_ids is not None:
        must.append(
            models.FieldCondition(key="session_id", match=models.MatchAny(any=list(f.session_ids)))
        )
    return models.Filter(must=must) if must else None


def _session_filter(session_id: str) -> models.Filter:
    return models.Filter(
        must=[models.FieldCondition(key="session_id", match=models.MatchValue(value=session_id))]
    )


class QdrantVectorStore(VectorStore):
    def __init__(
        self,
        *,
        url: str | None = None,
        api_key: str | None = None,
        path: str | None = None,
        location: str | None = None,
        prefix: str = "her_os",
        timeout_s: float = 10.0,
        batch: int = 256,
        search_ef: int = SEARCH_EF,
    ) -> None:
        if sum(x is not None for x in (url, path, location)) != 1:
            raise ValueError("give exactly one of url (server), path or location (local mode)")
        self.url, self.api_key, self.path, self.location = url, api_key, path, location
        self.prefix = prefix
        self.timeout_s = timeout_s
        self.batch = batch
        self.search_ef = search_ef
        self.local = url is None
        self._client: AsyncQdrantClient | None = None
        self._locks: dict[str, asyncio.Lock] = {}
        self._ensured: set[str] = set()

    @property
    def where(self) -> str:
        return self.url or self.path or self.location or "?"

    # --- lifecycle ---

    async def open(self) -> None:
        if self._client is not None:
            return
        if self.local:
            client = AsyncQdrantClient(path=self.path, location=self.location)
        else:
            # The compatibility check would be a blocking request inside the constructor
            # (on the event loop); reachability is checked below, asynchronously.
            client = AsyncQdrantClient(
                url=self.url,
                api_key=self.api_key,
                timeout=max(1, round(self.timeout_s)),
                check_compatibility=False,
            )
        try:
            await self._wrap(client.get_collections)
        except BaseException:
            await client.close()
            raise
        self._client = client
        log.info("vectors.qdrant.open", where=self.where, local=self.local)

    async def close(self) -> None:
        client, self._client = self._client, None
        self._ensured.clear()
        if client is not None:
            await client.close()

    @property
    def client(self) -> AsyncQdrantClient:
        if self._client is None:
            raise VectorStoreError("the Qdrant vector store is not open (call open() first)")
        return self._client

    async def _wrap(self, fn: Callable[..., Awaitable[T]], *args: Any, **kwargs: Any) -> T:
        """Call the client; its errors become VectorStoreUnavailable / VectorStoreError."""
        try:
            return await fn(*args, **kwargs)
        except json.JSONDecodeError as exc:
            raise VectorStoreError(
                f"Qdrant at {self.where} sent a response this client cannot read ({exc}): "
                f"is {_env('qdrant_url')} the URL of a Qdrant server?"
            ) from exc
        except ResponseHandlingException as exc:
            if not isinstance(exc.source, httpx.TransportError | OSError):
                raise VectorStoreError(
                    f"Qdrant at {self.where} sent a response this client cannot read "
                    f"({exc.source}): is it a Qdrant server of a compatible version?"
                ) from exc
            raise VectorStoreUnavailable(
                f"Qdrant at {self.where} is unreachable ({exc.source}): is the server "
                f"running, and is {_env('qdrant_url')} right?"
            ) from exc
        except httpx.TransportError as exc:
            raise VectorStoreUnavailable(
                f"Qdrant at {self.where} is unreachable ({exc or type(exc).__name__}): is the "
                f"server running, and is {_env('qdrant_url')} right?"
            ) from exc
        except UnexpectedResponse as exc:
            if exc.status_code in (401, 403):
                raise VectorStoreUnavailable(
                    f"Qdrant at {self.where} refused the request (HTTP {exc.status_code}): "
                    f"check {_env('qdrant_api_key')}"
                ) from exc
            if exc.status_code == 404:
                raise UnknownSpaceError(f"Qdrant at {self.where}: {exc.content!r}") from exc
            raise VectorStoreError(f"Qdrant at {self.where} answered {exc}") from exc

    def _lock(self, name: str) -> asyncio.Lock:
        return self._locks.setdefault(name, asyncio.Lock())

    async def _require(self, name: str) -> None:
        if name in self._ensured:
            return
        if not await self._wrap(self.client.collection_exists, name):
            raise UnknownSpaceError(f"vector space {name} does not exist (ensure_space first)")
        self._ensured.add(name)

    # --- spaces ---

    async def ensure_space(self, space: SpaceName) -> None:
        name = self.name_of(space)
        async with self._lock(name):
            if name in self._ensured:
                return
            if await self._wrap(self.client.collection_exists, name):
                info = await self._wrap(self.client.get_collection, name)
                params = info.config.params.vectors
                size = params.size if isinstance(params, models.VectorParams) else None
                distance = params.distance if isinstance(params, models.VectorParams) else None
                if size != space.dim or distance != _DISTANCE[space.distance]:
                    raise VectorStoreError(
                        f"collection {name} exists with vectors of size {size} by {distance}, "
                        f"not {space.dim} by {_DISTANCE[space.distance]}"
                    )
            else:
                try:
                    await self._wrap(
                        self.client.create_collection,
                        name,
                        vectors_config=models.VectorParams(
                            size=space.dim, distance=_DISTANCE[space.distance]
                        ),
                        hnsw_config=models.HnswConfigDiff(m=HNSW_M, ef_construct=HNSW_EF_CONSTRUCT),
                    )
                except VectorStoreError:
                    # Another process may have created it meanwhile.
                    if not await self._wrap(self.client.collection_exists, name):
                        raise
                log.info("vectors.qdrant.created", collection=name, where=self.where)
            if not self.local:  # local mode ignores payload indexes (and warns)
                for field_name, schema in INDEXED_FIELDS.items():
                    await self._wrap(
                        self.client.create_payload_index,
                        name,
                        field_name=field_name,
                        field_schema=_SCHEMA[schema],
                        wait=True,
                    )
            self._ensured.add(name)

    async def spaces(self) -> list[str]:
        response = await self._wrap(self.client.get_collections)
        return sorted(c.name for c in response.collections if c.name.startswith(f"{self.prefix}_"))

    async def drop_space(self, space: SpaceName | str) -> None:
        name = self.name_of(space)
        async with self._lock(name):
            self._ensured.discard(name)
            await self._wrap(self.client.delete_collection, name)

    # --- writes ---

    async def upsert(self, space: SpaceName, points: Sequence[VectorPoint]) -> None:
        prepared = prepare(space, points)
        if not prepared:
            return
        name = self.name_of(space)
        async with self._lock(name):
            await self._require(name)
            for i in range(0, len(prepared), self.batch):
                await self._wrap(
                    self.client.upsert,
                    name,
                    points=[
                        models.PointStruct(id=p.id, vector=p.vector.tolist(), payload=p.payload)
                        for p in prepared[i : i + self.batch]
                    ],
                    wait=True,
                )

    async def delete(self, space: SpaceName, ids: Sequence[str]) -> None:
        ids = list(ids)
        if not ids:
            return
        name = self.name_of(space)
        async with self._lock(name):
            await self._require(name)
            for i in range(0, len(ids), self.batch * 4):
                await self._wrap(
                    self.client.delete,
                    name,
                    points_selector=models.PointIdsList(points=ids[i : i + self.batch * 4]),
                    wait=True,
                )

    async def delete_session(self, space: SpaceName, session_id: str) -> None:
        name = self.name_of(space)
        async with self._lock(name):
            await self._require(name)
            await self._wrap(
                self.client.delete,
                name,
                points_selector=models.FilterSelector(filter=_session_filter(session_id)),
                wait=True,
            )

    # --- reads ---

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
        query, flt = check_search(
            space, vector, limit, kind, spoken_before, spoken_after, session_ids
        )
        name = self.name_of(space)
        await self._require(name)
        if flt.empty_result:
            return []
        response = await self._wrap(
            self.client.query_points,
            name,
            query=query,
            limit=limit,
            query_filter=to_filter(flt),
            with_payload=True,
            search_params=None if self.local else models.SearchParams(hnsw_ef=self.search_ef),
        )
        return [
            VectorHit(str(p.id), float(p.score), dict(p.payload or {})) for p in response.points
        ]

    async def segment_points(self, space: SpaceName | str) -> list[SegmentPointKey]:
        name = self.name_of(space)
        await self._require(name)
        out: list[SegmentPointKey] = []
        offset: Any = None
        while True:
            records, offset = await self._wrap(
                self.client.scroll,
                name,
                limit=SCAN_PAGE,
                offset=offset,
                with_payload=["kind", "session_id", "segment_id"],
                with_vectors=False,
            )
            out.extend(k for rec in records if (k := segment_key(rec.id, rec.payload)))
            if offset is None:
                return out

    async def count(self, space: SpaceName) -> int:
        name = self.name_of(space)
        await self._require(name)
        return (await self._wrap(self.client.count, name, exact=True)).count
