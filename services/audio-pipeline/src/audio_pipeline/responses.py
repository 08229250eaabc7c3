"""The answers of /v1/transcribe and /v1/session/{id}/end: the project's fields and, beside
them, the fields of the design's API reference (§6), so a client written to either works.

Design fields and their meaning here:
- `speakers_detected`: how many speakers the clip holds (the design's example: `2`), the
  size of the project's `speakers` map.
- `processing_time_ms`: the fast path's time on the clip in whole milliseconds (`processing_s`
  is the same in seconds); `0` for a deferred clip, which has not been processed yet (the
  project's `processing_s` is `null` then; the design's field is a number).
- each segment's `emotion` also carries `primary` and `confidence` (the design's names of
  `label` and `score`), and the segment an `emotion_reason` (`null`: no engine here explains
  its label). Only in these answers: the JSONL keeps the contract's `label`/`score`.
- the end of a session answers with `segments`, the session's transcript (the design's
  "all accumulated segments"), and `segments_count`.
"""

from __future__ import annotations

from typing import Any

from audio_pipeline.runtime import ClipOutcome
from audio_pipeline.sessions import LiveSession, SweepStatus
from her_os_shared.transcript import Segment


def design_segment(seg: Segment) -> dict[str, Any]:
    """A transcript segment as JSON, with the design's emotion names beside the contract's."""
    out = seg.model_dump(mode="json")
    emotion = out.get("emotion")
    if emotion is not None:
        out["emotion"] = {**emotion, "primary": emotion["label"], "confidence": emotion["score"]}
    out["emotion_reason"] = None
    return out


def transcribe_answer(out: ClipOutcome) -> dict[str, Any]:
    result = out.result
    total_s = None if result is None else result.timings_s.get("total", 0.0)
    speakers = (
        {}
        if result is None
        else {
            label: {"name": who.label, "person": who.person, "similarity": who.similarity}
            for label, who in result.speakers.items()
        }
    )
    return {
        "session_id": out.live.session_id,
        "clip": out.index,
        "duration_s": round(out.duration_s, 3),
        "session_audio_s": round(out.offset_s + out.duration_s, 3),
        "processing_s": None if total_s is None else round(total_s, 3),
        "processing_time_ms": 0 if total_s is None else round(total_s * 1000),
        "segments": [] if result is None else [design_segment(s) for s in result.segments],
        "speakers": speakers,
        "speakers_detected": len(speakers),
        # True: a sweep holds the models; this clip is kept and transcribed after it.
        "sweep_active": result is None,
        "deferred": result is None,
    }


def end_answer(live: LiveSession, sweep: SweepStatus | None) -> dict[str, Any]:
    return {
        **live.summary(),
        "segments": [design_segment(s) for s in live.transcript.segments()],
        "ended": True,
        "sweep": None if sweep is None else sweep.summary(),
    }
