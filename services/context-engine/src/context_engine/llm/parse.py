"""Reading JSON out of what a model actually says.

Even under a JSON-schema response format, models (and servers that ignore the format) wrap their
answer: reasoning in `<think>…</think>` (Qwen3, DeepSeek-R1; sometimes only the closing tag,
when the chat template opened the block), Markdown fences, a sentence before or after, a
trailing comma, an answer cut off by the token limit (its complete items are kept).
`parse_json_payload` finds the answer in all of these, or raises
`LLMOutputError` quoting what it got. `as_list` accepts the usual shapes of "a list of items":
the list itself, an object wrapping it under a key, or a single item where a list was expected.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection
from typing import Any

from context_engine.llm.errors import LLMOutputError

_THINK_TAGS = r"(?:think|thinking|reasoning)"
_THINK_BLOCK = re.compile(rf"<({_THINK_TAGS})>.*?</\1>", re.DOTALL | re.IGNORECASE)
_THINK_OPEN = re.compile(rf"<{_THINK_TAGS}>", re.IGNORECASE)
_THINK_CLOSE = re.compile(rf"</{_THINK_TAGS}>", re.IGNORECASE)
_FENCE = re.compile(r"```[ \t]*[\w+.-]*[ \t]*\r?\n?(.*?)```", re.DOTALL)
_OPENER = re.compile(r"[\[{]")
_SNIPPET = 200

_MISSING = object()


def snippet(text: str, limit: int = _SNIPPET) -> str:
    """The start of `text` for an error message or a log line (`…` when cut)."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def strip_thinking(text: str) -> str:
    """`text` without reasoning blocks: whole `<think>…</think>` blocks, everything up to a
    closing tag whose opening tag the chat template wrote, and an opening tag never closed
    (the answer, if any, is searched for in what follows it)."""
    text = _THINK_BLOCK.sub("", text)
    closes = list(_THINK_CLOSE.finditer(text))
    if closes:
        text = text[closes[-1].end() :]
    return _THINK_OPEN.sub("", text)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return _MISSING


def _scan(text: str) -> tuple[Any, int]:
    """The longest JSON object or array embedded in `text` (the first on a tie), and the
    length of its text."""
    decoder = json.JSONDecoder()
    best: Any = _MISSING
    best_len = 0
    pos = 0
    while (m := _OPENER.search(text, pos)) is not None:
        start = m.start()
        try:
            value, end = decoder.raw_decode(text, start)
        except ValueError:
            pos = start + 1
            continue
        if end - start > best_len:
            best, best_len = value, end - start
        pos = end  # what is nested inside is shorter: skip it
    return best, best_len


def _salvage_from(text: str, start: int, max_tries: int) -> tuple[Any, int, int | None]:
    """Salvage the value starting at `start` (see `salvage_truncated`): (value, its length,
    None) when it is cut off, or (missing, 0, where to look next) when it closes or is not
    JSON."""
    stack: list[str] = []
    cuts: list[tuple[int, str]] = []  # (end of a closed value, closers still needed there)
    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            stack.append("]" if ch == "[" else "}")
        elif ch in "]}":
            if not stack or stack[-1] != ch:
                return _MISSING, 0, start + 1  # not JSON from here
            stack.pop()
            if not stack:
                return _MISSING, 0, i + 1  # it closed: not cut off (the scan handles it)
            cuts.append((i + 1, "".join(reversed(stack))))
    for end, closers in reversed(cuts[-max_tries:]):
        value = _loads(text[start:end] + closers)
        if value is not _MISSING:
            return value, end - start, None
    return _MISSING, 0, None


def salvage_truncated(text: str, max_tries: int = 64) -> tuple[Any, int]:
    """The complete part of a JSON value cut off by the token limit, with its open brackets
    closed, and the length of text it covers; (missing, 0) when there is none.

    The cut-off value is the first object or array in `text` that never closes; its candidate
    ends are the ends of the objects and arrays nested in it, tried from the last back.
    """
    pos = 0
    while (m := _OPENER.search(text, pos)) is not None:
        value, length, resume = _salvage_from(text, m.start(), max_tries)
        if resume is None:
            return value, length
        pos = resume
    return _MISSING, 0


def remove_trailing_commas(text: str) -> str:
    """`[1, 2,]` → `[1, 2]` and `{"a": 1,}` → `{"a": 1}`, leaving strings alone."""
    out: list[str] = []
    in_string = escaped = False
    n = len(text)
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == ",":
            j = i + 1
            while j < n and text[j].isspace():
                j += 1
            if j < n and text[j] in "]}":
                continue
        out.append(ch)
    return "".join(out)


def _whole_or_fenced(body: str) -> Any:
    value = _loads(body)
    if value is not _MISSING:
        return value
    for fenced in _FENCE.finditer(body):
        value = _loads(fenced.group(1).strip())
        if value is not _MISSING:
            return value
    return _MISSING


def _find(body: str) -> Any:
    repaired = remove_trailing_commas(body)
    for text in (body, repaired) if repaired != body else (body,):
        value = _whole_or_fenced(text)
        if value is not _MISSING:
            return value
    # Embedded in prose: the longer find of the text as it is and the repaired text (a value
    # with a trailing comma would otherwise lose to the largest valid part inside it).
    value, length = _scan(body)
    if repaired != body:
        fixed, fixed_length = _scan(repaired)
        if fixed_length > length:
            value, length = fixed, fixed_length
    # Cut off by the token limit: the complete items of the outermost value beat any one
    # complete value nested inside it.
    salvaged, salvaged_length = salvage_truncated(repaired)
    if salvaged_length > length:
        value = salvaged
    return value


def parse_json_payload(text: str | None) -> Any:
    """The JSON value in a model's answer.

    Tried in order: the whole answer; the answer without reasoning blocks (then also with
    trailing commas removed); the first fenced block that parses; the longest object or array
    embedded in prose — or, when the answer was cut off, its complete part with the open
    brackets closed. Raises `LLMOutputError` (with a snippet) when none parses.
    """
    if text is None or not text.strip():
        raise LLMOutputError("the model's answer is empty")
    value = _loads(text.strip())
    if value is not _MISSING:
        return value
    body = strip_thinking(text).strip()
    if not body:
        raise LLMOutputError(f"the model's answer is only reasoning, no JSON: {snippet(text)!r}")
    value = _find(body)
    if value is _MISSING:
        hint = " (cut off? no complete JSON value)" if _OPENER.search(body) else ""
        raise LLMOutputError(f"no JSON in the model's answer{hint}: {snippet(text)!r}")
    return value


def as_list(payload: Any, key: str | None = None, *, item_keys: Collection[str] = ()) -> list[Any]:
    """The items of a payload that should have been a list.

    - a list: itself;
    - an object with `key`: its value there (a single item becomes a one-item list);
    - an object that has any of `item_keys`: a single item, so `[payload]`;
    - any other object: the items of every list-valued field, concatenated (models sometimes
      group items by kind: `{"people": [...], "places": [...]}`), or `[payload]` if none;
    - anything else (null, a number, a string): no items.
    """
    if isinstance(payload, list):
        return payload
    if not isinstance(payload, dict):
        return []
    if key is not None and key in payload:
        inner = payload[key]
        if isinstance(inner, list):
            return inner
        return [inner] if isinstance(inner, dict) else []
    if any(k in payload for k in item_keys):
        return [payload]
    lists = [v for v in payload.values() if isinstance(v, list)]
    if lists:
        return [item for inner in lists for item in inner]
    return [payload]
