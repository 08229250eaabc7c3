"""How much one tool call may return (docs/mcp.md, "Limits"): an agent's context window is
small and a memory is large, so every list is capped, every text clipped, and the whole
result bounded."""

from __future__ import annotations

from typing import TypeVar

from pydantic import BaseModel

# Items in one list of a result (memories, facts, entities, sessions, promises).
MAX_ITEMS = 50
# Segments of one transcript per call (get_episode pages through longer sessions).
MAX_SEGMENTS = 200
# Characters of one text (a segment, a fact, a reflection) before it is clipped.
MAX_TEXT_CHARS = 2_000
# Bytes of a whole result as compact JSON; past this, items are dropped from its longest list.
MAX_RESULT_BYTES = 64 * 1024
# Sources (segments) shown for one fact.
MAX_FACT_SOURCES = 3
# What a clipped text ends with.
TRUNCATED_MARK = " … [truncated]"


def clip(text: str | None, limit: int = MAX_TEXT_CHARS) -> str | None:
    """`text` cut to `limit` characters, the cut marked."""
    if text is None or len(text) <= limit:
        return text
    return text[: limit - len(TRUNCATED_MARK)].rstrip() + TRUNCATED_MARK


def size_of(model: BaseModel) -> int:
    return len(model.model_dump_json().encode("utf-8"))


class Bounded(BaseModel):
    """A result that says whether anything was left out of it (a list capped or cut to fit
    MAX_RESULT_BYTES)."""

    truncated: bool = False


M = TypeVar("M", bound=Bounded)


def bound(model: M) -> M:
    """`model` within MAX_RESULT_BYTES: the last item of its longest top-level list is dropped
    until it fits (`truncated` set). Texts are already clipped, so lists are what grows."""
    if size_of(model) <= MAX_RESULT_BYTES:
        return model
    model.truncated = True
    while size_of(model) > MAX_RESULT_BYTES:
        lists = [
            value
            for name in type(model).model_fields
            if isinstance(value := getattr(model, name), list) and value
        ]
        if not lists:
            break  # only clipped texts left: small by construction
        max(lists, key=len).pop()
    return model
