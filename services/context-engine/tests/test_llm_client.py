"""LLM clients over real HTTP against the scripted test double: what is sent (JSON schema,
strict), format downgrades, error kinds, timeouts, and the Claude fallback."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from scripted_llm_server import (
    ScriptedError,
    ScriptedHang,
    ScriptedLLMServer,
    request_schema,
    schema_name,
    scripted_llm_server,
)

from context_engine.config import Settings
from context_engine.llm import (
    LLMConfigError,
    LLMOutputError,
    LLMRequestError,
    LLMUnavailableError,
    OpenAICompatibleClient,
    make_llm_client,
)
from context_engine.llm.claude import ClaudeClient, tool_name
from context_engine.llm.fallback import FallbackClient

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"names": {"type": "array", "items": {"type": "string"}}},
    "required": ["names"],
    "additionalProperties": False,
}
ANSWER = {"names": ["Priya"]}


def closed_port_url() -> str:
    """A loopback URL nothing listens on (connection refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def format_error(request: dict[str, Any]) -> ScriptedError | None:
    if request.get("response_format", {}).get("type") in ("json_schema", "json_object"):
        return ScriptedError(
            400, json.dumps({"error": {"message": "response_format is not supported"}})
        )
    return None


@pytest.fixture
def server() -> Iterator[ScriptedLLMServer]:
    with scripted_llm_server() as s:
        yield s


@pytest.fixture
async def client(server: ScriptedLLMServer) -> AsyncIterator[OpenAICompatibleClient]:
    c = OpenAICompatibleClient(server.url, "test-model", max_retries=0, max_tokens=321)
    yield c
    await c.aclose()


async def ask(client: Any) -> str:
    return await client.complete_json("You list names.", "Priya said hi.", SCHEMA, "names")


async def test_json_schema_strict_is_sent(
    server: ScriptedLLMServer, client: OpenAICompatibleClient
) -> None:
    server.reply(lambda request: ANSWER)
    assert json.loads(await ask(client)) == ANSWER
    (request,) = server.chat_requests()
    assert request["model"] == "test-model"
    assert request["temperature"] == 0
    assert request["max_tokens"] == 321
    assert request["response_format"]["json_schema"]["strict"] is True
    assert schema_name(request) == "names"
    assert request_schema(request) == SCHEMA
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    assert request["messages"][0]["content"] == "You list names."  # schema not in the prompt


async def test_unscripted_server_answers_the_minimal_valid_instance(
    client: OpenAICompatibleClient,
) -> None:
    assert json.loads(await ask(client)) == {"names": []}


async def test_rejected_json_schema_falls_back_to_json_object_and_remembers(
    server: ScriptedLLMServer, client: OpenAICompatibleClient
) -> None:
    def reply(request: dict[str, Any]) -> Any:
        if request.get("response_format", {}).get("type") == "json_schema":
            return ScriptedError(
                400, '{"error": {"message": "Unsupported response_format type: json_schema"}}'
            )
        return ANSWER

    server.reply(reply)
    assert json.loads(await ask(client)) == ANSWER
    assert json.loads(await ask(client)) == ANSWER
    kinds = [r["response_format"]["type"] for r in server.chat_requests()]
    assert kinds == ["json_schema", "json_object", "json_object"]
    assert client.mode == "json_object"
    # not enforced by the server any more: the schema is in the prompt
    assert '"names"' in server.chat_requests()[1]["messages"][0]["content"]


async def test_rejected_json_object_falls_back_to_plain(
    server: ScriptedLLMServer, client: OpenAICompatibleClient
) -> None:
    server.reply(lambda request: format_error(request) or f"```json\n{json.dumps(ANSWER)}\n```")
    text = await ask(client)
    assert "Priya" in text
    requests = server.chat_requests()
    assert [r.get("response_format", {}).get("type") for r in requests] == [
        "json_schema",
        "json_object",
        None,
    ]
    assert client.mode == "plain"


async def test_other_bad_requests_are_not_retried(
    server: ScriptedLLMServer, client: OpenAICompatibleClient
) -> None:
    server.reply(
        lambda request: ScriptedError(
            400, '{"error": {"message": "the prompt exceeds the context length"}}'
        )
    )
    with pytest.raises(LLMRequestError, match="HTTP 400"):
        await ask(client)
    assert len(server.chat_requests()) == 1
    assert client.mode == "json_schema"


async def test_unknown_model_names_the_setting(
    server: ScriptedLLMServer, client: OpenAICompatibleClient
) -> None:
    server.reply(lambda request: ScriptedError(404, '{"error": {"message": "model not found"}}'))
    with pytest.raises(LLMRequestError, match="CONTEXT_ENGINE_LLM_MODEL"):
        await ask(client)


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_server_errors_are_unavailable(
    server: ScriptedLLMServer, client: OpenAICompatibleClient, status: int
) -> None:
    server.reply(lambda request: ScriptedError(status))
    with pytest.raises(LLMUnavailableError, match=f"HTTP {status}"):
        await ask(client)


async def test_unreachable_server_is_unavailable() -> None:
    client = OpenAICompatibleClient(closed_port_url(), "m", max_retries=0)
    try:
        with pytest.raises(LLMUnavailableError, match="CONTEXT_ENGINE_LLM_BASE_URL"):
            await ask(client)
    finally:
        await client.aclose()


async def test_timeout_is_unavailable(server: ScriptedLLMServer) -> None:
    server.reply(lambda request: ScriptedHang())
    client = OpenAICompatibleClient(server.url, "m", max_retries=0, timeout_s=0.2)
    try:
        with pytest.raises(LLMUnavailableError, match=r"did not answer within 0\.2 s"):
            await ask(client)
    finally:
        await client.aclose()


async def test_empty_answer_is_an_output_error(
    server: ScriptedLLMServer, client: OpenAICompatibleClient
) -> None:
    server.reply(lambda request: "")
    with pytest.raises(LLMOutputError, match="no content"):
        await ask(client)


# --- Claude ---


@pytest.fixture
async def claude(server: ScriptedLLMServer) -> AsyncIterator[ClaudeClient]:
    c = ClaudeClient("test-key", "claude-test", base_url=server.anthropic_url, max_retries=0)
    yield c
    await c.aclose()


async def test_claude_answers_through_a_forced_tool(
    server: ScriptedLLMServer, claude: ClaudeClient
) -> None:
    server.reply_anthropic(lambda request: ANSWER)
    assert json.loads(await ask(claude)) == ANSWER
    (request,) = server.anthropic_requests()
    assert request["model"] == "claude-test"
    assert request["system"] == "You list names."
    assert request["tools"][0]["input_schema"] == SCHEMA
    assert request["tool_choice"] == {"type": "tool", "name": "names"}
    assert server.chat_requests() == []


async def test_claude_text_answer_is_returned_for_parsing(
    server: ScriptedLLMServer, claude: ClaudeClient
) -> None:
    server.reply_anthropic(lambda request: 'Here: {"names": ["Ravi"]}')
    assert await ask(claude) == 'Here: {"names": ["Ravi"]}'


async def test_claude_errors(server: ScriptedLLMServer, claude: ClaudeClient) -> None:
    server.reply_anthropic(lambda request: ScriptedError(529))
    with pytest.raises(LLMUnavailableError, match="HTTP 529"):
        await ask(claude)
    server.reply_anthropic(lambda request: ScriptedError(401))
    with pytest.raises(LLMRequestError, match="CONTEXT_ENGINE_CLAUDE_API_KEY"):
        await ask(claude)


def test_tool_names_are_valid() -> None:
    assert tool_name("memory extraction/v1") == "memory_extraction_v1"
    assert tool_name("") == "answer"
    assert len(tool_name("x" * 100)) == 64


# --- fallback ---


@pytest.fixture
async def fallback(
    server: ScriptedLLMServer, client: OpenAICompatibleClient, claude: ClaudeClient
) -> FallbackClient:
    server.reply_anthropic(lambda request: {"names": ["from Claude"]})
    return FallbackClient(client, claude)


@pytest.mark.parametrize(
    "primary",
    [
        ScriptedError(500),
        ScriptedError(502, "{}"),
        "I am sorry, I cannot produce JSON.",
        "",
    ],
    ids=["500", "502", "prose", "empty"],
)
async def test_claude_answers_when_the_primary_fails(
    server: ScriptedLLMServer, fallback: FallbackClient, primary: Any
) -> None:
    server.reply(lambda request: primary)
    assert json.loads(await ask(fallback)) == {"names": ["from Claude"]}
    assert len(server.chat_requests()) == 1
    assert len(server.anthropic_requests()) == 1


async def test_claude_answers_when_the_primary_is_unreachable(
    server: ScriptedLLMServer, claude: ClaudeClient
) -> None:
    server.reply_anthropic(lambda request: ANSWER)
    primary = OpenAICompatibleClient(closed_port_url(), "m", max_retries=0)
    try:
        assert json.loads(await ask(FallbackClient(primary, claude))) == ANSWER
    finally:
        await primary.aclose()


async def test_claude_answers_when_the_primary_times_out(
    server: ScriptedLLMServer, claude: ClaudeClient
) -> None:
    server.reply(lambda request: ScriptedHang())
    server.reply_anthropic(lambda request: ANSWER)
    primary = OpenAICompatibleClient(server.url, "m", max_retries=0, timeout_s=0.2)
    try:
        assert json.loads(await ask(FallbackClient(primary, claude))) == ANSWER
    finally:
        await primary.aclose()


async def test_primary_answer_is_kept_when_readable(
    server: ScriptedLLMServer, fallback: FallbackClient
) -> None:
    server.reply(lambda request: f"<think>hm</think>{json.dumps(ANSWER)}")
    assert "Priya" in await ask(fallback)
    assert server.anthropic_requests() == []


async def test_refused_request_is_not_hidden_by_the_fallback(
    server: ScriptedLLMServer, fallback: FallbackClient
) -> None:
    server.reply(lambda request: ScriptedError(401, '{"error": {"message": "bad key"}}'))
    with pytest.raises(LLMRequestError):
        await ask(fallback)
    assert server.anthropic_requests() == []


async def test_both_failing_names_both(server: ScriptedLLMServer, fallback: FallbackClient) -> None:
    server.reply(lambda request: ScriptedError(500))
    server.reply_anthropic(lambda request: ScriptedError(503))
    with pytest.raises(LLMUnavailableError) as info:
        await ask(fallback)
    assert "claude" in str(info.value)
    assert "openai-compatible" in str(info.value)


# --- settings ---


def settings(**kwargs: Any) -> Settings:
    base: dict[str, Any] = {"llm_base_url": None, "claude_api_key": None}
    return Settings(**(base | kwargs))


async def test_no_base_url_means_no_llm() -> None:
    assert make_llm_client(settings()) is None
    with pytest.raises(LLMConfigError, match="CONTEXT_ENGINE_LLM_BASE_URL"):
        make_llm_client(settings(), required=True)


def test_bad_settings_name_the_variable() -> None:
    with pytest.raises(LLMConfigError, match="CONTEXT_ENGINE_LLM_BASE_URL"):
        make_llm_client(settings(llm_base_url="localhost:11434"))
    with pytest.raises(LLMConfigError, match="CONTEXT_ENGINE_LLM_MODEL"):
        make_llm_client(settings(llm_base_url="http://127.0.0.1:1/v1", llm_model=" "))


async def test_settings_build_the_clients(server: ScriptedLLMServer) -> None:
    plain = make_llm_client(
        settings(llm_base_url=server.url, llm_model="qwen3:8b", llm_max_tokens=100)
    )
    assert isinstance(plain, OpenAICompatibleClient)
    assert plain.model == "qwen3:8b"
    assert plain.max_tokens == 100
    await plain.aclose()
    both = make_llm_client(settings(llm_base_url=server.url, claude_api_key="k"))
    assert isinstance(both, FallbackClient)
    assert isinstance(both.fallback, ClaudeClient)
    await both.aclose()


def test_importing_the_package_loads_no_sdk() -> None:
    import subprocess
    import sys

    code = (
        "import sys, context_engine.llm, context_engine.extract.llm;"
        "print(sorted(m for m in ('openai', 'anthropic') if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip() == "[]"
