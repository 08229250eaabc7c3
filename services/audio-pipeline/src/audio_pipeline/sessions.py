"""Live sessions: each session's clock (audio seconds so far), its speakers, its clips, its
audio (kept for the sweep), its transcript so far and the state of its sweep.

A session's segments are timed from its first clip: a clip's segments are shifted by the
audio already received, so successive clips line up. Speakers keep their session-stable ids
across clips (SessionSpeakers). Idle sessions are dropped after `session_idle_s`.

Two locks per session: `state_lock` guards the counters and the audio buffer and is held only
for moments (the event loop takes it); `work_lock` serialises inference on the session (fast
path clips and sweep chunks both change the session's speakers).
"""

from __future__ import annotations

import bisect
import threading
import time
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import numpy as np

from audio_pipeline.audio import SAMPLE_RATE
from audio_pipeline.speakers.enrollment import EnrollmentBank, SessionSpeakers
from her_os_shared.logging import get_logger
from her_os_shared.transcript import Segment

log = get_logger(__name__)

SweepState = Literal["queued", "running", "done", "failed"]


class SessionAudio:
    """A session's audio as 16 kHz PCM16: the newest part in memory, the rest spilled to a
    spool file once memory holds more than `memory_s` seconds. Audio past `max_s` is not
    kept (it is still transcribed; only a sweep cannot revisit it)."""

    def __init__(self, spool_dir: Path, session_id: str, memory_s: float, max_s: float) -> None:
        self._path = spool_dir / f"{session_id}-{uuid.uuid4().hex[:12]}.pcm"
        self._memory_limit = round(memory_s * SAMPLE_RATE)
        self._max = round(max_s * SAMPLE_RATE)
        self._chunks: list[np.ndarray] = []
        self._in_memory = 0
        self._on_disk = 0
        self.dropped_s = 0.0
        self._lock = threading.Lock()
        self._closed = False

    @property
    def kept_s(self) -> float:
        return (self._on_disk + self._in_memory) / SAMPLE_RATE

    @property
    def spilled(self) -> bool:
        return self._on_disk > 0

    def append(self, samples: np.ndarray) -> None:
        with self._lock:
            if self._closed:
                return
            room = self._max - self._on_disk - self._in_memory
            if len(samples) > room:
                self.dropped_s += (len(samples) - max(room, 0)) / SAMPLE_RATE
                samples = samples[: max(room, 0)]
            if not len(samples):
                return
            pcm = (np.clip(samples, -1.0, 1.0) * 32767.0).astype("<i2")
            self._chunks.append(pcm)
            self._in_memory += len(pcm)
            if self._in_memory > self._memory_limit:
                self._spill()

    def _spill(self) -> None:
        self._path.parent.mkdir(parents=True, exist_ok=True)
        with self._path.open("ab") as f:
            for chunk in self._chunks:
                f.write(chunk.tobytes())
        self._on_disk += self._in_memory
        self._chunks, self._in_memory = [], 0

    def read(self, start_s: float, end_s: float) -> np.ndarray:
        """Float32 samples between two session times (clamped to what is kept)."""
        with self._lock:
            total = self._on_disk + self._in_memory
            a = max(0, min(total, round(start_s * SAMPLE_RATE)))
            b = max(a, min(total, round(end_s * SAMPLE_RATE)))
            parts: list[np.ndarray] = []
            if a < self._on_disk:
                n = min(b, self._on_disk) - a
                with self._path.open("rb") as f:
                    f.seek(a * 2)
                    parts.append(np.frombuffer(f.read(n * 2), dtype="<i2"))
            if b > self._on_disk and self._chunks:
                memory = np.concatenate(self._chunks)
                parts.append(memory[max(0, a - self._on_disk) : b - self._on_disk])
        if not parts:
            return np.zeros(0, dtype=np.float32)
        return (np.concatenate(parts).astype(np.float32) / 32768.0).astype(np.float32)

    def close(self) -> None:
        """Forget the audio and delete the spool file."""
        with self._lock:
            self._closed = True
            self._chunks, self._in_memory, self._on_disk = [], 0, 0
            self._path.unlink(missing_ok=True)


