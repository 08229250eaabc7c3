"""The specialist contradiction model (design Layer 4, "Graphiti LLM routing": contradiction
detection on Qwen3 32B while graph building runs on the extraction model; ADR 0023):
CONTEXT_ENGINE_CONTRADICTION_MODEL names the model of graphiti's contradiction check, the
`dedupe_edges.resolve_edge` call; every other graphiti call keeps CONTEXT_ENGINE_LLM_MODEL.
Over real HTTP against the scripted OpenAI-compatible double; no database, no graph."""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from typing import Any

import pytest
from graphiti_core.graphiti_types import generate_prompt_response
from graphiti_core.llm_client.config import ModelSize
from graphiti_core.prompts import prompt_library
from graphiti_core.prompts.dedupe_edges import EdgeDuplicate
from graphiti_core.prompts.extract_edges import ExtractedEdges
from graphiti_core.utils.maintenance import edge_operations
from scripted_llm_server import ScriptedLLMServer, schema_name, scripted_llm_server

from context_engine.config import Settings
from context_engine.graph.episodes import CONTRADICTION_PROMPT, GraphitiLLM, make_llm_client
from her_os_shared.creatures import CreatureName

CONTEXT = {
    "existing_edges": [{"idx": 0, "fact": "Rajesh likes Nike shoes"}],
    "new_edge": "Rajesh now prefers Hoka over Nike",
    "edge_invalidation_candidates": [{"idx": 1, "fact": "Rajesh runs in Nike shoes"}],
}


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with scripted_llm_server() as s:
        s.reply(lambda request: {"duplicate_facts": [], "contradicted_facts": [0]}
                if schema_name(request) == "EdgeDuplicate" else None)  # fmt: skip
        yield s


def settings(**kwargs: Any) -> Settings:
    return Settings(**({"claude_api_key": None, "llm_model": "qwen3:8b"} | kwargs))


class RecorderDouble:
    def __init__(self) -> None:
        self.events: list[tuple[CreatureName, str, dict[str, Any]]] = []

    async def emit(self, creature: CreatureName, event_type: str, **kw: Any) -> None:
        self.events.append((creature, event_type, kw.get("data") or {}))


async def contradiction_check(llm: Any) -> dict[str, Any]:
    """The call as graphiti makes it when it resolves a new fact (edge_operations)."""
    return await generate_prompt_response(
        llm,
        CONTRADICTION_PROMPT,
        prompt_library.dedupe_edges.resolve_edge,
        CONTEXT,
        response_model=EdgeDuplicate,
        model_size=ModelSize.small,
    )


def test_graphiti_still_checks_contradictions_with_that_prompt() -> None:
    """The prompt name is graphiti's; an upgrade that renames it must fail here, not route
    the check silently back to the extraction model."""
    source = inspect.getsource(edge_operations._dedupe_extracted_edge)
    assert f"'{CONTRADICTION_PROMPT}'" in source
    assert "contradicted_facts" in EdgeDuplicate.model_fields


def test_the_setting_is_read_from_the_environment_and_blank_is_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CONTEXT_ENGINE_CONTRADICTION_MODEL", "qwen3:32b")
    assert Settings().contradiction_model == "qwen3:32b"
    monkeypatch.setenv("CONTEXT_ENGINE_CONTRADICTION_MODEL", "")  # compose's unset variable
    assert Settings().contradiction_model is None
    monkeypatch.delenv("CONTEXT_ENGINE_CONTRADICTION_MODEL")
    assert Settings().contradiction_model is None


async def test_the_contradiction_check_goes_to_the_specialist_model(
    server: ScriptedLLMServer,
) -> None:
    recorder = RecorderDouble()
    llm = make_llm_client(
        settings(llm_base_url=server.url, contradiction_model="qwen3:32b"), recorder
    )
    assert isinstance(llm, GraphitiLLM)
    answer = await contradiction_check(llm)
    assert answer == {"duplicate_facts": [], "contradicted_facts": [0]}
    # graph building (here: edge extraction) stays on the extraction model
    episode = {
        "episode_content": "Rajesh: I switched to Hoka.",
        "nodes": [],
        "previous_episodes": [],
        "reference_time": "2024-03-01T10:00:00Z",
        "edge_types": [],
        "custom_extraction_instructions": "",
    }
    await generate_prompt_response(
        llm,
        "extract_edges.edge",
        prompt_library.extract_edges.edge,
        episode,
        response_model=ExtractedEdges,
    )
    asked = [(schema_name(r), r["model"]) for r in server.chat_requests()]
    assert asked == [("EdgeDuplicate", "qwen3:32b"), ("ExtractedEdges", "qwen3:8b")]
    # each call is an event of its own model's creature: Qwen3 32B is the design's fairy
    starts = [(c, d["model"], d["schema"]) for c, t, d in recorder.events if t == "start"]
    assert starts == [
        (CreatureName.FAIRY, "qwen3:32b", CONTRADICTION_PROMPT),
        (CreatureName.UNICORN, "qwen3:8b", "extract_edges.edge"),
    ]


async def test_unset_the_check_uses_the_extraction_model(server: ScriptedLLMServer) -> None:
    llm = make_llm_client(settings(llm_base_url=server.url, llm_model="qwen3.5:27b"))
    assert isinstance(llm, GraphitiLLM) and llm.contradiction_model == "qwen3.5:27b"
    await contradiction_check(llm)
    assert [r["model"] for r in server.chat_requests()] == ["qwen3.5:27b"]
