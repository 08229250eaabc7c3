"""Production diarization: pyannote.audio's speaker-diarization-3.1 pipeline (gated on Hugging
Face, so it needs a token). pyannote.audio and torch are imported only when this backend is
chosen and loaded; the embedded install neither needs nor ships them.

pyannote runs its own segmentation, so the VAD regions are used only to drop turns that lie
entirely outside speech (they are not needed for it to find speakers).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from audio_pipeline.backends import import_pyannote, pyannote_pretrained
from audio_pipeline.speakers import ClipLike, Turn, relabel_turns
from her_os_shared.logging import get_logger

log = get_logger(__name__)

DIARIZATION_MODEL = "pyannote/speaker-diarization-3.1"
_NEEDS = (
    "AUDIO_PIPELINE_DIARIZATION_BACKEND=pyannote needs the pyannote.audio package and "
    f"AUDIO_PIPELINE_PYANNOTE_TOKEN (a Hugging Face token with access to {DIARIZATION_MODEL}); "
    "install pyannote.audio and set the token, or set "
    "AUDIO_PIPELINE_DIARIZATION_BACKEND=embedded to use the bundled model"
)


class PyannoteDiarizer:
    name = "pyannote"

    def __init__(self, *, token: str | None, device: str = "cpu") -> None:
        self._token = token
        self._device = device
        self._pipeline: Any = None
        self._lock = threading.Lock()

    def load(self) -> None:
        with self._lock:
            self._load_locked()

    def _load_locked(self) -> Any:
        if self._pipeline is not None:
            return self._pipeline
        audio_mod, torch = import_pyannote(_NEEDS, self._token)
        assert self._token is not None
        pipeline = pyannote_pretrained(audio_mod.Pipeline, DIARIZATION_MODEL, self._token, _NEEDS)
        pipeline.to(torch.device(self._device))
        self._pipeline = pipeline
        log.info("diarizer_loaded", backend=self.name, model=DIARIZATION_MODEL, device=self._device)
        return pipeline

    def diarize(self, clip: ClipLike, regions: Sequence[tuple[float, float]]) -> list[Turn]:
        if clip.samples.size == 0 or not regions:
            return []
        with self._lock:
            pipeline = self._load_locked()  # checks package and token before torch is touched
            import torch

            waveform = torch.from_numpy(clip.samples).unsqueeze(0)
            output = pipeline({"waveform": waveform, "sample_rate": clip.sample_rate})
        return turns_from_output(output, clip.samples.size / clip.sample_rate, regions)


def turns_from_output(
    output: Any, duration_s: float, regions: Sequence[tuple[float, float]]
) -> list[Turn]:
    """pyannote's result as the embedded diarizers give theirs: turns sorted by start,
    SPEAKER_nn in order of first appearance, overlapped speech as overlapping turns; turns
    entirely outside the speech `regions` dropped."""
    # pyannote.audio 4 returns a DiarizeOutput (speaker_diarization, with overlapped speech
    # as overlapping turns, like the segmented diarizer's); 3.x the annotation itself.
    annotation = getattr(output, "speaker_diarization", output)
    turns = []
    for segment, _, label in annotation.itertracks(yield_label=True):
        start, end = float(segment.start), min(float(segment.end), duration_s)
        if end > start and any(a < end and start < b for a, b in regions):
            turns.append(Turn(round(start, 3), round(end, 3), str(label)))
    # pyannote's own SPEAKER_nn are not in order of appearance; make them so.
    return relabel_turns(turns)