class SessionTranscript:
    """The segments a live session has written, read the way the context engine reads its
    JSONL: the latest version of each segment id wins (a pinned one over an unpinned one),
    and a sweep segment replaces the non-pinned fast-path segments it overlaps in time.
    `POST /v1/session/{id}/end` answers with it (the design's "accumulated segments")."""

    def __init__(self) -> None:
        self._fast: dict[str, Segment] = {}
        self._swept: dict[str, Segment] = {}
        self._lock = threading.Lock()

    def add(self, segments: list[Segment], *, is_sweep: bool) -> None:
        with self._lock:
            target = self._swept if is_sweep else self._fast
            for seg in segments:
                old = target.get(seg.segment_id)
                if old is None or seg.pinned or not old.pinned:
                    target[seg.segment_id] = seg

    def correct(self, seg: Segment) -> None:
        """A user's correction (pinned) of a segment this session wrote."""
        with self._lock:
            for target in (self._fast, self._swept):
                if seg.segment_id in target:
                    target[seg.segment_id] = seg

    def segments(self) -> list[Segment]:
        """The session's transcript in time order."""
        with self._lock:
            swept, fast = list(self._swept.values()), list(self._fast.values())
        covered = _merged((s.start, s.end) for s in swept)
        starts = [a for a, _ in covered]
        kept = [s for s in fast if s.pinned or not _overlaps(covered, starts, s.start, s.end)]
        return sorted(swept + kept, key=lambda s: (s.start, s.end, s.segment_id))

    def __len__(self) -> int:
        with self._lock:
            return len(self._fast) + len(self._swept)


