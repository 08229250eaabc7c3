"""Wearable clients: Omi-compatible webhooks.

- Realtime audio bytes (`POST /webhook/audio?sample_rate=16000&uid=…`, raw PCM16 mono): the
  chunks (a few seconds each) of one device (`uid`) are buffered into a stream; the stream's
  buffer goes to the fast path as one clip once it holds `wearable_clip_s`, or when no chunk
  came for `wearable_flush_after_s`. No chunk — or no speech found — for
  `wearable_session_gap_s` ends the device's session (optionally sweeping it); the next chunk
  starts a new one, named `{uid}-{UTC start}`.
- Realtime transcript (`POST /webhook/transcript?session_id=…&uid=…`, JSON segments the client
  transcribed itself): written to the session's JSONL as they are — same words, speakers and
  times; the wearer's own segments (`is_user`) get the configured wearer name.

This module holds the bookkeeping and the conversion; runtime.py does the I/O.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from audio_pipeline.audio import SAMPLE_RATE
from her_os_shared.transcript import (
    MAX_OFFSET_S,
    MAX_SEGMENTS_PER_PAYLOAD,
    Segment,
    recorded_start,
)

_SAFE = re.compile(r"[^A-Za-z0-9_-]")


@dataclass
class WearableStream:
    """One device's audio stream: the session it feeds and audio not yet transcribed."""

    uid: str
    session_id: str
    pending: list[np.ndarray] = field(default_factory=list)
    pending_s: float = 0.0
    chunks: int = 0
    last_chunk: float = field(default_factory=time.monotonic)

    def add(self, samples: np.ndarray) -> None:
        self.pending.append(samples)
        self.pending_s += len(samples) / SAMPLE_RATE
        self.chunks += 1
        self.last_chunk = time.monotonic()

    def take(self) -> np.ndarray | None:
        """The buffered audio as one array (and an empty buffer), or None when empty."""
        if not self.pending:
            return None
        samples = np.concatenate(self.pending)
        self.pending, self.pending_s = [], 0.0
        return samples


def wearable_session_id(uid: str, at: datetime) -> str:
    return f"{uid}-{at:%Y%m%dT%H%M%S}"


class OmiSegment(BaseModel):
    """One segment as Omi-style clients send it (unknown extra fields are ignored)."""

    model_config = ConfigDict(extra="ignore", allow_inf_nan=False)

    id: str | None = Field(default=None, max_length=128)
    text: str = Field(max_length=100_000)
    speaker: str | None = Field(default=None, max_length=128)
    speaker_id: int | None = Field(default=None, ge=0, le=10_000)
    is_user: bool = False
    person_id: str | None = Field(default=None, max_length=128)
    # Seconds from the session's start, within what the transcript contract holds.
    start: float = Field(ge=0, le=MAX_OFFSET_S)
    end: float = Field(ge=0, le=MAX_OFFSET_S)

    @field_validator("end")
    @classmethod
    def _finite(cls, v: float) -> float:
        if not math.isfinite(v):
            raise ValueError("must be finite")
        return v


class OmiTranscript(BaseModel):
    model_config = ConfigDict(extra="ignore")

    session_id: str | None = Field(default=None, max_length=128)
    segments: list[OmiSegment] = Field(max_length=MAX_SEGMENTS_PER_PAYLOAD)


def parse_transcript(body: Any) -> OmiTranscript:
    """Accept `{"session_id"?, "segments": [...]}` or a bare list of segments.
    Raises ValidationError (the route answers 422 with its locations)."""
    if isinstance(body, list):
        body = {"segments": body}
    return OmiTranscript.model_validate(body)


def _speaker(seg: OmiSegment, wearer: str) -> str:
    if seg.is_user:
        return wearer
    if seg.speaker:
        return seg.speaker
    return f"SPEAKER_{seg.speaker_id or 0:02d}"


def _segment_id(seg: OmiSegment) -> str:
    # The client's id when it has one, so a segment sent again (Omi resends growing
    # segments) overwrites its earlier version; else one derived from speaker and start.
    if seg.id:
        safe = _SAFE.sub("_", seg.id)[:120]
        return f"w-{safe}"
    return f"w-{seg.speaker_id or 0}-{round(seg.start * 1000)}"


def to_segments(transcript: OmiTranscript, *, wearer: str, engine: str) -> list[Segment]:
    """The client's segments as ours (empty text skipped; a repeated id keeps the last)."""
    out: dict[str, Segment] = {}
    for i, seg in enumerate(transcript.segments):
        if not seg.text.strip():
            continue
        if seg.end < seg.start:
            raise ValueError(f"segments[{i}]: end ({seg.end}) is before start ({seg.start})")
        sid = _segment_id(seg)
        out[sid] = Segment(
            segment_id=sid,
            speaker=_speaker(seg, wearer),
            text=seg.text.strip(),
            start=round(seg.start, 3),
            end=round(seg.end, 3),
            stt_engine=engine,
        )
    return list(out.values())


def session_started_at(transcripts_dir: Path, session_id: str, first_start_s: float) -> datetime:
    """When the session began: from its transcript file if it has one, else now minus the
    first segment's offset (its times are seconds from the session's start)."""
    started = recorded_start(transcripts_dir, session_id)
    return started or datetime.now(UTC) - timedelta(seconds=first_start_s)
