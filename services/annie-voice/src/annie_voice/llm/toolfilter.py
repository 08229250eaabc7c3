"""The tool-call text filter: some models write tool calls into their text instead of the
tool-call channel — `<tool_call>{"name": …, "arguments": …}</tool_call>` (Qwen, Hermes) or a
bare `{"name": …, "arguments": …}` line. Such text must never be spoken or shown; when it
parses, it becomes a real tool call.

Feed the stream's text deltas in order; each `feed` returns the text safe to show now and any
calls completed. Text that might still turn out to be a call (a line starting with `{`, a
partial `<tool_call` tag) is held back until it is decided. `flush` ends the stream.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Collection
from typing import Any

from annie_voice.llm.base import ToolCall

OPEN = "<tool_call>"
CLOSE = "</tool_call>"


def _new_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


def parse_call(text: str) -> ToolCall | None:
    """`{"name": str, "arguments"|"parameters": object|JSON string}` → a ToolCall, else None."""
    text = text.strip()
    if text.startswith("```"):
        text = text.strip("`").removeprefix("json").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return None
    if isinstance(data, dict) and isinstance(data.get("function"), dict):
        data = data["function"]
    if not isinstance(data, dict) or not isinstance(data.get("name"), str):
        return None
    args: Any = data.get("arguments", data.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            return None
    if not isinstance(args, dict):
        return None
    return ToolCall(id=_new_id(), name=data["name"], arguments=args)


class ToolCallTextFilter:
    def __init__(self, known_tools: Collection[str] = ()) -> None:
        # Bare JSON lines are calls only when they name a known tool (an answer may be JSON);
        # text inside <tool_call> tags is never shown, whatever it names.
        self.known = frozenset(known_tools)
        self._buf = ""
        self._in_tag = False
        self._at_line_start = True
        self.removed = 0  # leaked-call spans removed from the text

    def feed(self, chunk: str) -> tuple[str, list[ToolCall]]:
        self._buf += chunk
        return self._drain(final=False)

    def flush(self) -> tuple[str, list[ToolCall]]:
        return self._drain(final=True)

    def _take_call(self, raw: str, *, tagged: bool) -> ToolCall | None:
        call = parse_call(raw)
        if call is None or (not tagged and call.name not in self.known):
            return None
        return call

    def _drain(self, *, final: bool) -> tuple[str, list[ToolCall]]:
        out: list[str] = []
        calls: list[ToolCall] = []
        while self._buf:
            if self._in_tag:
                end = self._buf.find(CLOSE)
                if end < 0:
                    if final:  # an unclosed tag: a call if it parses, dropped either way
                        call = self._take_call(self._buf, tagged=True)
                        calls += [call] if call else []
                        self.removed += 1
                        self._buf = ""
                    break
                call = self._take_call(self._buf[:end], tagged=True)
                calls += [call] if call else []
                self.removed += 1
                self._buf = self._buf[end + len(CLOSE) :]
                self._in_tag = False
                continue
            if self._at_line_start and self._buf.lstrip(" \t").startswith("{"):
                end = self._buf.find("\n")
                if end < 0 and not final:
                    break  # hold the line until it ends
                line = self._buf if end < 0 else self._buf[: end + 1]
                call = self._take_call(line, tagged=False)
                if call is not None:
                    calls.append(call)
                    self.removed += 1
                else:
                    out.append(line)
                self._buf = self._buf[len(line) :]
                self._at_line_start = True
                continue
            start = self._buf.find(OPEN)
            if start >= 0:
                out.append(self._buf[:start])
                self._buf = self._buf[start + len(OPEN) :]
                self._in_tag = True
                continue
            # No tag: show everything except a tail that could be the start of one, and
            # stop at a newline so the next line's start is examined.
            newline = self._buf.find("\n")
            if newline >= 0:
                out.append(self._buf[: newline + 1])
                self._buf = self._buf[newline + 1 :]
                self._at_line_start = True
                continue
            keep = 0 if final else _partial_tag_len(self._buf)
            if self._at_line_start and not self._buf.strip() and not final:
                break  # only indentation so far: the line may still start with `{`
            shown = self._buf[: len(self._buf) - keep]
            if shown:
                out.append(shown)
                self._at_line_start = False
            self._buf = self._buf[len(shown) :]
            break
        text = "".join(out)
        return text, calls


def _partial_tag_len(text: str) -> int:
    """How many trailing characters of `text` could begin `<tool_call>`."""
    for n in range(min(len(OPEN) - 1, len(text)), 0, -1):
        if OPEN.startswith(text[-n:]):
            return n
    return 0