def _merged(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _overlaps(
    covered: list[tuple[float, float]], starts: list[float], start: float, end: float
) -> bool:
    """Whether (start, end) overlaps the disjoint, sorted `covered` spans by more than zero
    (the context engine's rule). Only the last span starting before `end` can: the spans and
    their ends both ascend."""
    i = bisect.bisect_left(starts, end)
    if i == 0:
        return False
    a, b = covered[i - 1]
    return min(end, b) - max(start, a) > 0


@dataclass
class SweepStatus:
    sweep: int  # 1, 2, … per session
    state: SweepState
    from_s: float
    to_s: float
    chunks_done: int = 0
    chunks_total: int = 0
    segments: int = 0
    skipped_pinned: int = 0
    done_to_s: float = 0.0  # swept (and written) up to here
    seconds: float | None = None
    error: str | None = None

    def summary(self) -> dict[str, Any]:
        return {
            "sweep": self.sweep,
            "state": self.state,
            "from_s": round(self.from_s, 3),
            "to_s": round(self.to_s, 3),
            "chunks_done": self.chunks_done,
            "chunks_total": self.chunks_total,
            "segments": self.segments,
            "skipped_pinned": self.skipped_pinned,
            "done_to_s": round(self.done_to_s, 3),
            "seconds": self.seconds,
            "error": self.error,
        }


@dataclass
class LiveSession:
    session_id: str
    device_id: str
    started_at: datetime
    speakers: SessionSpeakers
    audio: SessionAudio
    offset_s: float = 0.0  # audio received so far, seconds
    clips: int = 0
    segments: int = 0
    deferred: int = 0  # clips waiting for a sweep to finish
    in_flight: int = 0  # clips queued or running on the fast path
    last_speech_s: float = 0.0  # session time where the latest speech found so far ends
    swept_to_s: float = 0.0  # audio up to here has been (or is being) swept
    sweep: SweepStatus | None = None
    ended: bool = False
    transcript: SessionTranscript = field(default_factory=SessionTranscript)
    # `last_seen` when the latest automatic sweep was queued: one per pause, never a retry
    # loop on a sweep that failed.
    idle_swept_at: float | None = None
    last_seen: float = field(default_factory=time.monotonic)
    state_lock: threading.Lock = field(default_factory=threading.Lock)
    work_lock: threading.Lock = field(default_factory=threading.Lock)

    def receive(self, samples: np.ndarray) -> tuple[int, float]:
        """Account for a new clip: keep its audio; return its index and session offset."""
        with self.state_lock:
            index, offset = self.clips, self.offset_s
            self.clips += 1
            self.offset_s += len(samples) / SAMPLE_RATE
            self.last_seen = time.monotonic()
        self.audio.append(samples)
        return index, offset

    @property
    def settled(self) -> bool:
        """Every clip received so far has been transcribed."""
        return self.in_flight == 0 and self.deferred == 0

    @property
    def sweeping(self) -> bool:
        return self.sweep is not None and self.sweep.state in ("queued", "running")

    @property
    def unswept_speech(self) -> bool:
        """Speech may lie in the audio not swept yet (found there, or clips still pending)."""
        return self.last_speech_s > self.swept_to_s or not self.settled

    def idle_sweep_due(self, now: float, idle_s: float) -> bool:
        """The talk paused for `idle_s` with its newest speech transcribed but not swept."""
        return (
            not self.ended
            and not self.sweeping
            and self.settled
            and self.last_speech_s > self.swept_to_s
            and now - self.last_seen >= idle_s
            and self.idle_swept_at != self.last_seen
        )

    def summary(self) -> dict[str, object]:
        return {
            "session_id": self.session_id,
            "device_id": self.device_id,
            "started_at": self.started_at,
            "audio_s": round(self.offset_s, 3),
            "clips": self.clips,
            # Segments written (fast path and sweeps): a count. `segments` is the list, in the
            # answer of the session's end (the design's "all accumulated segments").
            "segments_count": self.segments,
            "deferred_clips": self.deferred,
            "clips_in_flight": self.in_flight,
            "speakers": self.speakers.unknowns(),
            "audio_kept_s": round(self.audio.kept_s, 3),
            "audio_spilled": self.audio.spilled,
            "swept_to_s": round(self.swept_to_s, 3),
            "sweep": None if self.sweep is None else self.sweep.summary(),
        }


class SessionRegistry:
    def __init__(
        self,
        bank: EnrollmentBank,
        idle_s: float,
        *,
        spool_dir: Path,
        memory_s: float = 300.0,
        max_audio_s: float = 4 * 3600.0,
    ) -> None:
        self.bank = bank
        self.idle_s = idle_s
        self.spool_dir = spool_dir
        self.memory_s = memory_s
        self.max_audio_s = max_audio_s
        self._sessions: dict[str, LiveSession] = {}
        self._lock = threading.Lock()
        self._clear_spool()

    def _clear_spool(self) -> None:
        # Spool files belong to live sessions, which do not survive a restart.
        if self.spool_dir.is_dir():
            for stale in self.spool_dir.glob("*.pcm"):
                stale.unlink(missing_ok=True)
                log.info("spool.removed_stale", file=stale.name)

    def open(self, session_id: str, device_id: str) -> LiveSession:
        with self._lock:
            live = self._sessions.get(session_id)
            if live is None:
                audio = SessionAudio(self.spool_dir, session_id, self.memory_s, self.max_audio_s)
                live = LiveSession(session_id, device_id, datetime.now(UTC),
                                   SessionSpeakers(self.bank), audio)  # fmt: skip
                self._sessions[session_id] = live
            live.last_seen = time.monotonic()
            return live

    def get(self, session_id: str) -> LiveSession | None:
        with self._lock:
            return self._sessions.get(session_id)

    def all(self) -> list[LiveSession]:
        with self._lock:
            return list(self._sessions.values())

    def end(self, session_id: str) -> LiveSession | None:
        """Remove a session. Its audio is freed now, or by its sweep when one is under way."""
        with self._lock:
            live = self._sessions.pop(session_id, None)
        if live is not None:
            live.ended = True
            if not live.sweeping:
                live.audio.close()
        return live

    def cleanup(self, now: float | None = None) -> list[str]:
        """Drop sessions idle for longer than `idle_s` (not while sweeping); returns their ids."""
        now = time.monotonic() if now is None else now
        with self._lock:
            stale = [
                sid
                for sid, s in self._sessions.items()
                if now - s.last_seen > self.idle_s and not s.sweeping
            ]
        for sid in stale:
            self.end(sid)
        return stale

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
