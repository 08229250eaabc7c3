"""A client written against the design's API reference (her-os-architecture.md §6, Annie
Voice; §8 LLM Backend Selection): its requests verbatim, its way of reading the stream (only
`data:` lines, each frame named by `data.type`), and its backend names (`auto`, `claude`,
`qwen3.5-9b`). The project's own forms (`event:` lines, `args`, no body on `/start`) still
work beside them."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from annie_doubles import (
    TOKEN,
    EchoToolDouble,
    EngineDouble,
    ScriptedChatLLMDouble,
    ScriptedClaudeDouble,
    memory,
    parse_sse,
)
from asgi_lifespan import LifespanManager

from annie_voice.app import create_app
from annie_voice.config import Settings

AUTH = {"X-Internal-Token": TOKEN}
# The design's example request, verbatim (§6, POST /v1/chat).
DESIGN_CHAT = {"message": "What did I talk about yesterday?", "llm_backend": "claude"}


def design_frames(body: str) -> list[dict[str, Any]]:
    """The stream as the design's client reads it: every `data:` line's JSON, nothing else
    (no `event:` lines, which the design's frames do not have)."""
    return [
        json.loads(line[5:].strip())
        for line in body.replace("\r\n", "\n").split("\n")
        if line.startswith("data:")
    ]


@asynccontextmanager
async def client(
    engine: EngineDouble | None = None, tools: tuple[Any, ...] = (), **settings: Any
) -> AsyncIterator[httpx.AsyncClient]:
    s = Settings(internal_token=TOKEN, events_enabled=False, **settings)
    engine = engine or EngineDouble(memories=[memory("We talked about the Goa trip", tier="L1")])
    app = create_app(s, tools=tools, engine_transport=engine.transport())
    async with (
        LifespanManager(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
    ):
        yield c


@pytest.fixture
def openai_llm() -> Iterator[ScriptedChatLLMDouble]:
    with ScriptedChatLLMDouble([]) as double:
        yield double


@pytest.fixture
def claude_llm() -> Iterator[ScriptedClaudeDouble]:
    with ScriptedClaudeDouble([]) as double:
        yield double


def both(openai_llm: ScriptedChatLLMDouble, claude_llm: ScriptedClaudeDouble) -> dict[str, Any]:
    """Settings where the OpenAI-compatible LLM is the default and Claude is configured too."""
    return {
        "llm_base_url": openai_llm.url,
        "llm_model": "qwen3.5-9b-q4",
        "claude_api_key": "sk-test",
        "claude_base_url": claude_llm.url,
    }


async def post_chat(c: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    return await c.post("/v1/chat", json=body, headers=AUTH)


async def test_a_design_client_reads_each_frame_by_data_type() -> None:
    async with client() as c:
        r = await post_chat(
            c, {"message": "What did I talk about yesterday?", "llm_backend": "auto"}
        )
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    frames = design_frames(r.text)
    types = [f["type"] for f in frames]
    assert types[0] == "session" and types[-1] == "done" and "token" in types
    assert frames[0]["session_id"]
    text = "".join(f["text"] for f in frames if f["type"] == "token")
    assert "Goa trip" in text
    # the project's clients still get `event:` lines, naming each frame as its type does
    assert [(name, data["type"]) for name, data in parse_sse(r.text)] == [(t, t) for t in types]


async def test_the_design_example_with_claude_streams_tool_use_with_its_input(
    claude_llm: ScriptedClaudeDouble,
) -> None:
    claude_llm.script += [
        {
            "text": ["Let me ", "look."],
            "tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}],
        },
        {"text": ["Based", " on your memories: the Goa trip."]},
    ]
    echo = EchoToolDouble()
    async with client(tools=(echo,), claude_api_key="sk-test", claude_base_url=claude_llm.url) as c:
        r = await post_chat(c, DESIGN_CHAT)
    assert r.status_code == 200, r.text
    frames = design_frames(r.text)
    assert frames[0]["type"] == "session" and frames[0]["backend"] == "claude"
    tool_use = next(f for f in frames if f["type"] == "tool_use")
    assert tool_use["name"] == "echo" and tool_use["input"] == {"text": "hi"}
    assert tool_use["args"] == tool_use["input"]  # the project's name, kept
    assert frames[-1]["type"] == "done"
    assert frames[-1]["text"] == "Let me look.Based on your memories: the Goa trip."
    assert echo.calls == [{"text": "hi"}]
    first = claude_llm.requests[0]
    assert first["messages"][0] == {"role": "user", "content": DESIGN_CHAT["message"]}
    assert "Goa trip" in first["system"]  # the memory loaded on the session's first message
    # anthropic 2.x's API version refuses sampling parameters (400), so none is sent
    assert "temperature" not in first and first["stream"] is True


async def test_each_named_backend_answers_the_turn_it_was_chosen_for(
    openai_llm: ScriptedChatLLMDouble, claude_llm: ScriptedClaudeDouble
) -> None:
    openai_llm.script += [{"text": ["from the local model"]}] * 2
    claude_llm.script += [{"text": ["from Claude"]}]
    async with client(**both(openai_llm, claude_llm)) as c:
        status = (await c.get("/api/status", headers=AUTH)).json()
        assert status["backend"] == "openai"
        assert status["backends"] == ["openai", "none", "claude"]
        answers = {}
        for name in ("auto", "qwen3.5-9b", "claude", "none"):
            r = await post_chat(
                c, {"message": "What did I talk about yesterday?", "llm_backend": name}
            )
            assert r.status_code == 200, r.text
            frames = design_frames(r.text)
            answers[name] = (frames[0]["backend"], frames[-1]["text"])
    assert answers["auto"] == ("openai", "from the local model")
    assert answers["qwen3.5-9b"] == ("openai", "from the local model")
    assert answers["claude"] == ("claude", "from Claude")
    assert answers["none"][0] == "none" and "Goa trip" in answers["none"][1]
    assert len(openai_llm.requests) == 2 and len(claude_llm.requests) == 1


@pytest.mark.parametrize(
    ("llm_backend", "needs"),
    [
        ("claude", "ANNIE_VOICE_CLAUDE_API_KEY"),
        ("qwen3.5-9b", "ANNIE_VOICE_LLM_BASE_URL and ANNIE_VOICE_LLM_MODEL"),
        ("openai", "ANNIE_VOICE_LLM_BASE_URL and ANNIE_VOICE_LLM_MODEL"),
    ],
)
async def test_a_backend_not_configured_is_refused_naming_its_settings(
    llm_backend: str, needs: str
) -> None:
    async with client() as c:
        r = await post_chat(c, {"message": "hello", "llm_backend": llm_backend})
        assert r.status_code == 422
        detail = r.json()["detail"]
        assert f"llm_backend {llm_backend!r} is not configured" in detail
        assert f"set {needs} to enable it" in detail and "'none'" in detail
        r = await c.post("/start", json={"llm_backend": llm_backend}, headers=AUTH)
        assert r.status_code == 422 and needs in r.json()["detail"]
        # nothing was opened for the refused requests
        status = (await c.get("/api/status", headers=AUTH)).json()
        assert status["sessions"] == 0 and status["voice"]["sessions"] == 0


async def test_an_unknown_backend_is_refused_with_the_names_allowed() -> None:
    async with client() as c:
        for path, body in (
            ("/v1/chat", {"message": "hello", "llm_backend": "gpt-5"}),
            ("/start", {"llm_backend": "gpt-5"}),
        ):
            r = await c.post(path, json=body, headers=AUTH)
            assert r.status_code == 422, path
            (error,) = r.json()["detail"]
            assert error["loc"] == ["body", "llm_backend"]
            assert "'auto'" in error["msg"] and "'qwen3.5-9b'" in error["msg"]


async def test_a_session_keeps_its_backend_and_refuses_another(
    openai_llm: ScriptedChatLLMDouble, claude_llm: ScriptedClaudeDouble
) -> None:
    openai_llm.script += [{"text": ["local"]}] * 4
    async with client(**both(openai_llm, claude_llm)) as c:
        r = await post_chat(c, {"message": "hello", "llm_backend": "qwen3.5-9b"})
        sid = design_frames(r.text)[0]["session_id"]
        # the same backend by either name, `auto` or none at all: the session's own
        for later in ({"llm_backend": "openai"}, {"llm_backend": "auto"}, {}):
            r = await post_chat(c, {"message": "and then?", "session_id": sid, **later})
            frames = design_frames(r.text)
            assert frames[0]["backend"] == "openai" and frames[0]["new"] is False, later
        r = await post_chat(c, {"message": "and then?", "session_id": sid, "llm_backend": "claude"})
        assert r.status_code == 409
        assert r.json()["detail"].startswith(f"session {sid} runs llm_backend 'openai'")
    assert claude_llm.requests == []


async def test_start_takes_the_design_body_and_the_session_keeps_that_backend(
    openai_llm: ScriptedChatLLMDouble, claude_llm: ScriptedClaudeDouble
) -> None:
    claude_llm.script += [{"text": ["Claude here"]}]
    async with client(**both(openai_llm, claude_llm)) as c:
        r = await c.post("/start", json={"llm_backend": "claude"}, headers=AUTH)
        assert r.status_code == 200, r.text
        started = r.json()
        sid = started["session_id"]
        assert started["llm"] == "claude" and started["connected"] is False
        # the voice pipeline opens the chat session of that id at connect (open_session with
        # no backend named); a typed turn in it does the same here
        r = await post_chat(c, {"message": "hi", "session_id": sid})
        frames = design_frames(r.text)
        assert frames[0]["backend"] == "claude" and frames[-1]["text"] == "Claude here"
        r = await post_chat(c, {"message": "hi", "session_id": sid, "llm_backend": "none"})
        assert r.status_code == 409


async def test_start_without_a_body_or_with_an_empty_one_takes_the_default() -> None:
    async with client() as c:
        forms: list[dict[str, Any]] = [
            {},  # no body at all (the project's page before, Pipecat clients)
            {"headers": {"Content-Type": "application/json"}},  # the page: JSON, no body
            {"json": {}},
            {"json": {"llm_backend": "auto"}},
        ]
        for form in forms:
            headers = {**AUTH, **form.pop("headers", {})}
            r = await c.post("/start", headers=headers, **form)
            assert r.status_code == 200, (form, r.text)
            assert r.json()["llm"] == "none"
        r = await c.post("/start", json={"backend": "claude"}, headers=AUTH)
        assert r.status_code == 422  # a misspelt field is refused, not ignored


async def test_the_old_chat_form_still_works() -> None:
    async with client() as c:
        r = await post_chat(c, {"message": "What did I talk about yesterday?"})
        events = parse_sse(r.text)
        sid = events[0][1]["session_id"]
        r = await post_chat(c, {"message": "more?", "session_id": sid})
        events = parse_sse(r.text)
    assert events[0][0] == "session" and events[0][1]["new"] is False
    assert events[-1][0] == "done" and events[-1][1]["turn"] == 2
