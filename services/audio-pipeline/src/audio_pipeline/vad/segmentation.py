"""Voice activity from pyannote's segmentation-3.0 (ONNX, speakers/segmentation.py): a frame
is speech where the speaker count is at least one. It keeps quiet, distant speech of meetings
that Silero drops (docs/benchmarks.md, "Voice activity"); with the segmented diarizer the
pipeline takes both speech and turns from one pass of the model, and this backend serves the
callers that need speech alone (enrollment).
"""

from __future__ import annotations

from audio_pipeline.audio import AudioClip
from audio_pipeline.speakers.segmentation import SpeakerSegmentation
from audio_pipeline.speakers.segmented import DEFAULT_STEP_S, frame_activity
from audio_pipeline.vad import pad_regions


class SegmentationVad:
    name = "segmentation"

    def __init__(
        self, segmentation: SpeakerSegmentation | None = None, *, step_s: float = DEFAULT_STEP_S
    ) -> None:
        self.segmentation = segmentation or SpeakerSegmentation()
        self.step_s = step_s

    def load(self) -> None:
        self.segmentation.load()

    def regions(self, clip: AudioClip) -> list[tuple[float, float]]:
        """The speech, padded as Silero pads its regions (SPEECH_PAD_S)."""
        speech = frame_activity(self.segmentation, clip, self.step_s).speech
        return pad_regions(speech, clip.duration_s)
