"""The pipeline's running parts: models (loaded in the background at start), the enrollment
bank, live sessions, the worker pools, and the writers of transcripts and events.

Inference runs in single-worker pools, off the event loop: `fast` (per clip), `sweep` and
`feedback` (their endpoints build on these), so a long job never blocks the API and two clips
never compete for the CPU/GPU at once.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import numpy as np

from audio_pipeline.audio import AudioClip
from audio_pipeline.backends import BackendUnavailableError
from audio_pipeline.config import Settings
from audio_pipeline.pipeline import ClipResult, Models, transcribe_clip
from audio_pipeline.sessions import LiveSession, SessionRegistry
from audio_pipeline.speakers.enrollment import EnrollmentBank, check_person
from her_os_shared.events import ObservabilityEvent
from her_os_shared.jsonl import JsonlReader, append_records, stream_path
from her_os_shared.logging import get_logger
from her_os_shared.transcript import Emotion, Segment, TranscriptPayload

log = get_logger(__name__)


class AudioRuntime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.models = Models.from_settings(settings)
        self.bank = EnrollmentBank.from_settings(settings)
        self.sessions = SessionRegistry(self.bank, settings.session_idle_s)
        self.fast = ThreadPoolExecutor(1, thread_name_prefix="fast")
        self.sweep = ThreadPoolExecutor(1, thread_name_prefix="sweep")
        self.feedback_pool = ThreadPoolExecutor(1, thread_name_prefix="feedback")
        self.ready = asyncio.Event()
        self.load_error: str | None = None
        self.warmup_s: float | None = None
        self._loader: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._loader = asyncio.create_task(self._load(), name="load-models")

    async def _load(self) -> None:
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            await loop.run_in_executor(self.fast, self.models.load)
        except BackendUnavailableError as exc:
            # Misconfigured production backend: say which setting, stay up, report unavailable.
            self.load_error = str(exc)
            log.error("models.unavailable", reason=str(exc))
            return
        self.warmup_s = round(loop.time() - started, 3)
        self.ready.set()
        log.info("models.loaded", seconds=self.warmup_s)

    async def stop(self) -> None:
        if self._loader is not None:
            self._loader.cancel()
            await asyncio.gather(self._loader, return_exceptions=True)
        for pool in (self.fast, self.sweep, self.feedback_pool):
            pool.shutdown(wait=False, cancel_futures=True)

    def status(self) -> dict[str, Any]:
        s = self.settings
        persons = self.bank.list()
        return {
            "ready": self.ready.is_set(),
            "warmup_s": self.warmup_s,
            "load_error": self.load_error,
            "backends": {
                "stt": s.stt_backend,
                "vad": s.vad_backend,
                "diarization": s.diarization_backend,
                "emotion": s.emotion_backend,
            },
            "enrollment": {
                "persons": len(persons),
                "styles": sum(len(p.styles) for p in persons),
            },
            "live_sessions": len(self.sessions),
        }

    async def transcribe(
        self, clip: AudioClip, *, session_id: str, device_id: str, ser_all_speakers: bool
    ) -> tuple[LiveSession, ClipResult, int]:
        live = self.sessions.open(session_id, device_id)
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.fast, self._fast_path, live, clip, ser_all_speakers)

    def _fast_path(
        self, live: LiveSession, clip: AudioClip, ser_all_speakers: bool
    ) -> tuple[LiveSession, ClipResult, int]:
        with live.lock:
            index = live.clips
            result = transcribe_clip(
                self.models,
                clip,
                speakers=live.speakers,
                offset_s=live.offset_s,
                id_prefix=f"c{index:04d}",
                ser_all_speakers=ser_all_speakers,
            )
            if result.segments:
                payload = TranscriptPayload(
                    session_id=live.session_id,
                    device_id=live.device_id,
                    session_started_at=live.started_at,
                    segments=result.segments,
                )
                append_records(self.settings.transcripts_dir, live.session_id, [payload])
            live.offset_s += clip.duration_s
            live.clips += 1
            live.segments += len(result.segments)
        self._events(live, clip, result)
        return live, result, index

    async def enroll(self, clip: AudioClip, person: str, style: str | None) -> dict[str, Any]:
        """Enroll `person` from a clip of them speaking (their speech only, found by VAD)."""
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self.feedback_pool, self._enroll, clip, person, style)

    def _enroll(self, clip: AudioClip, person: str, style: str | None) -> dict[str, Any]:
        regions = self.models.vad.regions(clip)
        speech = [clip.slice(a, b).samples for a, b in regions]
        speech_s = sum(len(x) for x in speech) / clip.sample_rate
        if speech_s < self.models.embedder.min_duration_s:
            raise ValueError(
                f"only {speech_s:.2f} s of speech found; enrolling needs at least "
                f"{self.models.embedder.min_duration_s:.2f} s of the person speaking"
            )
        joined = np.concatenate(speech)[: 30 * clip.sample_rate]
        embedding = self.models.embedder.embed(joined, clip.sample_rate)
        style_id = self.bank.enroll(person, embedding, style=style)
        return {"person": person.strip(), "style_id": style_id, "speech_s": round(speech_s, 3)}

    async def feedback(
        self, session_id: str, segment_id: str, speaker: str | None, emotion: Emotion | None
    ) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(
            self.feedback_pool, self._feedback, session_id, segment_id, speaker, emotion
        )

    def _feedback(
        self, session_id: str, segment_id: str, speaker: str | None, emotion: Emotion | None
    ) -> dict[str, Any]:
        """Rewrite one segment with the user's correction, pinned (a sweep never replaces it).
        Naming an unknown voice of a live session also enrolls it, so later sessions know it."""
        path = stream_path(self.settings.transcripts_dir, session_id)
        if not path.is_file():
            raise LookupError(f"no transcript for session {session_id}")
        found: tuple[TranscriptPayload, Segment] | None = None
        for rec in JsonlReader(path, TranscriptPayload):
            for seg in rec.value.segments:
                if seg.segment_id == segment_id and (
                    found is None or not found[1].pinned or seg.pinned
                ):
                    found = (rec.value, seg)
        if found is None:
            raise LookupError(f"no segment {segment_id} in session {session_id}")
        payload, seg = found
        enrolled_style = None
        if speaker is not None and speaker != seg.speaker:
            check_person(speaker)
            live = self.sessions.get(session_id)
            if live is not None and seg.speaker in live.speakers.unknowns():
                enrolled_style = live.speakers.name(seg.speaker, speaker)
        updates: dict[str, Any] = {"pinned": True}
        if speaker is not None:
            updates["speaker"] = speaker.strip()
        if emotion is not None:
            updates["emotion"] = emotion
        corrected = seg.model_copy(update=updates)
        line = TranscriptPayload(
            session_id=session_id,
            device_id=payload.device_id,
            session_started_at=payload.session_started_at,
            segments=[Segment.model_validate(corrected.model_dump())],
        )
        append_records(self.settings.transcripts_dir, session_id, [line])
        return {
            "segment": corrected.model_dump(mode="json"),
            "enrolled_style": enrolled_style,
        }

    def _events(self, live: LiveSession, clip: AudioClip, result: ClipResult) -> None:
        t = result.timings_s
        audio_s = max(clip.duration_s, 1e-9)
        sid = live.session_id
        events = [
            ObservabilityEvent.for_creature(
                "seahorse", "complete", session_id=sid,
                data={"regions": len(result.regions), "seconds": round(t.get("vad", 0), 3)},
            ),
            ObservabilityEvent.for_creature(
                "jellyfish", "complete", session_id=sid,
                data={"segments": len(result.segments), "audio_s": round(clip.duration_s, 3),
                      "rtf": round(t.get("total", 0) / audio_s, 3)},
            ),
        ]  # fmt: skip
        if result.regions:
            known = sum(1 for i in result.speakers.values() if i.person is not None)
            events += [
                ObservabilityEvent.for_creature(
                    "cerberus", "complete", session_id=sid,
                    data={"speakers": len(result.speakers),
                          "seconds": round(t.get("diarization", 0), 3)},
                ),
                ObservabilityEvent.for_creature(
                    "siren", "complete", session_id=sid,
                    data={"known": known, "unknown": len(result.speakers) - known},
                ),
                ObservabilityEvent.for_creature(
                    "dolphin", "complete", session_id=sid,
                    data={"labelled": sum(1 for s in result.segments if s.emotion)},
                ),
            ]  # fmt: skip
        try:
            # Hourly files: the atomic writer copies the file on every append, so a stream
            # must stay small (a day of clips in one file would make each append O(day)).
            stream = f"audio-pipeline-{datetime.now(UTC):%Y%m%d%H}"
            append_records(self.settings.events_dir, stream, events)
        except OSError as exc:  # events are best effort: never fail a transcription for them
            log.warning("events.dropped", error=repr(exc)[:300])
