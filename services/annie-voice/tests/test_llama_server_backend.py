"""The design's llama-server as Annie's `qwen3.5-9b` backend (her-os-architecture.md §2 Service
Map, §8 LLM Backend Selection; issue 26 item 4): a second OpenAI-compatible server beside the
default one (Ollama), chosen per session with `llm_backend: "qwen3.5-9b"` on `POST /v1/chat`
or `POST /start`. Two scripted OpenAI-compatible servers stand in for Ollama and llama-server;
each request says which one answered."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest
from annie_doubles import TOKEN, EngineDouble, ScriptedChatLLMDouble, memory
from asgi_lifespan import LifespanManager

from annie_voice.app import create_app
from annie_voice.config import Settings

AUTH = {"X-Internal-Token": TOKEN}


@asynccontextmanager
async def client(**settings: Any) -> AsyncIterator[httpx.AsyncClient]:
    s = Settings(internal_token=TOKEN, events_enabled=False, **settings)
    engine = EngineDouble(memories=[memory("We talked about the Goa trip", tier="L1")])
    app = create_app(s, tools=(), engine_transport=engine.transport())
    async with (
        LifespanManager(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
    ):
        yield c


@pytest.fixture
def ollama() -> Iterator[ScriptedChatLLMDouble]:
    with ScriptedChatLLMDouble([]) as double:
        yield double


@pytest.fixture
def llama_server() -> Iterator[ScriptedChatLLMDouble]:
    with ScriptedChatLLMDouble([]) as double:
        yield double


def both(ollama: ScriptedChatLLMDouble, llama_server: ScriptedChatLLMDouble) -> dict[str, Any]:
    """Compose's GPU overlay with the llama-server profile: Ollama the default, llama-server
    the `qwen3.5-9b` backend."""
    return {
        "llm_base_url": ollama.url,
        "llm_model": "qwen3:8b",
        "llama_server_url": llama_server.url,
    }


def frames(body: str) -> list[dict[str, Any]]:
    """Each `data:` line's JSON (the design's way of reading the stream)."""
    return [
        json.loads(line[5:].strip())
        for line in body.replace("\r\n", "\n").split("\n")
        if line.startswith("data:")
    ]


async def chat(c: httpx.AsyncClient, body: dict[str, Any]) -> httpx.Response:
    return await c.post("/v1/chat", json=body, headers=AUTH)


async def test_qwen3_5_9b_reaches_the_llama_server_and_auto_stays_on_ollama(
    ollama: ScriptedChatLLMDouble, llama_server: ScriptedChatLLMDouble
) -> None:
    ollama.script += [{"text": ["from Ollama"]}]
    llama_server.script += [{"text": ["from llama-server"]}]
    async with client(**both(ollama, llama_server)) as c:
        status = (await c.get("/api/status", headers=AUTH)).json()
        assert status["backend"] == "openai" and status["model"] == "qwen3:8b"
        assert status["backends"] == ["openai", "none", "qwen3.5-9b"]
        answers = {}
        for name in ("qwen3.5-9b", "auto"):
            r = await chat(c, {"message": "What did I talk about yesterday?", "llm_backend": name})
            assert r.status_code == 200, r.text
            f = frames(r.text)
            answers[name] = (f[0]["backend"], f[-1]["text"])
    assert answers["qwen3.5-9b"] == ("qwen3.5-9b", "from llama-server")
    assert answers["auto"] == ("openai", "from Ollama")
    (asked,) = llama_server.requests
    # llama-server's --alias (compose) names its model so; the memory briefing went with it
    assert asked["model"] == "qwen3.5-9b" and asked["stream"] is True
    assert "Goa trip" in asked["messages"][0]["content"]
    assert [r["model"] for r in ollama.requests] == ["qwen3:8b"]


async def test_the_model_name_sent_to_the_llama_server_is_a_setting(
    ollama: ScriptedChatLLMDouble, llama_server: ScriptedChatLLMDouble
) -> None:
    async with client(**both(ollama, llama_server), llama_server_model="Qwen3.5-9B-Q4_K_M") as c:
        r = await chat(c, {"message": "hello", "llm_backend": "qwen3.5-9b"})
        assert r.status_code == 200, r.text
    assert [r["model"] for r in llama_server.requests] == ["Qwen3.5-9B-Q4_K_M"]
    assert ollama.requests == []


async def test_a_llama_server_session_keeps_its_backend(
    ollama: ScriptedChatLLMDouble, llama_server: ScriptedChatLLMDouble
) -> None:
    llama_server.script += [{"text": ["local 9B"]}] * 4
    async with client(**both(ollama, llama_server)) as c:
        r = await chat(c, {"message": "hello", "llm_backend": "qwen3.5-9b"})
        sid = frames(r.text)[0]["session_id"]
        for later in ({"llm_backend": "qwen3.5-9b"}, {"llm_backend": "auto"}, {}):
            r = await chat(c, {"message": "and then?", "session_id": sid, **later})
            f = frames(r.text)
            assert f[0]["backend"] == "qwen3.5-9b" and f[0]["new"] is False, later
        # `openai` is Ollama here, another backend than the session's
        r = await chat(c, {"message": "and then?", "session_id": sid, "llm_backend": "openai"})
        assert r.status_code == 409
        assert r.json()["detail"].startswith(f"session {sid} runs llm_backend 'qwen3.5-9b'")
    assert len(llama_server.requests) == 4 and ollama.requests == []  # the first turn, 3 more


async def test_start_reserves_a_voice_session_on_the_llama_server(
    ollama: ScriptedChatLLMDouble, llama_server: ScriptedChatLLMDouble
) -> None:
    llama_server.script += [{"text": ["voice on 9B"]}]
    async with client(**both(ollama, llama_server)) as c:
        r = await c.post("/start", json={"llm_backend": "qwen3.5-9b"}, headers=AUTH)
        assert r.status_code == 200, r.text
        started = r.json()
        assert started["llm"] == "qwen3.5-9b"
        # the voice pipeline opens that session's chat at connect; a typed turn does the same
        r = await chat(c, {"message": "hi", "session_id": started["session_id"]})
        f = frames(r.text)
        assert f[0]["backend"] == "qwen3.5-9b" and f[-1]["text"] == "voice on 9B"
    assert ollama.requests == []


async def test_the_llama_server_alone_beside_the_offline_responder(
    llama_server: ScriptedChatLLMDouble,
) -> None:
    """No default LLM (the offline memory responder answers `auto`): `qwen3.5-9b` still
    reaches the llama-server, and `openai` is refused naming its settings."""
    llama_server.script += [{"text": ["9B here"]}]
    async with client(llama_server_url=llama_server.url) as c:
        status = (await c.get("/api/status", headers=AUTH)).json()
        assert status["backend"] == "none" and status["backends"] == ["none", "qwen3.5-9b"]
        r = await chat(c, {"message": "hello", "llm_backend": "qwen3.5-9b"})
        assert frames(r.text)[-1]["text"] == "9B here"
        r = await chat(c, {"message": "hello", "llm_backend": "openai"})
        assert r.status_code == 422
        assert "ANNIE_VOICE_LLM_BASE_URL and ANNIE_VOICE_LLM_MODEL" in r.json()["detail"]


async def test_without_a_llama_server_qwen3_5_9b_is_the_openai_backend_as_before(
    ollama: ScriptedChatLLMDouble,
) -> None:
    ollama.script += [{"text": ["from Ollama"]}]
    async with client(llm_base_url=ollama.url, llm_model="qwen3:8b") as c:
        status = (await c.get("/api/status", headers=AUTH)).json()
        assert status["backends"] == ["openai", "none"]
        r = await chat(c, {"message": "hello", "llm_backend": "qwen3.5-9b"})
        assert frames(r.text)[0]["backend"] == "openai"
    assert [r["model"] for r in ollama.requests] == ["qwen3:8b"]


async def test_nothing_configured_names_both_ways_to_enable_qwen3_5_9b() -> None:
    async with client() as c:
        r = await chat(c, {"message": "hello", "llm_backend": "qwen3.5-9b"})
        assert r.status_code == 422
        detail = r.json()["detail"]
        assert "set ANNIE_VOICE_LLM_BASE_URL and ANNIE_VOICE_LLM_MODEL to enable it" in detail
        assert "or ANNIE_VOICE_LLAMA_SERVER_URL for a llama-server of its own" in detail


def test_the_settings_are_read_from_the_environment_and_empty_means_unset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ANNIE_VOICE_LLAMA_SERVER_URL", "http://llama-server:8003/v1")
    monkeypatch.setenv("ANNIE_VOICE_LLAMA_SERVER_MODEL", "qwen3.5-9b-q4")
    monkeypatch.setenv("ANNIE_VOICE_LLAMA_SERVER_API_KEY", "k" * 20)
    s = Settings(internal_token=TOKEN)
    assert s.llama_server_url == "http://llama-server:8003/v1"
    assert s.llama_server_model == "qwen3.5-9b-q4"
    assert s.llama_server_api_key is not None and "k" * 20 not in repr(s)
    # compose writes `${HER_OS_LLAMA_SERVER_URL:-}`: an unset variable arrives as ""
    monkeypatch.setenv("ANNIE_VOICE_LLAMA_SERVER_URL", "")
    monkeypatch.setenv("ANNIE_VOICE_LLAMA_SERVER_API_KEY", "")
    s = Settings(internal_token=TOKEN)
    assert s.llama_server_url is None and s.llama_server_api_key is None
