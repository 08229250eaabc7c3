"""A memory added as text (POST /v1/memories): written as a transcript session through the same
JSONL contract and atomic append as speech, so the watcher and ingestion, extraction, the
indexes and forgetting treat it like any conversation.

The text becomes segments the way a transcript has turns: one per paragraph, a long paragraph
cut at sentence ends (at word boundaries when a sentence alone is too long), each at most
`MAX_SEGMENT_CHARS` unless a single word is longer. Times are estimated from the words at a
speaking pace, consecutive from `at`. A new session starts at `at`; appending to an existing
one keeps that session's clock (its first line's `session_started_at`), so `at` may not be
before it. `reflection-…` sessions are refused: the daily reflection rewrites its file whole.
"""

from __future__ import annotations

import math
import re
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from context_engine.ingest.session_kinds import REFLECTION_PREFIX
from her_os_shared.jsonl import append_records, stream_path
from her_os_shared.logging import get_logger
from her_os_shared.transcript import Segment, TranscriptPayload, recorded_start

log = get_logger(__name__)

MAX_SEGMENT_CHARS = 1000
WORDS_PER_S = 2.5  # a relaxed speaking pace
CHARS_PER_WORD = 6  # text without spaces (Chinese, Japanese, Thai) is counted by length
STT_ENGINE = "text"  # nothing was transcribed
SESSION_PREFIX = "memory-"
OWNER = "owner"

_PARAGRAPH_BREAK = re.compile(r"\n\s*\n")
# A word with the whitespace after it; CJK full stops end a "word" too (no spaces there).
_TOKEN = re.compile(r"[^\s。！？]+[。！？]*\s*|[。！？]+\s*")
_SENTENCE_END = re.compile(r"[.!?…。！？][\"'”’»)\]]*$")


class InvalidMemoryError(ValueError):
    """A request the contract allows but this memory cannot take (a 422 naming `field`)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


@dataclass(frozen=True, slots=True)
class MemoryWritten:
    session_id: str
    path: Path
    segment_ids: list[str]
    spoken_at: datetime
    appended: bool  # to a session that already had a file


def new_session_id(now: datetime, token: str) -> str:
    """`memory-<UTC yyyymmddTHHMMSS>-<8 hex>`, in the wearable sessions' time format."""
    return f"{SESSION_PREFIX}{now.astimezone(UTC):%Y%m%dT%H%M%S}-{token}"


def default_speaker(owner_name: str | None) -> str:
    name = (owner_name or "").strip()
    # owner_name may be up to 200 characters; a segment's speaker at most 128.
    return name[:128] if name else OWNER


def split_text(text: str, max_chars: int = MAX_SEGMENT_CHARS) -> list[str]:
    """The text as turns: paragraphs (blank lines apart, whitespace inside collapsed); a
    paragraph over `max_chars` cut at sentence ends into pieces of even length, a sentence
    over `max_chars` at spaces. Never inside a word, so a longer word stays whole."""
    parts: list[str] = []
    for paragraph in _PARAGRAPH_BREAK.split(text):
        paragraph = " ".join(paragraph.split())
        if len(paragraph) <= max_chars:
            if paragraph:
                parts.append(paragraph)
            continue
        pieces: list[str] = []  # sentences (or the words of an overlong one), spaces kept
        sentence = ""
        for token in _TOKEN.findall(paragraph):
            sentence += token
            if _SENTENCE_END.search(token.rstrip()):
                pieces.extend(_words(sentence, max_chars))
                sentence = ""
        if sentence:
            pieces.extend(_words(sentence, max_chars))
        parts.extend(_pack(pieces, max_chars, len(paragraph)))
    return parts


def _words(sentence: str, max_chars: int) -> list[str]:
    return [sentence] if len(sentence.strip()) <= max_chars else _TOKEN.findall(sentence)


def _pack(pieces: list[str], max_chars: int, total: int) -> list[str]:
    """Consecutive pieces joined into chunks of at most `max_chars`, aiming at an even length
    (1,500 characters become two of about 750, not 1,000 and 500)."""
    count = math.ceil(total / max_chars)
    target = total / count
    chunks: list[str] = []
    current = ""
    for piece in pieces:
        joined = current + piece
        size, grown = len(current.strip()), len(joined.strip())
        # Before the last chunk, close one when the piece would overshoot the target by more
        # than the chunk falls short of it; the last takes the rest (up to the limit).
        uneven = len(chunks) < count - 1 and grown - target > target - size
        if current and (grown > max_chars or uneven):
            chunks.append(current.strip())
            current = piece
        else:
            current = joined
    if current.strip():
        chunks.append(current.strip())
    return chunks


def speaking_seconds(text: str) -> float:
    """How long saying `text` takes at `WORDS_PER_S` (never 0: text is never empty here)."""
    return max(len(text.split()), len(text) / CHARS_PER_WORD) / WORDS_PER_S


def segments_for(parts: list[str], speaker: str, start_s: float, prefix: str) -> list[Segment]:
    """Consecutive segments from `start_s` (seconds from the session's start)."""
    segments: list[Segment] = []
    start = round(start_s, 3)
    for i, said in enumerate(parts):
        end = round(start + speaking_seconds(said), 3)
        segments.append(
            Segment(
                segment_id=f"{prefix}-{i:03d}",
                speaker=speaker,
                text=said,
                start=start,
                end=end,
                language=None,
                stt_engine=STT_ENGINE,
                emotion=None,
            )
        )
        start = end
    return segments


def write_memory(
    transcripts_dir: Path,
    *,
    text: str,
    speaker: str,
    at: datetime | None,
    session_id: str | None,
    device_id: str,
) -> MemoryWritten:
    """Append the memory to its session's JSONL (blocking: run it in a thread). Raises
    InvalidMemoryError before anything is written."""
    if session_id is not None and session_id.startswith(REFLECTION_PREFIX):
        # The daily reflection replaces its session's file whole: a memory there is lost.
        raise InvalidMemoryError(
            "session_id", f"{REFLECTION_PREFIX}… sessions are the engine's daily reflections"
        )
    now = datetime.now(UTC)
    spoken_at = at or now
    token = secrets.token_hex(4)
    sid = session_id or new_session_id(now, token)
    path = stream_path(transcripts_dir, sid)
    existing = recorded_start(transcripts_dir, sid) if session_id else None
    started_at = spoken_at if existing is None else existing
    if spoken_at < started_at:
        raise InvalidMemoryError(
            "at",
            f"is before the start of session {sid} ({started_at.isoformat()}); "
            "a session's times are offsets from its start",
        )
    offset_s = (spoken_at - started_at).total_seconds()
    segments = segments_for(split_text(text), speaker, offset_s, f"m-{token}")
    payload = TranscriptPayload(
        session_id=sid,
        device_id=device_id,
        session_started_at=started_at,
        segments=segments,
    )
    append_records(transcripts_dir, sid, [payload])
    log.info("memory.added", session_id=sid, segments=len(segments), device_id=device_id,
             appended=existing is not None)  # fmt: skip
    return MemoryWritten(
        session_id=sid,
        path=path,
        segment_ids=[s.segment_id for s in segments],
        spoken_at=spoken_at,
        appended=existing is not None,
    )
