"""Live sessions: each session's clock (audio seconds so far), its speakers and its clips.

A session's segments are timed from its first clip: a clip's segments are shifted by the
audio already received, so successive clips line up. Speakers keep their session-stable ids
across clips (SessionSpeakers). Idle sessions are dropped after `session_idle_s`.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from audio_pipeline.speakers.enrollment import EnrollmentBank, SessionSpeakers


@dataclass
class LiveSession:
    session_id: str
    device_id: str
    started_at: datetime
    speakers: SessionSpeakers
    offset_s: float = 0.0  # audio received so far, seconds
    clips: int = 0
    segments: int = 0
    last_seen: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)  # one clip at a time

    def summary(self) -> dict[str, object]:
        return {
            "session_id": self.session_id,
            "device_id": self.device_id,
            "started_at": self.started_at,
            "audio_s": round(self.offset_s, 3),
            "clips": self.clips,
            "segments": self.segments,
            "speakers": self.speakers.unknowns(),
        }


class SessionRegistry:
    def __init__(self, bank: EnrollmentBank, idle_s: float) -> None:
        self.bank = bank
        self.idle_s = idle_s
        self._sessions: dict[str, LiveSession] = {}
        self._lock = threading.Lock()

    def open(self, session_id: str, device_id: str) -> LiveSession:
        with self._lock:
            live = self._sessions.get(session_id)
            if live is None:
                live = LiveSession(session_id, device_id, datetime.now(UTC),
                                   SessionSpeakers(self.bank))  # fmt: skip
                self._sessions[session_id] = live
            live.last_seen = time.monotonic()
            return live

    def get(self, session_id: str) -> LiveSession | None:
        with self._lock:
            return self._sessions.get(session_id)

    def end(self, session_id: str) -> LiveSession | None:
        with self._lock:
            return self._sessions.pop(session_id, None)

    def cleanup(self, now: float | None = None) -> list[str]:
        """Drop sessions idle for longer than `idle_s`; returns their ids."""
        now = time.monotonic() if now is None else now
        with self._lock:
            stale = [sid for sid, s in self._sessions.items() if now - s.last_seen > self.idle_s]
            for sid in stale:
                del self._sessions[sid]
        return stale

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)
