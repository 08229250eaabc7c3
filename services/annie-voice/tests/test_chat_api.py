from __future__ import annotations

import json
from contextlib import asynccontextmanager

import httpx
import pytest
from annie_doubles import (
    TOKEN,
    EchoToolDouble,
    EngineDouble,
    FailingToolDouble,
    ScriptedChatLLMDouble,
    fact,
    memory,
    parse_sse,
)
from asgi_lifespan import LifespanManager

from annie_voice.app import create_app
from annie_voice.config import Settings

AUTH = {"X-Internal-Token": TOKEN}


@asynccontextmanager
async def client(engine: EngineDouble, tools=(), **settings):
    s = Settings(internal_token=TOKEN, events_flush_s=600, **settings)
    app = create_app(s, tools=tools, engine_transport=engine.transport())
    async with (
        LifespanManager(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
    ):
        c.app = app  # type: ignore[attr-defined]
        yield c


async def chat(c: httpx.AsyncClient, message: str, session_id: str | None = None):
    body = {"message": message} | ({"session_id": session_id} if session_id else {})
    r = await c.post("/v1/chat", json=body, headers=AUTH)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    return parse_sse(r.text)


@pytest.fixture
def llm():
    double = ScriptedChatLLMDouble([])
    double.start()
    yield double
    double.stop()


async def test_offline_chat_streams_session_tokens_done_from_memory() -> None:
    engine = EngineDouble(memories=[memory("Priya is moving to Koramangala", tier="L1")])
    async with client(engine) as c:
        events = await chat(c, "where is Priya moving?")
        names = [e for e, _ in events]
        assert names[0] == "session" and names[1] == "memories" and names[-1] == "done"
        assert set(names[2:-1]) == {"token"}
        used = events[1][1]
        assert [m["text"] for m in used["memories"]] == ["Priya is moving to Koramangala"]
        assert used["facts"] == []
        session = events[0][1]
        assert session["backend"] == "none" and session["new"] is True
        assert session["memory"]["status"] == "ok" and session["tools"] == []
        text = "".join(d["text"] for e, d in events if e == "token")
        done = events[-1][1]
        assert done["text"] == text
        assert "Priya said: “Priya is moving to Koramangala”" in text
        # what it cannot do is said only when it found nothing
        assert "no language model is configured" not in text

        # the same session again: not new, one more turn
        again = await chat(c, "and when?", session["session_id"])
        assert again[0][1]["new"] is False and again[-1][1]["turn"] == 2

        listed = (await c.get("/v1/chat/sessions", headers=AUTH)).json()
        assert listed["total"] == 1
        s = listed["sessions"][0]
        assert s["id"] == session["session_id"] and s["turns"] == 2
        assert s["briefed"] is True and s["backend"] == "none"

        status = (await c.get("/api/status", headers=AUTH)).json()
        assert status["backend"] == "none" and status["sessions"] == 1
        assert status["engine"]["reachable"] is True


async def test_engine_down_session_starts_without_memory_and_says_so() -> None:
    async with client(EngineDouble(mode="down")) as c:
        events = await chat(c, "hello there")
        memory_info = events[0][1]["memory"]
        assert memory_info["status"] == "unavailable" and "unreachable" in memory_info["reason"]
        assert events[-1][0] == "done"
        assert "couldn't reach your memories" in events[-1][1]["text"]
        status = (await c.get("/api/status", headers=AUTH)).json()
        assert status["engine"]["reachable"] is False


async def test_llm_chat_with_a_tool_call(llm: ScriptedChatLLMDouble) -> None:
    llm.script += [
        {
            "text": ["Let me ", "check."],
            "tool_calls": [{"name": "echo", "arguments": {"text": "hi"}}],
        },
        {"text": ["It ", "said hi."]},
    ]
    echo = EchoToolDouble()
    engine = EngineDouble(memories=[memory("Priya likes jasmine tea", tier="L2")])
    async with client(engine, tools=[echo], llm_base_url=llm.url, llm_model="m") as c:
        events = await chat(c, "echo hi please")
    names = [e for e, _ in events]
    assert names[0] == "session" and names[-1] == "done" and "tool_use" in names
    assert names.index("tool_use") > names.index("token")
    session = events[0][1]
    assert session["backend"] == "openai" and session["tools"] == ["echo"]
    tool_use = next(d for e, d in events if e == "tool_use")
    assert tool_use["name"] == "echo" and tool_use["args"] == {"text": "hi"}
    assert tool_use["ok"] is True and "hi" in tool_use["result_summary"]
    assert echo.calls == [{"text": "hi"}]
    done = events[-1][1]
    assert done["text"] == "Let me check.It said hi."
    assert done["tool_calls"] == 1 and done["usage"]["output_tokens"] == 14

    first, second = llm.requests
    system = first["messages"][0]
    assert system["role"] == "system" and "<memory>" in system["content"]
    assert "Priya likes jasmine tea" in system["content"]
    assert first["tools"][0]["function"]["name"] == "echo" and first["stream"] is True
    # the second request carries the call and its result back to the model
    assert second["messages"][-2]["tool_calls"][0]["function"]["name"] == "echo"
    assert second["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "call_0",
        "content": '{"echoed": "hi"}',
    }


def _forget_request(request_id: int, status: str = "done") -> dict[str, object]:
    return {"request_id": request_id, "kind": "person", "status": status, "stores": {},
            "attempts": 1, "created_at": "2026-05-09T10:00:00Z", "finished_at": None}  # fmt: skip


async def test_a_forget_in_the_engine_drops_the_sessions_history_and_briefing(
    llm: ScriptedChatLLMDouble,
) -> None:
    llm.script += [{"text": ["Priya flies to Lisbon."]}, {"text": ["Noted."]},
                   {"text": ["Who?"]}, {"text": ["Still here."]}]  # fmt: skip
    engine = EngineDouble(memories=[memory("Priya flies to Lisbon on Friday")], forgets=[])
    async with client(engine, llm_base_url=llm.url, llm_model="m") as c:
        first = await chat(c, "where is Priya going?")
        sid = first[0][1]["session_id"]
        second = await chat(c, "thanks", session_id=sid)
        assert second[0][1]["memory_reset"] is False  # nothing forgotten: history kept
        # The owner forgets Priya in the engine: her memories are gone from its answers.
        engine.memories = [memory("Ravi bought mangoes", speaker="Ravi")]
        engine.forgets = [_forget_request(1, "pending")]
        engine.unfinished = 1
        third = await chat(c, "what do you remember?", session_id=sid)
        assert third[0][1]["memory_reset"] is True
        # The forget finishes: the marker changes again, and the session is briefed again.
        engine.forgets, engine.unfinished = [_forget_request(1)], 0
        fourth = await chat(c, "anything else?", session_id=sid)
        assert fourth[0][1]["memory_reset"] is True
    assert [e for e, _ in fourth][-1] == "done"
    before, kept, after, last = llm.requests
    assert "Lisbon" in before["messages"][0]["content"]
    assert [m["role"] for m in kept["messages"]] == ["system", "user", "assistant", "user"]
    # After the forget nothing of it is sent: not the briefing, not the earlier turns.
    for request in (after, last):
        sent = json.dumps(request["messages"])
        assert "Lisbon" not in sent and "Priya" not in sent, sent
        assert "Ravi bought mangoes" in request["messages"][0]["content"]
    # each reset starts the conversation again (the pending forget's, then the finished one's)
    assert [m["role"] for m in after["messages"]] == ["system", "user"]
    assert [m["role"] for m in last["messages"]] == ["system", "user"]


async def test_the_forget_check_never_blocks_a_turn(llm: ScriptedChatLLMDouble) -> None:
    # An engine without the route (404) or not answering: the turn goes on with what it has.
    llm.script += [{"text": ["One."]}, {"text": ["Two."]}, {"text": ["Three."]}]
    engine = EngineDouble(memories=[memory("Priya flies to Lisbon on Friday")])
    async with client(engine, llm_base_url=llm.url, llm_model="m") as c:
        sid = (await chat(c, "hello"))[0][1]["session_id"]
        assert (await chat(c, "again", session_id=sid))[0][1]["memory_reset"] is False
        engine.forgets, engine.forget_mode = [_forget_request(3)], "down"
        events = await chat(c, "and again", session_id=sid)
    assert events[0][1]["memory_reset"] is False and events[-1][0] == "done"
    assert len(llm.requests[-1]["messages"]) == 6  # system + three turns' messages


async def test_leaked_tool_call_text_is_hidden_and_run(llm: ScriptedChatLLMDouble) -> None:
    llm.script += [
        {
            "text": [
                "One moment. <tool_",
                'call>{"name": "echo", "arguments": {"text": "x"}}',
                "</tool_call>",
            ]
        },
        {"text": ["Done."]},
    ]
    echo = EchoToolDouble()
    async with client(EngineDouble(), tools=[echo], llm_base_url=llm.url, llm_model="m") as c:
        events = await chat(c, "go")
    shown = "".join(d["text"] for e, d in events if e == "token")
    assert "tool_call" not in shown and "echo" not in shown
    assert echo.calls == [{"text": "x"}]
    assert events[-1][1]["text"] == "One moment. Done."


async def test_a_failing_tool_is_reported_to_the_model_not_fatal(
    llm: ScriptedChatLLMDouble,
) -> None:
    llm.script += [
        {"tool_calls": [{"name": "broken", "arguments": {}}, {"name": "nope", "arguments": {}}]},
        {"text": ["Sorry, that failed."]},
    ]
    async with client(
        EngineDouble(), tools=[FailingToolDouble()], llm_base_url=llm.url, llm_model="m"
    ) as c:
        events = await chat(c, "break it")
    uses = [d for e, d in events if e == "tool_use"]
    assert [u["ok"] for u in uses] == [False, False]
    assert "the broken tool double failed" in uses[0]["result_summary"]
    assert "unknown tool" in uses[1]["result_summary"]
    assert events[-1] == ("done", events[-1][1]) and events[-1][1]["text"] == "Sorry, that failed."


async def test_llm_failure_is_an_error_event(llm: ScriptedChatLLMDouble) -> None:
    llm.script += [{"status": 500}]
    async with client(EngineDouble(), llm_base_url=llm.url, llm_model="m") as c:
        events = await chat(c, "hello")
        assert [e for e, _ in events] == ["session", "memories", "error"]
        assert "HTTP 500" in events[-1][1]["message"]
        listed = (await c.get("/v1/chat/sessions", headers=AUTH)).json()
        assert listed["sessions"][0]["turns"] == 0


async def test_tool_rounds_are_bounded(llm: ScriptedChatLLMDouble) -> None:
    call = {"tool_calls": [{"name": "echo", "arguments": {"text": "again"}}]}
    llm.script += [call, call, {"text": ["Enough."]}]
    async with client(
        EngineDouble(),
        tools=[EchoToolDouble()],
        llm_base_url=llm.url,
        llm_model="m",
        max_tool_rounds=2,
    ) as c:
        events = await chat(c, "loop")
    assert [e for e, _ in events].count("tool_use") == 2
    assert "tools" not in llm.requests[-1]  # the last round must answer in words
    assert events[-1][1]["text"] == "Enough."


async def test_auth_and_validation() -> None:
    async with client(EngineDouble()) as c:
        for method, path in (
            ("POST", "/v1/chat"),
            ("GET", "/v1/chat/sessions"),
            ("GET", "/api/status"),
        ):
            r = await c.request(method, path, json={"message": "hi"})
            assert r.status_code == 401
        bad = [
            ({"message": ""}, 422),
            ({"message": "   "}, 422),
            ({"message": "x" * 4001}, 422),
            ({"message": "hi", "session_id": "../etc"}, 422),
            ({"message": "hi", "extra": 1}, 422),
            ({}, 422),
        ]
        for body, code in bad:
            r = await c.post("/v1/chat", json=body, headers=AUTH)
            assert r.status_code == code, (body, r.text)
        big = await c.post(
            "/v1/chat", content=b'{"message": "' + b"x" * 70000 + b'"}', headers=AUTH
        )
        assert big.status_code == 413
        assert (await c.get("/v1/chat/sessions", headers=AUTH)).json()["total"] == 0


async def test_sessions_are_bounded_least_recently_used_first() -> None:
    async with client(EngineDouble(), max_sessions=2) as c:
        for sid in ("a1", "b2", "c3"):
            await chat(c, "hi", sid)
        await chat(c, "hi again", "b2")  # b2 used last
        await chat(c, "hi", "d4")
        listed = (await c.get("/v1/chat/sessions", headers=AUTH)).json()
        assert [s["id"] for s in listed["sessions"]] == ["d4", "b2"]
        assert listed["capacity"] == 2


async def test_chat_emits_the_creatures_events() -> None:
    engine = EngineDouble(memories=[memory("a memory")])
    async with client(engine) as c:
        await chat(c, "a memory please", "sess1")
        await c.app.state.runtime.observer.flush()
    creatures = [(e["creature"], e["event_type"]) for batch in engine.emitted for e in batch]
    assert ("mermaid", "start") in creatures  # the chat session
    assert ("sphinx", "complete") in creatures  # the design's memory loader
    assert ("lanternfish", "complete") in creatures  # the offline responder
    assert all(e["service"] == "annie-voice" for b in engine.emitted for e in b)


def test_llm_settings_must_be_complete() -> None:
    with pytest.raises(ValueError, match="ANNIE_VOICE_LLM_BASE_URL"):
        Settings(internal_token=TOKEN, llm_backend="openai")
    with pytest.raises(ValueError, match="ANNIE_VOICE_LLM_MODEL"):
        Settings(internal_token=TOKEN, llm_base_url="http://x/v1")
    with pytest.raises(ValueError, match="ANNIE_VOICE_CLAUDE_API_KEY"):
        Settings(internal_token=TOKEN, llm_backend="claude")
    assert Settings(internal_token=TOKEN).resolved_llm_backend() == "none"
    assert Settings(internal_token=TOKEN, claude_api_key="k").resolved_llm_backend() == "claude"


async def test_the_real_tools_from_settings_and_a_table_for_the_page(
    llm: ScriptedChatLLMDouble,
) -> None:
    table = {"title": "Tea", "columns": ["who", "likes"], "rows": [["Priya", "jasmine"]]}
    llm.script += [
        {"text": [], "tool_calls": [{"name": "render_table", "arguments": table}]},
        {"text": ["Here is the table."]},
    ]
    engine = EngineDouble(memories=[])
    enabled = ["think", "render_table"]
    async with client(
        engine, tools=None, tools_enabled=enabled, llm_base_url=llm.url, llm_model="m"
    ) as c:
        events = await chat(c, "make a table of teas")
    assert sorted(events[0][1]["tools"]) == sorted(enabled)  # from ANNIE_VOICE_TOOLS_ENABLED
    tool_use = next(d for e, d in events if e == "tool_use")
    assert tool_use["ok"] is True and tool_use["data"]["kind"] == "table"
    assert tool_use["data"]["rows"] == [["Priya", "jasmine"]]
    # The model reads the tool's content, not the payload drawn by the page.
    tool_message = llm.requests[1]["messages"][-1]
    assert tool_message["role"] == "tool" and '"ok": true' in tool_message["content"]
    assert '"data"' not in tool_message["content"]


async def test_a_language_model_gets_the_facts_first_every_turn(
    llm: ScriptedChatLLMDouble,
) -> None:
    llm.script += [{"text": ["Tea now."]}, {"text": ["Since Monday."]}]
    switch = memory("I've been switching to tea, coffee gives me headaches.", speaker="Arjun")
    engine = EngineDouble(
        memories=[memory("I love coffee every morning", speaker="Arjun"), switch],
        about=[{"name": "Arjun", "type": "person", "owner": True, "id": 1, "tier": "L1"}],
        facts=[fact("Arjun drinks tea", "Arjun", "DRINKS", "tea", since="2026-05-11T08:00:00Z",
                    replaced=[("Arjun drinks coffee", "coffee", "2026-05-11T08:00:00Z")],
                    sources=[switch])],
        promises=[{"id": 7, "name": "call Farhan", "evidence": "I promise I will call Farhan",
                   "speaker": "Arjun", "first_said_at": "2026-05-01T19:00:00Z",
                   "status": "open"}],
    )  # fmt: skip
    async with client(engine, llm_base_url=llm.url, llm_model="m", owner_speakers=["Arjun"]) as c:
        first = await chat(c, "what do I drink these days?")
        second = await chat(c, "since when?", session_id=first[0][1]["session_id"])
    used = dict(first)["memories"]
    assert [f["fact"] for f in used["facts"]] == ["Arjun drinks tea"]
    assert used["facts"][0]["replaced"][0]["fact"] == "Arjun drinks coffee"
    opening, later = llm.requests
    system = opening["messages"][0]["content"]
    block = system[system.index("<memory>") : system.index("</memory>")]
    # current facts first, the replaced one marked as past, before any quote
    now_at = block.index("[true now, since 2026-05-11] Arjun drinks tea")
    past_at = block.index("[past, until 2026-05-11] Arjun drinks coffee")
    assert now_at < past_at < block.index("I love coffee every morning")
    assert "prefer the current" in block
    assert "[open since 2026-05-01, Arjun] I promise I will call Farhan" in block
    # "I" is the owner configured
    searches = [dict(r.url.params) for r in engine.context_requests]
    assert {p.get("me") for p in searches if "tier" not in p} == {"Arjun"}
    # The later turn searched its own words and carries their facts too.
    asked = [(p["query"], p.get("tier")) for p in searches]
    assert [a for a in asked if a[0] == "since when?"] == [
        ("since when?", None),
        ("since when?", "L1,L2"),
    ]
    assert [a for a in asked if a[0] == "me"] == [("me", None)]  # the owner's: once, at start
    assert later["messages"][0]["content"].count("[true now, since 2026-05-11]") == 2
    assert "memories" in dict(second)
