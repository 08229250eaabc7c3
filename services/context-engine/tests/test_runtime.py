"""The composition root (runtime.py): every component built once, from what was built before
it, the providers shared, nothing patched afterwards, and everything closed in reverse order.
Built without starting: nothing here connects to a database, a graph or an LLM."""

from __future__ import annotations

from pathlib import Path

import pytest
from engine_harness import engine_settings

from context_engine.config import Settings
from context_engine.extract.fast import FastExtractor
from context_engine.extract.llm import LLMExtractor
from context_engine.llm.errors import LLMConfigError
from context_engine.runtime import Runtime

# Nothing listens here: construction must not call out.
NOWHERE = "postgresql+asyncpg://heros@127.0.0.1:9/heros"


def _settings(tmp_path: Path, **overrides: object) -> Settings:
    return engine_settings(tmp_path, NOWHERE, gc_freeze=False, **overrides)


async def test_one_llm_client_and_one_embedder_serve_every_part(tmp_path: Path) -> None:
    runtime = Runtime(
        _settings(
            tmp_path,
            llm_base_url="http://127.0.0.1:9/v1",
            llm_model="m",
            graph_url="redis://127.0.0.1:9",
        )
    )
    try:
        assert runtime.llm is not None and runtime.embedder is not None
        # the LLM extractor and the daily reflection ask the same (observed) client
        assert isinstance(runtime.extractor, LLMExtractor)
        assert runtime.extractor.client is runtime.llm
        assert runtime.session_stages.extractor is runtime.extractor
        assert runtime.reflector.llm is runtime.llm
        # the vectors and the graph embed with the same (observed) embedder
        assert runtime.embedding is not None and runtime.embedding.embedder is runtime.embedder
        assert runtime.graph is not None and runtime.graph._embedder is runtime.embedder
        assert runtime.graph._llm is not None  # graphiti's client, built here too
        # what used to be patched in after construction is given at construction
        assert runtime.consolidator.reflector is runtime.reflector
        assert runtime.reflector.ingest == runtime.ingestor.ingest_file
        assert runtime.jobs.forgetter is runtime.forgetter
        assert runtime.jobs.entity_embedding is runtime.entity_embedding
        assert runtime.retriever.knowledge is runtime.knowledge
    finally:
        await runtime.stop()


async def test_without_an_llm_or_graph_nothing_of_theirs_is_built(tmp_path: Path) -> None:
    runtime = Runtime(_settings(tmp_path, vector_index_enabled=False))
    try:
        assert runtime.llm is None and runtime.graph is None
        assert runtime.embedder is None and runtime.embedding is None
        assert isinstance(runtime.extractor, FastExtractor)
        assert runtime.reflector.llm is None
    finally:
        await runtime.stop()


async def test_components_close_in_reverse_order_of_construction(tmp_path: Path) -> None:
    runtime = Runtime(
        _settings(
            tmp_path,
            llm_base_url="http://127.0.0.1:9/v1",
            llm_model="m",
            graph_url="redis://127.0.0.1:9",
            audio_pipeline_url="http://127.0.0.1:9",
        )
    )
    built = [name for name, _ in runtime._closers]
    assert built == [
        "databases",
        "chronicler",
        "llm",
        "embedder",
        "graph",
        "vectors",
        "search_index",
        "voices",
    ]
    closed: list[str] = []
    for i, (name, close) in enumerate(runtime._closers):

        async def record(name: str = name, close=close) -> None:
            closed.append(name)
            await close()

        runtime._closers[i] = (name, record)
    await runtime.stop()
    assert closed == list(reversed(built))


async def test_a_close_that_fails_does_not_stop_the_others(tmp_path: Path) -> None:
    runtime = Runtime(_settings(tmp_path, vector_index_enabled=False))
    closed: list[str] = []

    async def broken() -> None:
        raise RuntimeError("boom")

    async def fine() -> None:
        closed.append("databases")

    runtime._closers = [("databases", fine), ("chronicler", broken)]
    await runtime.stop()
    assert closed == ["databases"]


def test_a_malformed_llm_setting_stops_the_start_naming_it(tmp_path: Path) -> None:
    with pytest.raises(LLMConfigError, match="CONTEXT_ENGINE_LLM_BASE_URL"):
        Runtime(_settings(tmp_path, llm_base_url="localhost:11434", extractor="fast"))
