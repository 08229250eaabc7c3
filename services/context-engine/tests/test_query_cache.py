"""Query vectors of repeated queries (embed/query_cache.py): a repeat is not embedded again,
concurrent repeats share one embedding, the cache is bounded (least recently used goes
first), a failure is not kept, and passages are never cached."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np
import pytest

from context_engine.embed.base import Embedder, EmbedderError
from context_engine.embed.query_cache import CachedQueries


class CountingEmbedderDouble(Embedder):
    """A test double: a vector from the text's length, counting calls; `gate` holds them."""

    name, dim = "double", 4

    def __init__(self) -> None:
        self.queries: list[str] = []
        self.passages = 0
        self.gate: asyncio.Event | None = None
        self.fail = False

    async def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        self.passages += len(texts)
        return np.ones((len(texts), self.dim), dtype=np.float32)

    async def embed_query(self, text: str) -> np.ndarray:
        self.queries.append(text)
        if self.gate is not None:
            await self.gate.wait()
        if self.fail:
            raise EmbedderError("server gone")
        return np.full(self.dim, float(len(text)), dtype=np.float32)


async def test_a_repeated_query_is_embedded_once_and_its_vector_is_read_only() -> None:
    inner = CountingEmbedderDouble()
    cached = CachedQueries(inner, size=8)
    first = await cached.embed_query("where does Priya live")
    again = await cached.embed_query("  where does   Priya live ")  # spacing is not meaning
    other = await cached.embed_query("Where does Priya live")  # case is kept
    assert inner.queries == ["where does Priya live", "Where does Priya live"]
    assert again is first and other is not first
    assert (cached.hits, cached.misses) == (1, 2)
    with pytest.raises(ValueError):
        first[0] = 0.0  # shared by every caller
    await cached.embed_passages(["a", "b"])
    await cached.embed_passages(["a", "b"])
    assert inner.passages == 4  # passages always go to the model


async def test_concurrent_repeats_share_one_embedding() -> None:
    inner = CountingEmbedderDouble()
    inner.gate = asyncio.Event()
    cached = CachedQueries(inner, size=8)
    calls = [asyncio.create_task(cached.embed_query("lisbon trip")) for _ in range(5)]
    await asyncio.sleep(0)
    inner.gate.set()
    vectors = await asyncio.gather(*calls)
    assert inner.queries == ["lisbon trip"]
    assert all(v is vectors[0] for v in vectors)


async def test_the_least_recently_used_query_goes_first() -> None:
    inner = CountingEmbedderDouble()
    cached = CachedQueries(inner, size=2)
    for text in ("a", "bb", "a", "ccc"):  # "a" used again: "bb" is the one dropped
        await cached.embed_query(text)
    await cached.embed_query("a")
    await cached.embed_query("bb")
    assert inner.queries == ["a", "bb", "ccc", "bb"]


async def test_a_failure_is_not_kept_and_reaches_every_waiter() -> None:
    inner = CountingEmbedderDouble()
    inner.fail, inner.gate = True, asyncio.Event()
    cached = CachedQueries(inner, size=8)
    calls = [asyncio.create_task(cached.embed_query("q")) for _ in range(3)]
    await asyncio.sleep(0)
    inner.gate.set()
    outcomes = await asyncio.gather(*calls, return_exceptions=True)
    assert all(isinstance(o, EmbedderError) for o in outcomes)
    inner.fail = False
    assert (await cached.embed_query("q"))[0] == 1.0  # asked again, not a kept failure
    assert inner.queries == ["q", "q"]


async def test_size_zero_keeps_nothing() -> None:
    inner = CountingEmbedderDouble()
    cached = CachedQueries(inner, size=0)
    await cached.embed_query("q")
    await cached.embed_query("q")
    assert inner.queries == ["q", "q"]


async def test_a_caller_that_gives_up_leaves_the_embedding_to_the_others() -> None:
    inner = CountingEmbedderDouble()
    inner.gate = asyncio.Event()
    cached = CachedQueries(inner, size=8)
    first = asyncio.create_task(cached.embed_query("q"))
    second = asyncio.create_task(cached.embed_query("q"))
    await asyncio.sleep(0)
    first.cancel()  # e.g. its leg's timeout
    inner.gate.set()
    assert (await second)[0] == 1.0
    assert first.cancelled() and inner.queries == ["q"]
    await cached.embed_query("q")  # kept
    assert inner.queries == ["q"]
