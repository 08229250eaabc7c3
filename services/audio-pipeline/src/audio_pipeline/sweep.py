"""The sweep: re-transcribe a session's audio as a whole, after the fast path.

The fast path sees one clip at a time, so words cut at clip edges are lost or split and a
voice heard briefly in one clip is judged alone. The sweep reads the session's kept audio in
long chunks (`sweep_chunk_s`), cut where the speech allows: segments that end within
`sweep_overlap_s` of a chunk's cut are dropped and redone at the start of the next chunk, so
no word is decoded across a cut. Its segments are written as `is_sweep: true` payloads; the
context engine lets them replace the non-pinned fast-path segments they overlap. Segments the
user corrected (pinned) stand: a sweep segment that mostly overlaps a pinned one is not
written, so the corrected text is not doubled.

Each sweep covers the audio received since the previous one (`swept_to_s` onwards), so sweep
segments never overlap each other and a second sweep adds, never duplicates.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from audio_pipeline.audio import AudioClip
from audio_pipeline.pipeline import Models, transcribe_clip
from audio_pipeline.sessions import LiveSession, SweepStatus
from her_os_shared.jsonl import JsonlReader, append_records, stream_path
from her_os_shared.logging import get_logger
from her_os_shared.transcript import Segment, TranscriptPayload

log = get_logger(__name__)

# A sweep segment is left out when a pinned segment covers at least this share of it.
PINNED_COVER = 0.5


@dataclass(frozen=True, slots=True)
class SweepPlan:
    chunk_s: float
    overlap_s: float


def pinned_spans(transcripts_dir: Path, session_id: str) -> list[tuple[float, float]]:
    """Time spans of the session's pinned (user-corrected) segments, from its JSONL."""
    path = stream_path(transcripts_dir, session_id)
    if not path.is_file():
        return []
    return [
        (seg.start, seg.end)
        for rec in JsonlReader(path, TranscriptPayload)
        for seg in rec.value.segments
        if seg.pinned
    ]


def covered_by_pinned(seg: Segment, pinned: list[tuple[float, float]]) -> bool:
    length = max(seg.end - seg.start, 1e-6)
    covered = sum(max(0.0, min(seg.end, b) - max(seg.start, a)) for a, b in pinned)
    return covered / length >= PINNED_COVER


def chunk_count(span_s: float, plan: SweepPlan) -> int:
    """Chunks a sweep of `span_s` seconds needs (at least; cuts may add one)."""
    return max(1, -(-int(span_s * 1000) // int(plan.chunk_s * 1000)))


def run_sweep(
    models: Models,
    live: LiveSession,
    status: SweepStatus,
    plan: SweepPlan,
    transcripts_dir: Path,
    on_progress: Callable[[SweepStatus], None] = lambda s: None,
) -> None:
    """Sweep `status.from_s`–`status.to_s` of the session (blocking: a worker thread)."""
    started = time.perf_counter()
    pinned = pinned_spans(transcripts_dir, live.session_id)
    pos, end = status.from_s, status.to_s
    status.done_to_s = pos
    status.chunks_total = chunk_count(end - pos, plan)
    k = 0
    while end - pos > 0.05:
        cut = min(pos + plan.chunk_s, end)
        last = cut >= end
        clip = AudioClip(live.audio.read(pos, cut))
        if clip.duration_s == 0:  # audio past what the session kept
            break
        with live.work_lock:
            result = transcribe_clip(
                models,
                clip,
                speakers=live.speakers,
                offset_s=pos,
                id_prefix=f"s{status.sweep:02d}k{k:03d}",
            )
        keep = result.segments
        next_pos = pos + clip.duration_s
        if not last:
            # Redo the speech near the cut in the next chunk, unless that would move on by
            # less than half a chunk (one very long segment): then the cut stands.
            near_cut = [s for s in keep if s.end > cut - plan.overlap_s]
            redo_from = min((s.start for s in near_cut), default=cut)
            if redo_from >= pos + plan.chunk_s / 2:
                next_pos = redo_from
                keep = [s for s in keep if s.start < redo_from]
        written = [s for s in keep if not covered_by_pinned(s, pinned)]
        status.skipped_pinned += len(keep) - len(written)
        if written:
            payload = TranscriptPayload(
                session_id=live.session_id,
                device_id=live.device_id,
                session_started_at=live.started_at,
                is_sweep=True,
                segments=written,
            )
            append_records(transcripts_dir, live.session_id, [payload])
            live.transcript.add(written, is_sweep=True)
        status.segments += len(written)
        k += 1
        status.chunks_done = k
        status.done_to_s = next_pos
        status.chunks_total = max(status.chunks_total, k + (0 if last else 1))
        on_progress(status)
        log.info(
            "sweep.chunk", session_id=live.session_id, sweep=status.sweep, chunk=k,
            of=status.chunks_total, from_s=round(pos, 3), to_s=round(next_pos, 3),
            segments=len(written),
        )  # fmt: skip
        pos = next_pos
    status.chunks_total = status.chunks_done
    status.seconds = round(time.perf_counter() - started, 3)
