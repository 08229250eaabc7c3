"""graphiti's add_episode against the scripted OpenAI-compatible test double (real HTTP, JSON
schema output), on a real FalkorDB; and the backend settings (FalkorDB, Neo4j) and their
errors."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from falkordb_harness import cypher, episode
from scripted_llm_server import ScriptedError, ScriptedLLMServer, schema_name, scripted_llm_server

from context_engine.config import Settings
from context_engine.extract.base import Extraction
from context_engine.extract.schema import ExtractedRelation
from context_engine.graph import (
    GraphConfigError,
    GraphLLMError,
    GraphUnavailableError,
    KnowledgeGraph,
)

# The FalkorDB fixtures; the root conftest may register the plugin as well.
pytest_plugins = ["falkordb_harness"]

T1 = datetime(2024, 3, 1, 10, 0, tzinfo=UTC)
T2 = T1 + timedelta(days=4)

# graphiti's entity type ids for our ENTITY_TYPES: 0 Entity, 1 Person, ..., 5 Topic
PERSON, PLACE, ORGANIZATION, TOPIC = 1, 2, 3, 5


class Script:
    """What the scripted model answers, by the name of the JSON schema graphiti asks for."""

    def __init__(self) -> None:
        self.entities: list[tuple[str, int]] = []
        self.edges: list[tuple[str, str, str, str]] = []
        self.valid_at: str | None = None
        self.contradict_everything = False

    def __call__(self, request: dict[str, Any]) -> Any:
        name = schema_name(request)
        if name == "ExtractedEntities":
            return {
                "extracted_entities": [
                    {"name": n, "entity_type_id": t, "episode_indices": [0]}
                    for n, t in self.entities
                ]
            }
        if name == "ExtractedEdges":
            return {
                "edges": [
                    {
                        "source_entity_name": s,
                        "target_entity_name": o,
                        "relation_type": p,
                        "fact": f,
                        "valid_at": self.valid_at,
                        "invalid_at": None,
                    }
                    for s, p, o, f in self.edges
                ]
            }
        if name == "EdgeDuplicate" and self.contradict_everything:
            # a careless model: every fact it is shown "contradicts" the new one
            return {"duplicate_facts": [], "contradicted_facts": list(range(50))}
        return None  # the smallest valid answer


def llm_settings(settings: Settings, server: ScriptedLLMServer) -> Settings:
    return settings.model_copy(update={"llm_base_url": server.url, "llm_model": "scripted-7b"})


async def open_graph(settings: Settings) -> KnowledgeGraph:
    graph = KnowledgeGraph(settings)
    await graph.open()
    return graph


async def session_episodes(graph: KnowledgeGraph, session_id: str) -> list[str]:
    rows = await cypher(
        graph,
        "MATCH (e:Episodic {name: $name}) RETURN e.uuid AS uuid",
        name=f"session-{session_id}",
    )
    return [r["uuid"] for r in rows]


def test_episode_body_lists_the_extracted_entities_once_after_the_transcript() -> None:
    from dataclasses import replace

    from context_engine.graph.episodes import ANNOTATION_HEADER, ANNOTATION_LIMIT, episode_body

    ep = episode("s1", T1, [("Asha", "My wife  Priya is in Pune."), ("Priya", " ")])
    assert episode_body(ep) == "Asha: My wife Priya is in Pune."  # nothing found: no list
    found = (("person", "Priya"), ("question", "is she?"), ("place", "Pune"),
             ("person", "priya"), ("emotion", "joy"), ("topic", "  running   shoes "))  # fmt: skip
    body = episode_body(replace(ep, annotations=found))
    assert body == (
        f"Asha: My wife Priya is in Pune.\n\n{ANNOTATION_HEADER}\n"
        "- Person: Priya\n- Place: Pune\n- Topic: running shoes"
    )
    many = tuple(("topic", f"thing {i}") for i in range(ANNOTATION_LIMIT + 5))
    assert episode_body(replace(ep, annotations=many)).count("\n- Topic: ") == ANNOTATION_LIMIT
    assert episode_body(replace(ep, segments=[], annotations=found)) == ""


@pytest.mark.platform
async def test_add_episode_builds_the_graph(graph_settings: Settings) -> None:
    script = Script()
    script.entities = [("Asha", PERSON), ("Priya", PERSON), ("coffee", TOPIC)]
    script.edges = [
        ("Asha", "SPOUSE", "Priya", "Asha's spouse is Priya"),
        ("Asha", "LIKES", "coffee", "Asha likes coffee"),
    ]
    script.valid_at = "2024-03-01T10:00:00Z"
    with scripted_llm_server() as server:
        server.reply(script)
        graph = await open_graph(llm_settings(graph_settings, server))
        try:
            ep = episode(
                "s1", T1, [("Asha", "My wife Priya and I love coffee."), ("Priya", "Yes.")]
            )
            write = await graph.add_episode(ep)
            chats = server.chat_requests()
            # one episode per session: a handful of calls, each asking for JSON schema output
            assert write.llm_calls == len(chats)
            assert Counter(schema_name(r) for r in chats) == {
                "ExtractedEntities": 1,
                "ExtractedEdges": 1,
            }
            assert all(r["response_format"]["type"] == "json_schema" for r in chats)
            assert {r["model"] for r in chats} == {"scripted-7b"}
            assert "Asha: My wife Priya and I love coffee." in chats[0]["messages"][-1]["content"]
            assert (write.nodes, write.edges, write.invalidated) == (3, 2, [])

            [episode_uuid] = await session_episodes(graph, "s1")
            assert episode_uuid == write.episode_uuid
            stored = await cypher(
                graph,
                "MATCH (e:Episodic {uuid: $uuid}) RETURN e.valid_at AS valid_at, "
                "e.group_id AS group_id, e.source AS source",
                uuid=episode_uuid,
            )
            assert stored == [
                {"valid_at": T1.isoformat(), "group_id": graph.group_id, "source": "message"}
            ]
            [asha] = await graph.find_entity_nodes("asha", type="person")
            assert asha.labels == ["Person"]
            facts = await graph.facts_as_of(T1 + timedelta(days=1))
            assert sorted(f.fact for f in facts) == ["Asha likes coffee", "Asha's spouse is Priya"]
            assert {tuple(f.session_ids) for f in facts} == {("s1",)}
            assert [f.fact for f in await graph.search("who is Asha married to", limit=1)] == [
                "Asha's spouse is Priya"
            ]
        finally:
            await graph.close()


@pytest.mark.platform
async def test_contradiction_only_between_the_same_entities(graph_settings: Settings) -> None:
    script = Script()
    with scripted_llm_server() as server:
        server.reply(script)
        graph = await open_graph(llm_settings(graph_settings, server))
        try:
            script.entities = [("Asha", PERSON), ("Bob", PERSON), ("coffee", TOPIC)]
            script.edges = [
                ("Asha", "LIKES", "coffee", "Asha likes coffee"),
                ("Bob", "LIKES", "coffee", "Bob likes coffee"),
            ]
            script.valid_at = "2024-03-01T10:00:00Z"
            await graph.add_episode(episode("s1", T1, [("Asha", "I like coffee, so does Bob.")]))

            script.entities = [("Asha", PERSON), ("coffee", TOPIC)]
            script.edges = [("Asha", "AVOIDS", "coffee", "Asha avoids coffee")]
            script.valid_at = "2024-03-05T10:00:00Z"
            script.contradict_everything = True
            write = await graph.add_episode(episode("s2", T2, [("Asha", "I avoid coffee now.")]))

            [ended] = write.invalidated
            assert (ended.fact, ended.session_id, ended.invalidated_by_session) == (
                "Asha likes coffee",
                "s1",
                "s2",
            )
            assert ended.invalid_at == datetime(2024, 3, 5, 10, tzinfo=UTC)
            [avoids] = await cypher(
                graph, "MATCH ()-[e:RELATES_TO {fact: 'Asha avoids coffee'}]->() RETURN e.uuid AS u"
            )
            assert ended.invalidated_by == avoids["u"]
            # Bob's fact (other entities) was offered to nobody and stays valid
            bob = await cypher(
                graph,
                "MATCH ()-[e:RELATES_TO {fact: 'Bob likes coffee'}]->() "
                "RETURN e.invalid_at AS invalid_at, e.expired_at AS expired_at",
            )
            assert bob == [{"invalid_at": None, "expired_at": None}]
            now = {f.fact for f in await graph.facts_as_of(T2 + timedelta(days=2))}
            assert now == {"Asha avoids coffee", "Bob likes coffee"}
        finally:
            await graph.close()


@pytest.mark.platform
async def test_context_is_only_earlier_sessions(graph_settings: Settings) -> None:
    script = Script()
    with scripted_llm_server() as server:
        server.reply(script)
        graph = await open_graph(llm_settings(graph_settings, server))
        try:
            # ingested out of order: the later session first
            await graph.add_episode(episode("s3", T2, [("Asha", "Later: the zebra talk.")]))
            await graph.add_episode(episode("s1", T1, [("Asha", "Earlier: the aardvark talk.")]))
            sent = len(server.chat_requests())
            await graph.add_episode(episode("s2", T1 + timedelta(days=1), [("Asha", "Middle.")]))
            prompt = " ".join(
                m["content"] for r in server.chat_requests()[sent:] for m in r["messages"]
            )
            assert "aardvark" in prompt and "zebra" not in prompt
        finally:
            await graph.close()


async def edges_by_fact(graph: KnowledgeGraph) -> dict[str, dict[str, Any]]:
    rows = await cypher(
        graph,
        "MATCH ()-[e:RELATES_TO]->() RETURN e.uuid AS uuid, e.fact AS fact, e.name AS name, "
        "e.original_name AS original_name, e.invalid_at AS invalid_at, "
        "e.invalidated_by AS invalidated_by",
    )
    return {str(r["fact"]): r for r in rows}


@pytest.mark.platform
async def test_llm_edges_take_our_names_and_end_facts_across_objects(
    graph_settings: Settings,
) -> None:
    script = Script()
    with scripted_llm_server() as server:
        server.reply(script)
        graph = await open_graph(llm_settings(graph_settings, server))
        try:
            script.entities = [("Rajesh", PERSON), ("Pune", PLACE), ("Infosys", ORGANIZATION)]
            script.edges = [
                ("Rajesh", "LIVES_IN", "Pune", "Rajesh lives in Pune"),
                ("Rajesh", "WORKS_FOR", "Infosys", "Rajesh works for Infosys"),
            ]
            script.valid_at = "2024-03-01T10:00:00Z"
            first = await graph.add_episode(
                episode("s1", T1, [("Rajesh", "I live in Pune and work for Infosys.")])
            )
            assert first.invalidated == []

            script.entities = [("Rajesh", PERSON), ("Mumbai", PLACE), ("Google", ORGANIZATION)]
            script.edges = [
                ("Rajesh", "RESIDES_IN", "Mumbai", "Rajesh resides in Mumbai"),
                ("Rajesh", "employed_by", "Google", "Rajesh is employed by Google"),
            ]
            script.valid_at = None  # valid from the episode's time (graphiti's reference_time)
            s2 = episode("s2", T2, [("Rajesh", "Moved to Mumbai, I'm at Google now.")])
            second = await graph.add_episode(s2)

            edges = await edges_by_fact(graph)
            assert {f: (e["name"], e["original_name"]) for f, e in edges.items()} == {
                "Rajesh lives in Pune": ("LIVES_IN", None),
                "Rajesh works for Infosys": ("WORKS_AT", "WORKS_FOR"),
                "Rajesh resides in Mumbai": ("LIVES_IN", "RESIDES_IN"),
                "Rajesh is employed by Google": ("WORKS_AT", "employed_by"),
            }
            ended = {f.fact: f for f in second.invalidated}
            assert set(ended) == {"Rajesh lives in Pune", "Rajesh works for Infosys"}
            pune, infosys = ended["Rajesh lives in Pune"], ended["Rajesh works for Infosys"]
            assert (pune.predicate, pune.subject, pune.object) == ("LIVES_IN", "Rajesh", "Pune")
            assert infosys.predicate == "WORKS_AT"
            assert pune.invalidated_by == edges["Rajesh resides in Mumbai"]["uuid"]
            assert infosys.invalidated_by == edges["Rajesh is employed by Google"]["uuid"]
            for fact in ended.values():
                assert (fact.session_id, fact.invalidated_by_session) == ("s1", "s2")
                assert fact.invalid_at == T2
                stored = edges[fact.fact]
                assert stored["invalidated_by"] == fact.invalidated_by
                assert stored["invalid_at"] == T2.isoformat()
            now = {f.fact for f in await graph.facts_as_of(T2 + timedelta(days=1))}
            assert now == {"Rajesh resides in Mumbai", "Rajesh is employed by Google"}

            # s2 re-done and the model no longer finds the move nor the new job
            script.entities, script.edges = [("Rajesh", PERSON)], []
            redone = await graph.add_episode(s2)
            assert sorted(redone.reinstated) == sorted(f.fact_uuid for f in ended.values())
            assert redone.invalidated == []
            now = {f.fact for f in await graph.facts_as_of(T2 + timedelta(days=1))}
            assert now == {"Rajesh lives in Pune", "Rajesh works for Infosys"}
        finally:
            await graph.close()


@pytest.mark.platform
async def test_llm_episode_ends_a_fact_the_writer_wrote(graph_settings: Settings) -> None:
    script = Script()
    with scripted_llm_server() as server:
        server.reply(script)
        graph = await open_graph(llm_settings(graph_settings, server))
        try:
            await graph.write_extraction(
                episode("s1", T1, [("Rajesh", "I like Nike.")]),
                Extraction([], [ExtractedRelation("Rajesh", "likes", "Nike", 0.8, "", "s1-0")]),
                "f@1",
            )
            script.entities = [("Rajesh", PERSON), ("Nike", TOPIC)]
            script.edges = [("Rajesh", "REPLACED", "Nike", "Rajesh replaced his Nikes")]
            write = await graph.add_episode(
                episode("s2", T2, [("Rajesh", "I replaced my Nikes with Hokas.")])
            )
            [ended] = write.invalidated
            assert (ended.fact, ended.session_id, ended.invalidated_by_session) == (
                "Rajesh likes Nike",
                "s1",
                "s2",
            )
            edges = await edges_by_fact(graph)
            switched = edges["Rajesh replaced his Nikes"]
            assert (switched["name"], switched["original_name"]) == ("SWITCHED_FROM", "REPLACED")
            assert ended.invalidated_by == switched["uuid"]
        finally:
            await graph.close()


def test_pair_scoped_invalidation_is_installed() -> None:
    from graphiti_core.utils.maintenance import edge_operations

    from context_engine.graph.episodes import _pair_scoped_search

    assert edge_operations.search is _pair_scoped_search


@pytest.mark.platform
async def test_garbage_from_the_model_is_a_clear_error_and_leaves_nothing(
    graph_settings: Settings,
) -> None:
    script = Script()
    script.entities = [("Asha", PERSON), ("tea", TOPIC)]
    script.edges = [("Asha", "LIKES", "tea", "Asha likes tea")]
    with scripted_llm_server() as server:
        server.reply(script)
        graph = await open_graph(llm_settings(graph_settings, server))
        try:
            await graph.add_episode(episode("s1", T1, [("Asha", "I like tea.")]))
            before = await cypher(graph, "MATCH (n) RETURN count(n) AS n")

            for garbage, says in (
                (lambda _: "Sure! Here are the entities: Asha, tea", "not JSON"),
                (lambda _: {"extracted_entities": "Asha"}, "does not match its schema"),
                (lambda _: ScriptedError(500), "InternalServerError"),
            ):
                server.reply(garbage)
                sent = len(server.chat_requests())
                with pytest.raises(GraphLLMError, match=says):
                    await graph.add_episode(episode("s2", T2, [("Asha", "I like tea a lot.")]))
                assert len(server.chat_requests()) == sent + 1  # no hidden retries
                assert await session_episodes(graph, "s2") == []
                assert await cypher(graph, "MATCH (n) RETURN count(n) AS n") == before

            # re-doing a session that is in the graph: a failure leaves it as it was
            s1_episodes = await session_episodes(graph, "s1")
            with pytest.raises(GraphLLMError):
                await graph.add_episode(episode("s1", T1, [("Asha", "I like tea.")]))
            assert await session_episodes(graph, "s1") == s1_episodes
            assert await cypher(graph, "MATCH (n) RETURN count(n) AS n") == before

            server.reply(script)  # the model behaves again: the next episode goes through
            write = await graph.add_episode(episode("s2", T2, [("Asha", "I like tea a lot.")]))
            assert await session_episodes(graph, "s2") == [write.episode_uuid]
        finally:
            await graph.close()


@pytest.mark.platform
async def test_one_episode_per_session_whichever_path_wrote_it(graph_settings: Settings) -> None:
    script = Script()
    script.entities = [("Asha", PERSON), ("tea", TOPIC)]
    script.edges = [("Asha", "LIKES", "tea", "Asha likes tea")]
    ep = episode("s1", T1, [("Asha", "I like tea.")])
    with scripted_llm_server() as server:
        server.reply(script)
        graph = await open_graph(llm_settings(graph_settings, server))
        try:
            await graph.write_extraction(
                ep,
                Extraction([], [ExtractedRelation("Asha", "likes", "tea", 0.8, "", "s1-0")]),
                "f@1",
            )
            first = await graph.add_episode(ep)
            again = await graph.add_episode(ep)
            assert await session_episodes(graph, "s1") == [again.episode_uuid]
            assert first.episode_uuid != again.episode_uuid
            [fact] = await graph.facts_as_of(T1 + timedelta(days=1), collapse=False)
            assert fact.fact == "Asha likes tea" and fact.episodes == [again.episode_uuid]
            # and back to the writer
            write = await graph.write_extraction(
                ep,
                Extraction([], [ExtractedRelation("Asha", "likes", "tea", 0.8, "", "s1-0")]),
                "f@1",
            )
            assert await session_episodes(graph, "s1") == [write.episode_uuid]
            assert len(await graph.facts_as_of(T1 + timedelta(days=1), collapse=False)) == 1
        finally:
            await graph.close()


@pytest.mark.platform
async def test_redoing_a_session_keeps_what_later_sessions_restated(
    graph_settings: Settings,
) -> None:
    script = Script()
    script.entities = [("Asha", PERSON), ("tea", TOPIC)]
    script.edges = [("Asha", "LIKES", "tea", "Asha likes tea")]
    script.valid_at = "2024-03-01T10:00:00Z"
    with scripted_llm_server() as server:
        server.reply(script)
        graph = await open_graph(llm_settings(graph_settings, server))
        try:
            s1 = episode("s1", T1, [("Asha", "I like tea.")])
            await graph.add_episode(s1)
            await graph.add_episode(episode("s2", T2, [("Asha", "Still like tea.")]))
            [fact] = await graph.facts_as_of(T2, collapse=False)  # s2 restated s1's fact
            assert fact.session_ids == ["s1", "s2"]
            script.edges = []  # s1 re-done, and this time the model finds no fact
            await graph.add_episode(s1)
            [kept] = await graph.facts_as_of(T2, collapse=False)
            assert kept.uuid == fact.uuid and kept.session_ids == ["s2"]
        finally:
            await graph.close()


@pytest.mark.platform
async def test_add_episode_without_an_llm(knowledge_graph: KnowledgeGraph) -> None:
    ep = episode("s1", T1, [("Asha", "I like tea.")])
    write = await knowledge_graph.write_extraction(
        ep, Extraction([], [ExtractedRelation("Asha", "likes", "tea", 0.8, "", "s1-0")]), "f@1"
    )
    with pytest.raises(GraphLLMError, match="CONTEXT_ENGINE_LLM_BASE_URL"):
        await knowledge_graph.add_episode(ep)
    # the session's graph is untouched
    assert await session_episodes(knowledge_graph, "s1") == [write.episode_uuid]
    assert len(await knowledge_graph.facts_as_of(T2)) == 1


@pytest.mark.platform
async def test_empty_session_adds_nothing(graph_settings: Settings) -> None:
    with scripted_llm_server() as server:
        graph = await open_graph(llm_settings(graph_settings, server))
        try:
            write = await graph.add_episode(episode("s1", T1, [("Asha", "   ")]))
            assert (write.episode_uuid, write.llm_calls) == ("", 0)
            assert server.chat_requests() == []
        finally:
            await graph.close()


# --- backends and their settings ---


def settings(**values: Any) -> Settings:
    return Settings(allow_insecure_no_token=True, **values)


def test_no_graph_url_names_the_setting() -> None:
    with pytest.raises(GraphConfigError, match="CONTEXT_ENGINE_GRAPH_URL"):
        KnowledgeGraph(settings())


def test_group_id_must_be_a_graph_name() -> None:
    with pytest.raises(GraphConfigError, match="CONTEXT_ENGINE_GRAPH_GROUP_ID"):
        KnowledgeGraph(settings(graph_url="redis://127.0.0.1:6379", graph_group_id="my group"))


def test_falkordb_needs_a_redis_url() -> None:
    with pytest.raises(GraphConfigError, match=r"CONTEXT_ENGINE_GRAPH_URL.*redis://"):
        KnowledgeGraph(settings(graph_url="bolt://127.0.0.1:7687"))


def test_falkordb_url_parsing() -> None:
    from context_engine.graph.falkordb import parse_url

    assert parse_url("redis://:s%40cret@10.0.0.2:56379") == (
        "10.0.0.2",
        56379,
        None,
        "s@cret",
        False,
    )
    assert parse_url("rediss://ops:pw@db") == ("db", 6379, "ops", "pw", True)
    assert parse_url("redis://localhost") == ("localhost", 6379, None, None, False)


@pytest.mark.platform
async def test_falkordb_password_from_its_own_setting(
    falkordb_server: str, graph_group: str
) -> None:
    from context_engine.graph.falkordb import parse_url

    host, port, _, password, _ = parse_url(falkordb_server)
    graph = KnowledgeGraph(
        settings(
            graph_url=f"redis://{host}:{port}",
            graph_password=password,
            graph_group_id=graph_group,
        )
    )
    await graph.open()
    try:
        assert await graph.healthy()
    finally:
        await graph.close()
    wrong = KnowledgeGraph(
        settings(graph_url=f"redis://{host}:{port}", graph_password="wrong", graph_group_id="g")
    )
    with pytest.raises(GraphUnavailableError):
        await wrong.open()


@pytest.mark.parametrize(
    ("values", "names"),
    [
        ({"graph_url": "redis://127.0.0.1:6379"}, ["CONTEXT_ENGINE_GRAPH_URL", "GRAPH_BACKEND"]),
        ({"graph_url": "bolt://db:7687"}, ["CONTEXT_ENGINE_GRAPH_PASSWORD"]),
        (
            {"graph_url": "bolt://db:7687", "graph_user": "", "graph_password": "pw"},
            ["CONTEXT_ENGINE_GRAPH_USER"],
        ),
        (
            {"graph_url": "bolt://neo4j:pw@db:7687", "graph_password": "pw"},
            ["CONTEXT_ENGINE_GRAPH_USER", "CONTEXT_ENGINE_GRAPH_PASSWORD"],
        ),
        ({"graph_url": "bolt://:7687", "graph_password": "pw"}, ["no host"]),
    ],
)
def test_neo4j_misconfiguration_names_the_settings(
    values: dict[str, str], names: list[str]
) -> None:
    with pytest.raises(GraphConfigError) as error:
        KnowledgeGraph(settings(graph_backend="neo4j", **values))
    for name in names:
        assert name in str(error.value)


def test_neo4j_driver_is_built_lazily_from_settings() -> None:
    from context_engine.graph.driver import build_driver

    configured = settings(
        graph_backend="neo4j",
        graph_url="neo4j+s://db.example:7687",
        graph_user="heros",
        graph_password="pw",
        graph_database="memory",
    )
    KnowledgeGraph(configured)  # settings check only: nothing connects
    driver = build_driver(configured)
    assert driver.provider.value == "neo4j" and driver._database == "memory"
    asyncio.run(driver.close())


async def test_unreachable_graph_is_unavailable(tmp_path: Any) -> None:
    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    graph = KnowledgeGraph(settings(graph_url=f"redis://127.0.0.1:{port}", graph_group_id="g"))
    with pytest.raises(GraphUnavailableError, match="CONTEXT_ENGINE_GRAPH_URL"):
        await graph.open()
    assert not graph.opened and not await graph.healthy()
