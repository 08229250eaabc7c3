"""The graph stage through the real engine, with no LLM: conversations written as JSONL
become graphiti nodes and edges in a real FalkorDB; a newer preference supersedes an older
one and the contradiction reaches PostgreSQL; the API serves neighbourhoods, facts as of a
time and graphiti search; a graph that is down delays the graph stage, never extraction."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from engine_harness import Engine, eventually, ingest, query, start_engine, write_conversation

from context_engine.config import Settings
from her_os_shared.creatures import ENGINE_LLMS, engine_llm_creature

pytestmark = pytest.mark.platform

DAY1 = datetime(2025, 6, 1, 10, 0, tzinfo=UTC)
DAY2 = DAY1 + timedelta(days=20)


def write(settings: Settings, session_id: str, start: datetime, lines: list[tuple[str, str]]):
    return write_conversation(settings.transcripts_dir, session_id, start, lines)


@pytest.fixture
def settings(settings: Settings, falkordb_server: str, graph_group: str) -> Settings:
    return settings.model_copy(update={"graph_url": falkordb_server, "graph_group_id": graph_group})


@pytest.fixture
async def engine(settings: Settings) -> AsyncIterator[Engine]:
    async for e in start_engine(settings):
        await eventually(lambda e=e: _opened(e), "the graph to open")
        yield e


async def _opened(engine: Engine) -> bool | None:
    graph = engine.runtime.graph
    return True if graph is not None and graph.opened else None


async def wait_graph(engine: Engine, session_id: str) -> None:
    async def done() -> bool | None:
        rows = await query(
            engine,
            "SELECT status, completed_at FROM session_stages"
            " WHERE session_id = :s AND stage = 'graph'",
            s=session_id,
        )
        return True if rows and rows[0]["status"] == "done" and rows[0]["completed_at"] else None

    await eventually(done, f"graph stage of {session_id}")


async def entity_id(engine: Engine, type_: str, name: str) -> int:
    found = (await engine.get("/v1/entities", type=type_, q=name)).json()["entities"]
    return next(e["id"] for e in found if e["name"] == name)


async def test_sessions_become_a_graph_with_superseded_facts(
    engine: Engine, settings: Settings
) -> None:
    write(settings, "g1", DAY1, [
        ("Asha", "My wife Priya is flying to Paris on Friday."),
        ("Asha", "I love coffee, I have three cups a day."),
    ])  # fmt: skip
    await ingest(engine, "g1")
    await engine.runtime.jobs.scan_idle()
    await wait_graph(engine, "g1")
    write(settings, "g2", DAY2, [("Asha", "I gave up coffee last month, it made me anxious.")])
    await ingest(engine, "g2")
    await engine.runtime.jobs.scan_idle()
    await wait_graph(engine, "g2")

    stats = (await engine.get("/v1/stats")).json()["extraction"]
    assert stats == {
        "extractor": engine.runtime.session_stages.extractor.label,
        "graph_backend": "falkordb",
        "graph_mode": "entities",
        "graph_open": True,
    }

    # The neighbourhood of Asha: the spouse fact, with the segment it was said in.
    asha = await entity_id(engine, "person", "Asha")
    r = await engine.get(f"/v1/graph/entities/{asha}")
    assert r.status_code == 200, r.text
    around = r.json()
    assert around["entity"]["name"] == "Asha" and around["nodes"]
    spouse = next(f for f in around["facts"] if f["predicate"] == "SPOUSE")
    assert spouse["object"] == "Priya" and spouse["invalid_at"] is None
    (source,) = spouse["sources"]
    assert source["segment_id"] == "g1-0" and "Priya" in source["text"]
    assert "Priya" in {n["name"] for n in around["neighbours"]}

    # "gave up coffee" (day 2) superseded "loves coffee" (day 1): invalidated, not deleted.
    likes = next(f for f in around["facts"] if f["predicate"] == "LIKES")
    avoids = next(f for f in around["facts"] if f["predicate"] == "AVOIDS")
    assert datetime.fromisoformat(likes["invalid_at"]) == datetime.fromisoformat(avoids["valid_at"])
    assert avoids["invalid_at"] is None

    # What was true when: between the sessions, Asha liked coffee; after, she avoids it.
    def predicates(page: dict[str, Any]) -> set[str]:
        return {f["predicate"] for f in page["facts"] if f["subject"] == "Asha"}

    between = (await engine.get("/v1/facts", as_of=(DAY1 + timedelta(days=1)).isoformat())).json()
    after = (await engine.get("/v1/facts", as_of=(DAY2 + timedelta(days=1)).isoformat())).json()
    before = (await engine.get("/v1/facts", as_of=(DAY1 - timedelta(days=1)).isoformat())).json()
    assert {"SPOUSE", "LIKES"} <= predicates(between) and "AVOIDS" not in predicates(between)
    assert {"SPOUSE", "AVOIDS"} <= predicates(after) and "LIKES" not in predicates(after)
    assert before["facts"] == []

    # The contradiction reached PostgreSQL, on both entities of the fact.
    contradicted = (await engine.get("/v1/entities", contradicted="true")).json()["entities"]
    assert "Asha" in {e["name"] for e in contradicted}
    detail = (await engine.get(f"/v1/entities/{asha}")).json()
    (c,) = detail["contradictions"]
    assert c["predicate"].lower() == "likes" and c["fact_uuid"] == likes["uuid"]
    assert c["invalidated_by"] == avoids["uuid"] and c["session_id"] == "g1"

    # graphiti's own search finds the facts.
    hits = (await engine.get("/v1/graph/search", query="Asha coffee")).json()["facts"]
    assert "AVOIDS" in {f["predicate"] for f in hits}

    # Re-running the graph stage of a session changes nothing (idempotent).
    key = engine.runtime.session_stages.graph_key("g1")
    assert (await engine.runtime.session_stages.write_graph(key)).status == "already_done"
    counts = await _graph_counts(engine)
    await engine.runtime.graph.write_extraction(  # a forced re-write: same nodes and edges
        *await _episode_and_extraction(engine, "g1")
    )
    assert await _graph_counts(engine) == counts


async def _episode_and_extraction(engine: Engine, session_id: str) -> tuple[Any, Any, str]:
    from context_engine.graph.base import SessionEpisode
    from context_engine.knowledge import entity_store

    async with engine.runtime.db.main.connect() as conn:
        session = await entity_store.load_session_text(conn, session_id)
        extraction = await entity_store.load_extraction(conn, session_id)
    assert session is not None
    episode = SessionEpisode(session_id, session.started_at, session.segments, session.spoken_at)
    return episode, extraction, engine.runtime.session_stages.extractor.label


async def _graph_counts(engine: Engine) -> tuple[int, int]:
    from context_engine.graph.driver import run

    driver = engine.runtime.graph.graphiti.driver
    nodes = await run(driver, "MATCH (n) RETURN count(n) AS n")
    edges = await run(driver, "MATCH ()-[e]->() RETURN count(e) AS n")
    return int(nodes[0]["n"]), int(edges[0]["n"])


async def test_graph_routes_without_a_graph(engine_no_graph: Engine) -> None:
    for path in ("/v1/graph/entities/1", "/v1/facts", "/v1/graph/search?query=x"):
        r = await engine_no_graph.client.get(path, headers={"X-Internal-Token": "t" * 32})
        assert r.status_code == 503, path
        assert "CONTEXT_ENGINE_GRAPH_URL" in r.json()["detail"]


@pytest.fixture
async def engine_no_graph(settings: Settings) -> AsyncIterator[Engine]:
    async for e in start_engine(settings.model_copy(update={"graph_url": None})):
        yield e


async def test_a_graph_that_is_down_delays_only_the_graph_stage(
    settings: Settings, tmp_path: Path
) -> None:
    dead = settings.model_copy(
        update={"graph_url": "redis://127.0.0.1:1", "job_max_attempts": 2}
    )  # nothing listens on port 1
    write(dead, "d1", DAY1, [("Asha", "My wife Priya is flying to Paris on Friday.")])
    async for engine in start_engine(dead):
        await ingest(engine, "d1")
        await engine.runtime.jobs.scan_idle()

        async def graph_failed(engine: Engine = engine) -> dict[str, Any] | None:
            rows = await query(
                engine,
                "SELECT status, attempts, last_error FROM session_stages"
                " WHERE session_id = 'd1' AND stage = 'graph'",
            )
            return rows[0] if rows and rows[0]["status"] == "failed" else None

        failed = await eventually(graph_failed, "the graph stage to be dead-lettered")
        assert failed["attempts"] == 2 and failed["last_error"]
        # Extraction is in PostgreSQL regardless, and the API says why the graph is missing.
        names = {e["name"] for e in (await engine.get("/v1/entities")).json()["entities"]}
        assert {"Asha", "Priya", "Paris"} <= names
        r = await engine.get("/v1/facts")
        assert r.status_code == 503 and "not reachable" in r.json()["detail"]


async def test_with_an_llm_the_llm_extractor_and_add_episode_write_the_session(
    settings: Settings,
) -> None:
    """LLM configured (the scripted test double): extraction goes through the LLM extractor
    and the graph through graphiti's add_episode — episode `session-{id}`, reference time the
    session's start, the settings' group id."""
    from scripted_llm_server import schema_name, scripted_llm_server

    def answer(request: dict[str, Any]) -> Any:
        if schema_name(request) == "memory_extraction":
            return {
                "entities": [
                    {"segment_id": "l1-0", "type": "person", "name": "Priya",
                     "evidence": "My wife Priya", "properties": [], "sensitivity": "private",
                     "confidence": 0.95},
                    {"segment_id": "l1-0", "type": "promise", "name": "pick Priya up",
                     "evidence": "I'll pick her up", "properties": [{"key": "when",
                     "value": "Friday"}], "sensitivity": "open", "confidence": 0.9},
                ],
                "relations": [
                    {"segment_id": "l1-0", "subject": "Asha", "predicate": "spouse",
                     "object": "Priya", "evidence": "My wife Priya", "confidence": 0.9},
                ],
            }  # fmt: skip
        return None  # graphiti's own calls: the smallest answer valid against their schema

    with scripted_llm_server() as llm:
        llm.reply(answer)
        with_llm = settings.model_copy(update={"llm_base_url": llm.url, "llm_model": "scripted"})
        write(with_llm, "l1", DAY1, [("Asha", "My wife Priya lands Friday, I'll pick her up.")])
        async for engine in start_engine(with_llm):
            await eventually(lambda engine=engine: _opened(engine), "the graph to open")
            await ingest(engine, "l1")
            await engine.runtime.jobs.scan_idle()
            await wait_graph(engine, "l1")

            stats = (await engine.get("/v1/stats")).json()["extraction"]
            assert stats["extractor"].startswith("llm@") and stats["graph_mode"] == "llm"
            found = {
                (e["type"], e["name"]): e
                for e in (await engine.get("/v1/entities")).json()["entities"]
            }
            assert found[("person", "Priya")]["sensitivity"] == "private"
            assert found[("promise", "pick Priya up")]["properties"]["when"] == "Friday"
            relations = await query(engine, "SELECT subject, predicate, object, extractor"
                                            " FROM extracted_relations")  # fmt: skip
            assert relations == [
                {"subject": "Asha", "predicate": "spouse", "object": "Priya", "extractor": "llm"}
            ]
            episodes = await _cypher(
                engine,
                "MATCH (e:Episodic) RETURN e.name AS name, e.group_id AS g, e.valid_at AS at",
            )
            assert [(e["name"], e["g"]) for e in episodes] == [
                ("session-l1", settings.graph_group_id)
            ]
            assert str(episodes[0]["at"]).startswith("2025-06-01T10:00:00")
            # Every LLM call, the extractor's and graphiti's, is an event of its model's creature.
            llms = ",".join(sorted(ENGINE_LLMS))
            calls = (await engine.get("/v1/events", creature=llms, event_type="complete",
                                      limit=1000)).json()["events"]  # fmt: skip
            assert {e["creature"] for e in calls} == {engine_llm_creature(with_llm.llm_model)}
            schemas = {e["data"]["schema"] for e in calls}
            assert "memory_extraction" in schemas and len(schemas) >= 2
            assert len(calls) == len(llm.chat_requests())
    kinds = [schema_name(r) for r in llm.chat_requests()]
    assert kinds[0] == "memory_extraction" and len(kinds) >= 2  # then graphiti's calls
    # The episode graphiti reads is the transcript plus the extractor's entities (the
    # design's annotations): the person is listed, the promise (no graphiti type) is not.
    [entity_prompt] = [
        r["messages"][-1]["content"]
        for r in llm.chat_requests()
        if schema_name(r) == "ExtractedEntities"
    ]
    assert "Asha: My wife Priya lands Friday" in entity_prompt
    assert "- Person: Priya" in entity_prompt
    assert "pick Priya up" not in entity_prompt


async def _cypher(engine: Engine, cypher: str) -> list[dict[str, Any]]:
    from context_engine.graph.driver import run

    return await run(engine.runtime.graph.graphiti.driver, cypher)
