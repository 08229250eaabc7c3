"""The pipeline's running parts: models (loaded in the background at start), the enrollment
bank, live sessions, wearable streams, the worker pools, and the writers of transcripts and
events.

Inference runs in three single-worker pools, off the event loop: `fast` (per clip), `sweep`
(whole sessions) and `feedback` (enrollment and corrections), so a long job never blocks the
API and two clips never compete for the CPU/GPU at once. The contention guard: while a sweep
is queued or running, new clips are kept (their audio and their place on the session's clock)
but their STT is deferred; they answer `sweep_active: true` and are transcribed, in order,
when the last sweep ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from audio_pipeline.audio import AudioClip, pcm16_to_clip
from audio_pipeline.backends import BackendUnavailableError
from audio_pipeline.config import Settings
from audio_pipeline.emotion import emotion_status
from audio_pipeline.pipeline import ClipResult, Models, transcribe_clip
from audio_pipeline.sessions import LiveSession, SessionRegistry, SweepStatus
from audio_pipeline.speakers.enrollment import EnrollmentBank, check_person
from audio_pipeline.sweep import SweepPlan, chunk_count, run_sweep
from audio_pipeline.wearable import (
    OmiTranscript,
    WearableStream,
    session_started_at,
    to_segments,
    wearable_session_id,
)
from her_os_shared.creatures import CreatureName
from her_os_shared.events import ObservabilityEvent
from her_os_shared.idempotency import Idempotency
from her_os_shared.idempotency_sqlite import SqliteIdempotencyStore
from her_os_shared.jsonl import JsonlReader, append_records, stream_path
from her_os_shared.logging import get_logger
from her_os_shared.transcript import Emotion, Segment, TranscriptPayload

log = get_logger(__name__)

# Housekeeping (wearable flushes, idle sessions) runs this often.
TICK_S = 1.0


class SweepConflictError(RuntimeError):
    """A sweep cannot start now (one is under way, or there is no new audio)."""


@dataclass(frozen=True, slots=True)
class ClipOutcome:
    live: LiveSession
    index: int
    offset_s: float
    duration_s: float
    result: ClipResult | None  # None: deferred (a sweep is active) or not awaited


@dataclass(slots=True)
class _Deferred:
    live: LiveSession
    clip: AudioClip
    index: int
    offset_s: float
    ser_all_speakers: bool


class AudioRuntime:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.models = Models.from_settings(settings)
        self.bank = EnrollmentBank.from_settings(settings)
        self.sessions = SessionRegistry(
            self.bank,
            settings.session_idle_s,
            spool_dir=settings.spool_dir,
            memory_s=settings.session_memory_s,
            max_audio_s=settings.session_max_audio_s,
        )
        # Webhook batches re-sent with the same Idempotency-Key are stored once.
        self.idempotency = Idempotency(
            SqliteIdempotencyStore(settings.idempotency_file),
            window_s=settings.idempotency_window_s,
        )
        self.fast = ThreadPoolExecutor(1, thread_name_prefix="fast")
        self.sweep_pool = ThreadPoolExecutor(1, thread_name_prefix="sweep")
        self.feedback_pool = ThreadPoolExecutor(1, thread_name_prefix="feedback")
        self.ready = asyncio.Event()
        self.load_error: str | None = None
        self.warmup_s: float | None = None
        self._loader: asyncio.Task[None] | None = None
        self._housekeeper: asyncio.Task[None] | None = None
        self._sweeps_active = 0
        self._deferred: list[_Deferred] = []
        self._tasks: set[asyncio.Future[Any]] = set()
        self.streams: dict[str, WearableStream] = {}
        self._last_cleanup = time.monotonic()
        self._stopping = False
        self._ser_probe: asyncio.Future[Any] | None = None

    @property
    def sweep_active(self) -> bool:
        return self._sweeps_active > 0

    async def start(self) -> None:
        self._loader = asyncio.create_task(self._load(), name="load-models")
        self._housekeeper = asyncio.create_task(self._housekeeping(), name="housekeeping")

    def _spawn(self, work: Any, name: str) -> asyncio.Future[Any]:
        """Run a coroutine (or watch a future) in the background: keep a reference (the loop
        holds tasks weakly) and log a failure nobody awaits."""
        task = (
            asyncio.create_task(work, name=name)
            if asyncio.iscoroutine(work)
            else asyncio.ensure_future(work)
        )
        self._tasks.add(task)

        def done(t: asyncio.Future[Any]) -> None:
            self._tasks.discard(t)
            if not t.cancelled() and t.exception() is not None:
                log.error("task.failed", task=name, error=repr(t.exception())[:500])

        task.add_done_callback(done)
        return task

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
        self._stopping = True
        tasks = [t for t in (self._loader, self._housekeeper, *self._tasks) if t is not None]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for pool in (self.fast, self.sweep_pool, self.feedback_pool):
            pool.shutdown(wait=False, cancel_futures=True)
        for live in self.sessions.all():
            live.audio.close()
        close = getattr(self.models.emotion, "close", None)  # the sidecar backend's client
        if close is not None:
            close()

    def degraded(self) -> tuple[str, ...]:
        """Layers served without right now, for /health: "emotion" while a configured SER
        sidecar is known not to classify (segments are written without emotion meanwhile)."""
        return ("emotion",) if getattr(self.models.emotion, "degraded", False) else ()

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
            "sweep_active": self.sweep_active,
            "deferred_clips": len(self._deferred),
            "wearable_streams": len(self.streams),
            # Where speech emotion runs: in process, or the SER sidecar (reachable or not,
            # its classifier).
            "ser": emotion_status(self.models.emotion),
        }

    async def transcribe(
        self,
        clip: AudioClip,
        *,
        session_id: str,
        device_id: str,
        ser_all_speakers: bool = True,
        wait: bool = True,
    ) -> ClipOutcome:
        """Take a clip of a session: keep its audio and place it on the session's clock, then
        run the fast path (awaited when `wait`), or defer it while a sweep is active."""
        live = self.sessions.open(session_id, device_id)
        return await self._submit(live, clip, ser_all_speakers=ser_all_speakers, wait=wait)

    async def _submit(
        self, live: LiveSession, clip: AudioClip, *, ser_all_speakers: bool, wait: bool
    ) -> ClipOutcome:
        index, offset = live.receive(clip.samples)
        if self.sweep_active:
            with live.state_lock:
                live.deferred += 1
            self._deferred.append(_Deferred(live, clip, index, offset, ser_all_speakers))
            return ClipOutcome(live, index, offset, clip.duration_s, None)
        loop = asyncio.get_running_loop()
        with live.state_lock:
            live.in_flight += 1
        future = loop.run_in_executor(
            self.fast, self._fast_path, live, clip, index, offset, ser_all_speakers, True
        )
        if not wait:
            self._spawn(future, f"clip-{live.session_id}-{index}")
            return ClipOutcome(live, index, offset, clip.duration_s, None)
        return ClipOutcome(live, index, offset, clip.duration_s, await future)

    def _fast_path(
        self,
        live: LiveSession,
        clip: AudioClip,
        index: int,
        offset: float,
        ser_all_speakers: bool,
        counted: bool = False,
    ) -> ClipResult:
        try:
            return self._transcribe_clip(live, clip, index, offset, ser_all_speakers)
        finally:
            if counted:
                with live.state_lock:
                    live.in_flight -= 1

    def _transcribe_clip(
        self,
        live: LiveSession,
        clip: AudioClip,
        index: int,
        offset: float,
        ser_all_speakers: bool,
    ) -> ClipResult:
        with live.work_lock:
            result = transcribe_clip(
                self.models,
                clip,
                speakers=live.speakers,
                offset_s=offset,
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
                live.transcript.add(result.segments, is_sweep=False)
            with live.state_lock:
                live.segments += len(result.segments)
                if result.regions:
                    live.last_speech_s = max(live.last_speech_s, offset + result.regions[-1][1])
        self._events(live, clip, result)
        return result

    def _flush_deferred(self) -> None:
        """Send the clips kept during sweeps to the fast path, in arrival order."""
        waiting, self._deferred = self._deferred, []
        loop = asyncio.get_running_loop()
        for d in waiting:

            def run(d: _Deferred = d) -> ClipResult:
                try:
                    return self._fast_path(d.live, d.clip, d.index, d.offset_s, d.ser_all_speakers)
                finally:
                    with d.live.state_lock:
                        d.live.deferred -= 1

            self._spawn(loop.run_in_executor(self.fast, run), f"deferred-{d.live.session_id}")

    # --- sweep -------------------------------------------------------------------------

    def start_sweep(self, session_id: str) -> SweepStatus:
        """Queue a sweep of the session's audio received since its last sweep."""
        live = self.sessions.get(session_id)
        if live is None:
            raise LookupError(f"no live session {session_id}")
        if live.sweeping:
            raise SweepConflictError(f"a sweep of session {session_id} is already under way")
        to_s = min(live.offset_s, live.audio.kept_s)
        if to_s - live.swept_to_s < 0.5:
            raise SweepConflictError(
                f"nothing new to sweep: session {session_id} is swept up to "
                f"{live.swept_to_s:.1f} s of {live.offset_s:.1f} s"
            )
        number = 1 if live.sweep is None else live.sweep.sweep + 1
        status = SweepStatus(number, "queued", live.swept_to_s, to_s)
        status.chunks_total = chunk_count(to_s - live.swept_to_s, self._plan)
        live.sweep, live.swept_to_s = status, to_s
        self._sweeps_active += 1
        self._spawn(self._sweep(live, status), f"sweep-{session_id}-{number}")
        return status

    @property
    def _plan(self) -> SweepPlan:
        return SweepPlan(self.settings.sweep_chunk_s, self.settings.sweep_overlap_s)

    async def _sweep(self, live: LiveSession, status: SweepStatus) -> None:
        loop = asyncio.get_running_loop()
        sid = live.session_id
        try:
            # Clips queued before the sweep finish first: the two never share the GPU.
            await loop.run_in_executor(self.fast, lambda: None)
            status.state = "running"
            self._emit([ObservabilityEvent.for_creature(
                CreatureName.STINGRAY, "start", session_id=sid,
                data={"sweep": status.sweep, "from_s": status.from_s, "to_s": status.to_s},
            )])  # fmt: skip
            await loop.run_in_executor(
                self.sweep_pool,
                run_sweep, self.models, live, status, self._plan, self.settings.transcripts_dir,
            )  # fmt: skip
            status.state = "done"
            with live.state_lock:
                live.segments += status.segments
            self._emit([ObservabilityEvent.for_creature(
                CreatureName.STINGRAY, "complete", session_id=sid,
                data={"sweep": status.sweep, "segments": status.segments,
                      "skipped_pinned": status.skipped_pinned, "seconds": status.seconds,
                      "audio_s": round(status.to_s - status.from_s, 3)},
            )])  # fmt: skip
            log.info("sweep.done", session_id=sid, **status.summary())
        except Exception as exc:
            status.state, status.error = "failed", repr(exc)[:500]
            # What was written stays; a new sweep resumes after it.
            live.swept_to_s = status.done_to_s
            self._emit([ObservabilityEvent.for_creature(
                CreatureName.STINGRAY, "error", session_id=sid,
                data={"sweep": status.sweep, "error": status.error},
            )])  # fmt: skip
            log.error("sweep.failed", session_id=sid, error=status.error)
        finally:
            self._sweeps_active -= 1
            if live.ended:
                live.audio.close()
            if not self._sweeps_active and not self._stopping:
                self._flush_deferred()

    def end_session(
        self, session_id: str, *, sweep: bool | None = None
    ) -> tuple[LiveSession, SweepStatus | None]:
        """End a live session, first queueing a sweep of its unswept audio when asked, or, by
        default (`sweep=None`), when automatic sweeps are on and that audio may hold speech."""
        live = self.sessions.get(session_id)
        if live is None:
            raise LookupError(f"no live session {session_id}")
        if sweep is None:
            sweep = self.settings.sweep_auto and live.unswept_speech
        status = None
        if sweep:
            with contextlib.suppress(SweepConflictError):  # already sweeping, or nothing new
                status = self.start_sweep(session_id)
        self.sessions.end(session_id)
        return live, status

    # --- wearables ---------------------------------------------------------------------

    async def wearable_chunk(self, uid: str, sample_rate: int, data: bytes) -> dict[str, Any]:
        """Buffer one chunk of a wearable's raw PCM16 stream (see wearable.py)."""
        clip = pcm16_to_clip(data, sample_rate, max_seconds=self.settings.max_audio_seconds)
        stream = self.streams.get(uid)
        if stream is not None and self._stream_gap(stream):
            await self._close_stream(stream, reason="gap")
            stream = None
        if stream is None:
            stream = WearableStream(uid, wearable_session_id(uid, datetime.now(UTC)))
            self.streams[uid] = stream
            self.sessions.open(stream.session_id, uid)
            self._emit([ObservabilityEvent.for_creature(
                CreatureName.JELLYFISH, "start", session_id=stream.session_id,
                data={"uid": uid, "sample_rate": sample_rate},
            )])  # fmt: skip
        stream.add(clip.samples)
        queued = False
        if stream.pending_s >= self.settings.wearable_clip_s:
            queued = await self._flush_stream(stream)
        live = self.sessions.get(stream.session_id)
        return {
            "session_id": stream.session_id,
            "chunk_s": round(clip.duration_s, 3),
            "buffered_s": round(stream.pending_s, 3),
            "session_audio_s": round(live.offset_s if live else 0.0, 3),
            "queued_clip": queued,
            "sweep_active": self.sweep_active,
        }

    def _stream_gap(self, stream: WearableStream) -> bool:
        gap = self.settings.wearable_session_gap_s
        if time.monotonic() - stream.last_chunk >= gap:
            return True
        live = self.sessions.get(stream.session_id)
        # Transcribed audio with no speech for `gap` seconds: the conversation is over
        # (judged only once every clip is transcribed, or processing lag would look silent).
        return live is not None and live.settled and live.offset_s - live.last_speech_s >= gap

    async def _flush_stream(self, stream: WearableStream) -> bool:
        samples = stream.take()
        if samples is None:
            return False
        live = self.sessions.open(stream.session_id, stream.uid)
        await self._submit(live, AudioClip(samples), ser_all_speakers=True, wait=False)
        return True

    async def _close_stream(self, stream: WearableStream, *, reason: str) -> None:
        await self._flush_stream(stream)
        self.streams.pop(stream.uid, None)
        live = self.sessions.get(stream.session_id)
        swept = None
        if live is not None:
            # Sweep what may hold speech: speech found, or clips not transcribed yet.
            may_speak = live.last_speech_s > 0 or not live.settled
            want_sweep = self.settings.wearable_sweep_on_end and may_speak
            _, swept = self.end_session(stream.session_id, sweep=want_sweep)
        self._emit([ObservabilityEvent.for_creature(
            CreatureName.JELLYFISH, "complete", session_id=stream.session_id,
            data={"uid": stream.uid, "chunks": stream.chunks, "reason": reason,
                  "sweep": None if swept is None else swept.sweep},
        )])  # fmt: skip

    async def _housekeeping(self) -> None:
        """Flush paused wearable streams, end silent ones, drop idle sessions."""
        while True:
            await asyncio.sleep(TICK_S)
            try:
                await self.tick()
            except Exception as exc:  # never let housekeeping die
                log.error("housekeeping.failed", error=repr(exc)[:500])

    async def tick(self, now: float | None = None) -> None:
        now = time.monotonic() if now is None else now
        for stream in list(self.streams.values()):
            if self._stream_gap(stream):
                await self._close_stream(stream, reason="gap")
            elif stream.pending and now - stream.last_chunk >= self.settings.wearable_flush_after_s:
                await self._flush_stream(stream)
        if self.settings.sweep_auto and self.ready.is_set():
            self._idle_sweeps(now)
        self._probe_ser()
        if now - self._last_cleanup >= min(60.0, self.settings.session_idle_s):
            self._last_cleanup = now
            removed = self.sessions.cleanup(now)
            if removed:
                log.info("sessions.cleaned", removed=removed)

    def _probe_ser(self) -> None:
        """Ask the SER sidecar (when one is configured) how it is, off the event loop, when
        nothing was heard from it for a while: /v1/status and /health report what it said."""
        probe_due = getattr(self.models.emotion, "probe_due", None)
        probe = getattr(self.models.emotion, "probe", None)
        if probe_due is None or probe is None:
            return  # classified in process
        if (self._ser_probe is None or self._ser_probe.done()) and probe_due():
            self._ser_probe = self._spawn(asyncio.to_thread(probe), "ser-probe")

    def _idle_sweeps(self, now: float) -> None:
        """The design's background sweep: sweep each session whose talk paused (no clip for
        `sweep_idle_s`) with speech not swept yet. Wearable streams are left to their own
        end-of-session sweep: their clips come `wearable_clip_s` apart, which is no pause."""
        streaming = {stream.session_id for stream in self.streams.values()}
        for live in self.sessions.all():
            if live.session_id in streaming:
                continue
            if not live.idle_sweep_due(now, self.settings.sweep_idle_s):
                continue
            live.idle_swept_at = live.last_seen
            try:
                status = self.start_sweep(live.session_id)
            except (LookupError, SweepConflictError):  # ended meanwhile, or too little audio
                continue
            log.info("sweep.auto", session_id=live.session_id, sweep=status.sweep,
                     from_s=round(status.from_s, 3), to_s=round(status.to_s, 3))  # fmt: skip

    def wearable_transcript(
        self, session_id: str, uid: str, transcript: OmiTranscript
    ) -> dict[str, Any]:
        """Write a client's own transcript segments to the session's JSONL."""
        s = self.settings
        segments = to_segments(transcript, wearer=s.wearer_name, engine="client")
        if segments:
            started = session_started_at(
                s.transcripts_dir, session_id, min(x.start for x in segments)
            )
            payload = TranscriptPayload(
                session_id=session_id,
                device_id=uid,
                session_started_at=started,
                segments=segments,
            )
            append_records(s.transcripts_dir, session_id, [payload])
        self._emit([ObservabilityEvent.for_creature(
            CreatureName.JELLYFISH, "complete", session_id=session_id,
            data={"uid": uid, "segments": len(segments), "source": "client_transcript"},
        )])  # fmt: skip
        return {
            "session_id": session_id,
            "written": len(segments),
            "segment_ids": [x.segment_id for x in segments],
        }

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
            if live is not None:
                with live.work_lock:  # the fast path and sweeps change the speakers too
                    if seg.speaker in live.speakers.unknowns():
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
        live = self.sessions.get(session_id)
        if live is not None:
            live.transcript.correct(line.segments[0])
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
                CreatureName.SEAHORSE, "complete", session_id=sid,
                data={"regions": len(result.regions), "seconds": round(t.get("vad", 0), 3)},
            ),
            ObservabilityEvent.for_creature(
                CreatureName.SIREN, "complete", session_id=sid,
                data={"segments": len(result.segments), "audio_s": round(clip.duration_s, 3),
                      "rtf": round(t.get("total", 0) / audio_s, 3)},
            ),
        ]  # fmt: skip
        if result.regions:
            known = sum(1 for i in result.speakers.values() if i.person is not None)
            events += [
                ObservabilityEvent.for_creature(
                    CreatureName.CUTTLEFISH, "complete", session_id=sid,
                    data={"speakers": len(result.speakers),
                          "seconds": round(t.get("diarization", 0), 3)},
                ),
                ObservabilityEvent.for_creature(
                    CreatureName.CERBERUS, "complete", session_id=sid,
                    data={"known": known, "unknown": len(result.speakers) - known},
                ),
                ObservabilityEvent.for_creature(
                    CreatureName.HYDRA, "complete", session_id=sid,
                    data={"labelled": sum(1 for s in result.segments if s.emotion)},
                ),
            ]  # fmt: skip
        self._emit(events)

    def _emit(self, events: list[ObservabilityEvent]) -> None:
        try:
            # Hourly files: the atomic writer copies the file on every append, so a stream
            # must stay small (a day of clips in one file would make each append O(day)).
            stream = f"audio-pipeline-{datetime.now(UTC):%Y%m%d%H}"
            append_records(self.settings.events_dir, stream, events)
        except OSError as exc:  # events are best effort: never fail a transcription for them
            log.warning("events.dropped", error=repr(exc)[:300])
