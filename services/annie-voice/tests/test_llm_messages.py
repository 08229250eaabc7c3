from __future__ import annotations

import pytest
from annie_doubles import EchoToolDouble

from annie_voice.config import Settings
from annie_voice.llm.base import Message, ToolCall, tool_schema
from annie_voice.llm.claude import to_claude_messages, to_claude_tools
from annie_voice.llm.openai_compat import finish_call, to_openai_messages


def conversation() -> list[Message]:
    call_a = ToolCall(id="a", name="echo", arguments={"text": "1"})
    call_b = ToolCall(id="b", name="echo", arguments={"text": "2"})
    return [
        Message(role="user", content="hi"),
        Message(role="assistant", content="checking", tool_calls=(call_a, call_b)),
        Message(role="tool", content='{"echoed": "1"}', tool_call_id="a", name="echo"),
        Message(role="tool", content='{"echoed": "2"}', tool_call_id="b", name="echo"),
        Message(role="assistant", content="done"),
    ]


def test_claude_gets_tool_use_and_grouped_tool_results() -> None:
    out = to_claude_messages(conversation())
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant"]
    assert [b["type"] for b in out[1]["content"]] == ["text", "tool_use", "tool_use"]
    assert [b["tool_use_id"] for b in out[2]["content"]] == ["a", "b"]
    tools = to_claude_tools([EchoToolDouble()])
    assert tools[0]["input_schema"]["required"] == ["text"]


def test_openai_gets_system_tool_calls_and_tool_messages() -> None:
    out = to_openai_messages("sys", conversation())
    assert out[0] == {"role": "system", "content": "sys"}
    assert out[2]["tool_calls"][1]["function"] == {"name": "echo", "arguments": '{"text": "2"}'}
    assert out[3] == {"role": "tool", "tool_call_id": "a", "content": '{"echoed": "1"}'}


def test_streamed_call_with_bad_arguments_carries_an_error() -> None:
    assert finish_call(0, {"id": "x", "name": "echo", "arguments": "{oops"}).error
    assert finish_call(0, {"id": "x", "name": "echo", "arguments": "[1]"}).error
    ok = finish_call(0, {"name": "echo", "arguments": ""})
    assert ok.error is None and ok.arguments == {} and ok.id == "call_0"


def test_tool_schema_defaults_to_an_object() -> None:
    class Bare:
        name = "bare"
        description = "no parameters"
        parameters: dict = {}  # noqa: RUF012

        async def run(self, args):
            return {}

    assert tool_schema(Bare()) == {"type": "object", "properties": {}}


def test_timezone_must_be_known() -> None:
    with pytest.raises(ValueError, match="IANA"):
        Settings(timezone="Mars/Olympus")
    assert Settings(timezone="Asia/Kolkata").timezone == "Asia/Kolkata"
