"""Every process reports itself (issue 8, item 2): the transcript watcher (owl), each
retrieval leg and the fusion (starfish, shark, squid, pufferfish), the chronicler's own metric
(narwhal), PostgreSQL's pools (dragon) through the real engine, and each LLM call (the creature
of its model's family, ADR 0021) through ObservedLLM."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from engine_harness import Engine, eventually, ingest, start_engine, write_conversation

from context_engine.config import Settings
from context_engine.llm import LLMUnavailableError
from context_engine.llm.observed import ObservedLLM
from her_os_shared.creatures import CreatureName as C

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


async def events_of(engine: Engine, creature: str) -> list[dict[str, Any]]:
    return (await engine.get("/v1/events", creature=creature, limit=100)).json()["events"]


async def test_watcher_legs_and_fusion_report_each_run(settings: Settings) -> None:
    quick = settings.model_copy(update={"events_stats_interval_s": 0.2})
    async for engine in start_engine(quick):
        write_conversation(quick.transcripts_dir, "s1", T0, [("Asha", "Priya loves jazz.")])
        await ingest(engine, "s1")

        async def seen(engine: Engine = engine) -> list[dict[str, Any]] | None:
            return await events_of(engine, C.OWL) or None

        (watched, *_) = await eventually(seen, "the watcher's event")
        assert watched["data"]["file"] == "s1.jsonl" and watched["event_type"] == "metric"

        r = await engine.get("/v1/context", query="jazz", legs="bm25")
        assert r.status_code == 200 and r.json()["results"]
        (bm25,) = await events_of(engine, C.STARFISH)
        assert bm25["event_type"] == "complete" and bm25["data"]["hits"] == 1
        assert bm25["process"] == "bm25-search" and "bm25: 1 candidates" in bm25["reasoning"]
        (fusion,) = await events_of(engine, C.PUFFERFISH)
        assert fusion["data"]["legs"] == {"bm25": "ok"} and fusion["data"]["results"] == 1

        async def narwhal(engine: Engine = engine) -> dict[str, Any] | None:
            latest = await events_of(engine, C.NARWHAL)  # newest first
            return latest[0]["data"] if latest and latest[0]["data"]["recorded"] >= 3 else None

        stats = await eventually(narwhal, "the chronicler's metric after the query")
        assert {"subscribers", "backlog", "ring", "persisted"} <= set(stats)
        (pools, *_) = await events_of(engine, C.DRAGON)
        assert pools["process"] == "postgresql" and pools["zone"] == "thinking"
        assert set(pools["data"]) == {"main", "events", "reads", "probe"}
        assert pools["data"]["main"]["size"] >= 1 and "checked_out" in pools["data"]["events"]

        # The auth gate: requests let through and refused, counted between two metrics.
        refused = await engine.client.get("/v1/stats", headers={"X-Internal-Token": "x" * 32})
        assert refused.status_code == 401

        async def gate(engine: Engine = engine) -> dict[str, Any] | None:
            for e in await events_of(engine, C.BASILISK):
                if e["event_type"] == "metric" and e["data"]["refused"] >= 1:
                    return e["data"]
            return None

        counted = await eventually(gate, "the auth gate's metric")
        assert counted["passed"] >= 1


class RecorderDouble:
    """Collects emitted events (a test double of EventRecorder)."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, dict[str, Any], str | None]] = []

    async def emit(self, creature: str, event_type: str, *, data=None, reasoning=None, **_):
        self.events.append((creature, event_type, data or {}, reasoning))


class LLMDouble:
    """Answers or fails as told (a test double of an LLM client)."""

    name = "double:model"

    def __init__(self, answer: str | None, model: str = "qwen3:8b") -> None:
        self.answer = answer
        self.model = model

    async def complete_json(self, system: str, user: str, schema: dict, schema_name: str) -> str:
        if self.answer is None:
            raise LLMUnavailableError("server down")
        return self.answer

    async def aclose(self) -> None:
        pass


async def test_each_llm_call_is_an_event_of_its_models_creature() -> None:
    recorder = RecorderDouble()
    llm = ObservedLLM(LLMDouble('{"entities": []}'), recorder)  # type: ignore[arg-type]
    assert await llm.complete_json("sys", "user", {}, "extraction") == '{"entities": []}'
    (start, done) = recorder.events
    assert start[:2] == (C.UNICORN, "start") and start[2]["schema"] == "extraction"
    assert done[:2] == (C.UNICORN, "complete") and done[2]["answer_chars"] == 16
    assert llm.name == "double:model"

    failing = ObservedLLM(LLMDouble(None, "qwen3.5:35b-a3b"), recorder)  # type: ignore[arg-type]
    with pytest.raises(LLMUnavailableError):
        await failing.complete_json("sys", "user", {}, "extraction")
    assert recorder.events[-1][:2] == (C.LION, "error")
    assert "server down" in recorder.events[-1][2]["error"]
    other = ObservedLLM(LLMDouble("{}", "claude-sonnet-4-5"), recorder)  # type: ignore[arg-type]
    await other.complete_json("sys", "user", {}, "extraction")
    assert recorder.events[-1][:2] == (C.KELPIE, "complete")
