"""The overlap-aware diarizer: pyannote's segmentation model for who-talks-when at the frame
level, CAM++ window clustering for who is who.

1. Segmentation (segmentation.py): 10 s chunks every `step_s` (the last one zero-padded), each
   decoded to the activity of up to three local speakers, two at once. At every frame of the
   clip, the number of people talking is the number of active local speakers averaged over
   the chunks that cover it, rounded (pyannote's speaker count). Speech is where it is at
   least one (this replaces the VAD: it keeps quiet, distant speech that Silero drops), overlap
   where it is two.
2. Identity: the embedded diarizer (embedded.py) clusters CAM++ embeddings of 1.5 s windows of
   that speech. Windows that touch overlap mix two voices and would form a spurious third
   "speaker", so they do not shape the clusters; each takes its nearest cluster afterwards.
3. Every speech frame gets its main speaker: the window clustering's, or in the pauses it
   leaves out, the nearest one's.
4. Overlap: in a frame where two people talk, the second speaker is found through the chunks
   that cover it. In such a chunk, each of the two active local speakers also talks alone
   somewhere; the main speakers of those clean frames name each local speaker, and the one
   that is not the frame's main speaker is the second. Chunks vote.

Measured on the dev clips against pyannote's own pipeline with CAM++ in place of its
embeddings (its chunk-level embeddings clustered across chunks): the segmentation model there
merges two voices of one dev meeting into one local speaker, which no clustering of local
speakers can split (DER 52 % even with oracle clustering); window-level clustering splits them.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from audio_pipeline.speakers import (
    ClipLike,
    SpeakerEmbedder,
    SpeechDiarization,
    Turn,
    relabel_turns,
)
from audio_pipeline.speakers.embedded import EmbeddedDiarizer
from audio_pipeline.speakers.segmentation import (
    CHUNK_SAMPLES,
    FRAME_SPAN,
    FRAME_STEP,
    FRAME_STEP_S,
    FRAMES_PER_CHUNK,
    SAMPLE_RATE,
    SpeakerSegmentation,
)
from her_os_shared.logging import get_logger

log = get_logger(__name__)

# pyannote's chunk step (a tenth of a chunk); 2 s or more made the count noisy at chunk edges
# on the dev meeting (false alarm 8 → 16 %, docs/benchmarks.md).
DEFAULT_STEP_S = 1.0


@dataclass(frozen=True, slots=True)
class SegmentedDiarization:
    turns: list[Turn]  # may overlap: two speakers at once
    exclusive: list[Turn]  # each frame's main speaker alone
    embeddings: dict[str, np.ndarray]  # unit centroid per speaker, keyed like Turn.speaker
    speech: list[tuple[float, float]]  # where anyone talks
    overlap: list[tuple[float, float]]  # where two talk at once
    timings_s: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FrameActivity:
    """The segmentation model's view of a clip, frame by frame."""

    activity: np.ndarray  # (chunks, 589, 3) local speaker activity of each chunk
    offsets: list[int]  # each chunk's first clip frame
    count: np.ndarray  # (frames,) people talking at each clip frame
    duration_s: float

    @property
    def speech(self) -> list[tuple[float, float]]:
        return spans(self.count >= 1, self.duration_s)

    @property
    def overlap(self) -> list[tuple[float, float]]:
        return spans(self.count >= 2, self.duration_s)


def chunk_starts(n_samples: int, step: int) -> list[int]:
    """pyannote's sliding window: full chunks every `step` samples, then one zero-padded last
    chunk when the clip does not end on a step (a clip shorter than a chunk is one chunk)."""
    if n_samples <= CHUNK_SAMPLES:
        return [0]
    starts = list(range(0, n_samples - CHUNK_SAMPLES + 1, step))
    if (n_samples - CHUNK_SAMPLES) % step:
        starts.append(starts[-1] + step)
    return starts


def frame_centres(n_frames: int) -> np.ndarray:
    """Clip time (s) of the centre of each frame's receptive field."""
    return (np.arange(n_frames) * FRAME_STEP + FRAME_SPAN / 2) / SAMPLE_RATE


def spans(mask: np.ndarray, duration_s: float) -> list[tuple[float, float]]:
    """Runs of True frames as (start, end) seconds: a frame stands for its centre ± half a
    step."""
    centre, half = frame_centres(len(mask)), FRAME_STEP_S / 2
    edges = np.flatnonzero(np.diff(np.concatenate([[0], mask.astype(np.int8), [0]])))
    return [
        (
            round(max(0.0, float(centre[a]) - half), 3),
            round(min(duration_s, float(centre[b - 1]) + half), 3),
        )
        for a, b in zip(edges[::2], edges[1::2], strict=True)
    ]


def frame_activity(
    segmentation: SpeakerSegmentation, clip: ClipLike, step_s: float
) -> FrameActivity:
    """The segmentation model over the clip: 10 s chunks every `step_s`, each decoded to its
    local speakers' activity; at each clip frame, the number of people talking."""
    if clip.sample_rate != SAMPLE_RATE:
        raise ValueError(f"the segmentation model needs {SAMPLE_RATE} Hz audio")
    samples = np.asarray(clip.samples, dtype=np.float32)
    duration = len(samples) / SAMPLE_RATE
    if len(samples) == 0:
        empty = np.zeros((0, FRAMES_PER_CHUNK, 3))
        return FrameActivity(empty, [], np.zeros(0, dtype=np.int64), 0.0)
    starts = chunk_starts(len(samples), round(step_s * SAMPLE_RATE))
    chunks = np.zeros((len(starts), CHUNK_SAMPLES), dtype=np.float32)
    for i, s in enumerate(starts):
        piece = samples[s : s + CHUNK_SAMPLES]
        chunks[i, : len(piece)] = piece
    activity = segmentation.activity(chunks)  # (chunks, 589, 3)
    offsets = [int(np.rint(s / FRAME_STEP)) for s in starts]  # a chunk's first clip frame
    n = max(int(np.rint((len(samples) - FRAME_SPAN / 2) / FRAME_STEP)) + 1, 1)
    return FrameActivity(activity, offsets, _count(activity, offsets, n), duration)


def _count(activity: np.ndarray, offsets: Sequence[int], n: int) -> np.ndarray:
    """People talking at each clip frame: active local speakers averaged over the chunks
    covering the frame, rounded (pyannote's speaker count)."""
    total, covered = np.zeros(n), np.zeros(n)
    for act, off in zip(activity, offsets, strict=True):
        end = min(off + FRAMES_PER_CHUNK, n)
        total[off:end] += act[: end - off].sum(axis=1)
        covered[off:end] += 1
    return np.rint(total / np.maximum(covered, 1)).astype(np.int64)


def _local_speakers(
    activity: np.ndarray, offsets: np.ndarray, centre: np.ndarray, span: tuple[float, float]
) -> dict[int, int]:
    """{chunk: the local speaker who talks alone in most of `span`} over the chunks that hold
    the whole span; a chunk where no one talks alone in half of it says nothing. `offsets`:
    each chunk's first clip frame; `centre`: each clip frame's time."""
    a, b = (int(x) for x in np.searchsorted(centre, span))
    if b <= a:
        return {}
    out: dict[int, int] = {}
    for c in np.flatnonzero((offsets <= a) & (offsets + FRAMES_PER_CHUNK >= b)):
        local = activity[c, a - offsets[c] : b - offsets[c]] > 0
        solo = (local & (local.sum(axis=1, keepdims=True) == 1)).sum(axis=0)
        s = int(np.argmax(solo))
        if solo[s] * 2 >= b - a:
            out[int(c)] = s
    return out


def apart_windows(
    frames: FrameActivity, spans: Sequence[tuple[float, float]]
) -> Callable[[int, int], bool]:
    """Whether windows i and j are different voices in the segmentation model's view: most
    chunks that hold both give them different local speakers (pyannote's cannot-link). Two
    windows far apart share no chunk and are never known apart."""
    local: dict[int, dict[int, int]] = {}
    offsets, centre = np.asarray(frames.offsets), frame_centres(len(frames.count))

    def of(i: int) -> dict[int, int]:
        if i not in local:
            local[i] = _local_speakers(frames.activity, offsets, centre, spans[i])
        return local[i]

    def apart(i: int, j: int) -> bool:
        if abs(spans[i][0] - spans[j][0]) >= CHUNK_SAMPLES / SAMPLE_RATE:
            return False
        li, lj = of(i), of(j)
        common = li.keys() & lj.keys()
        return bool(common) and sum(li[c] != lj[c] for c in common) * 2 > len(common)

    return apart


class SegmentedDiarizer:
    """Diarizer (speakers/__init__.py) whose turns overlap where two people talk at once."""

    name = "segmented"

    def __init__(
        self,
        embedder: SpeakerEmbedder,
        *,
        step_s: float = DEFAULT_STEP_S,
        max_overlap_share: float = 0.1,
        segmentation: SpeakerSegmentation | None = None,
    ) -> None:
        if not FRAME_STEP_S <= step_s <= CHUNK_SAMPLES / SAMPLE_RATE:
            raise ValueError("step_s must lie between one frame and one chunk (10 s)")
        self.embedder = embedder
        self.step_s = step_s
        self.segmentation = segmentation or SpeakerSegmentation()
        self.windows = EmbeddedDiarizer(embedder, max_overlap_share=max_overlap_share)

    def load(self) -> None:
        self.segmentation.load()
        self.windows.load()

    def diarize(self, clip: ClipLike, regions: Sequence[tuple[float, float]]) -> list[Turn]:
        """Turns of the whole clip; the VAD's `regions` are not used (the segmentation model
        finds the speech itself)."""
        del regions
        return self.run(clip).turns

    def activity(self, clip: ClipLike) -> FrameActivity:
        """Step 1 alone: the segmentation model's frame activity and speaker count."""
        return frame_activity(self.segmentation, clip, self.step_s)

    def speech(self, clip: ClipLike) -> list[tuple[float, float]]:
        """Where anyone talks (the segmentation model as a voice activity detector)."""
        return self.activity(clip).speech

    def diarize_speech(self, clip: ClipLike) -> SpeechDiarization:
        """SpeechDiarizer: speech, overlap and turns from one segmentation pass."""
        found = self.run(clip)
        return SpeechDiarization(
            found.turns, found.exclusive, found.speech, found.overlap, found.timings_s
        )

    def run(self, clip: ClipLike) -> SegmentedDiarization:
        t0 = time.perf_counter()
        frames = self.activity(clip)
        speech, overlap = frames.speech, frames.overlap
        timings = {"segmentation": time.perf_counter() - t0}
        if not speech:
            return SegmentedDiarization([], [], {}, [], [], timings)

        t = time.perf_counter()
        count, activity, offsets = frames.count, frames.activity, frames.offsets
        found = self.windows.diarize_with_embeddings(
            clip, speech, overlap=overlap, apart_of=lambda w: apart_windows(frames, w)
        )
        names = sorted({t.speaker for t in found.turns})
        main = self._main_speakers(found.turns, names, count)
        second = self._second_speakers(activity, offsets, main, count)
        second = self._fill_second(main, second, count)
        turns: list[Turn] = []
        alone: list[Turn] = []
        for k, name in enumerate(names):
            mask = (main == k) | (second == k)
            turns += [Turn(a, b, name) for a, b in spans(mask, frames.duration_s)]
            alone += [Turn(a, b, name) for a, b in spans(main == k, frames.duration_s)]
        final = relabel_turns(turns)
        rename: dict[str, str] = {}
        for old, new in zip(sorted(turns, key=lambda t: (t.start, t.end)), final, strict=True):
            rename.setdefault(old.speaker, new.speaker)
        exclusive = sorted(
            (Turn(t.start, t.end, rename[t.speaker]) for t in alone), key=lambda t: t.start
        )
        embeddings = {rename[k]: v for k, v in found.embeddings.items() if k in rename}
        timings["clustering"] = time.perf_counter() - t
        log.debug("diarize.segmented", chunks=len(offsets), speakers=len(embeddings),
                  overlap_s=round(sum(b - a for a, b in overlap), 2))  # fmt: skip
        return SegmentedDiarization(final, exclusive, embeddings, speech, overlap, timings)

    @staticmethod
    def _main_speakers(turns: Sequence[Turn], names: list[str], count: np.ndarray) -> np.ndarray:
        """Index (in `names`) of each frame's main speaker; -1 where nobody talks. Speech
        frames the window clustering left out (pauses, too-short pieces) take the nearest
        labelled frame's speaker."""
        centre = frame_centres(len(count))
        main = -np.ones(len(count), dtype=np.int64)
        for t in turns:
            main[(centre >= t.start) & (centre < t.end)] = names.index(t.speaker)
        main[count == 0] = -1
        labelled = np.flatnonzero(main >= 0)
        todo = np.flatnonzero((count >= 1) & (main < 0))
        if len(labelled) and len(todo):
            nearest = np.searchsorted(labelled, todo).clip(1, len(labelled)) - 1
            right = (nearest + 1).clip(max=len(labelled) - 1)
            pick = np.where(
                np.abs(labelled[right] - todo) < np.abs(labelled[nearest] - todo), right, nearest
            )
            main[todo] = main[labelled[pick]]
        return main

    @staticmethod
    def _fill_second(main: np.ndarray, second: np.ndarray, count: np.ndarray) -> np.ndarray:
        """Overlapped frames whose second speaker the chunks could not name take the nearest
        other speaker in time: whoever spoke just before or just after (in conversation the
        voice that cuts in, or the one being cut off). A wrong guess costs what leaving the
        frame out costs (a confused frame for a missed one)."""
        todo = np.flatnonzero((count >= 2) & (main >= 0) & (second < 0))
        if not len(todo):
            return second
        out = second.copy()
        speaking = np.flatnonzero(main >= 0)
        for f in todo:
            others = speaking[main[speaking] != main[f]]
            if not len(others):
                continue  # one voice in the whole clip: nobody to name
            out[f] = main[others[np.argmin(np.abs(others - f))]]
        return out

    @staticmethod
    def _second_speakers(
        activity: np.ndarray, offsets: Sequence[int], main: np.ndarray, count: np.ndarray
    ) -> np.ndarray:
        """Index of the second speaker at each overlapped frame (-1 elsewhere or unknown)."""
        n = len(main)
        votes: dict[int, Counter[int]] = {}
        for act, off in zip(activity, offsets, strict=True):
            end = min(off + FRAMES_PER_CHUNK, n)
            local = act[: end - off] > 0  # (frames, 3)
            labels = main[off:end]
            both = np.flatnonzero((local.sum(axis=1) == 2) & (count[off:end] >= 2))
            if not len(both):
                continue
            alone = local.sum(axis=1) == 1
            name: dict[int, int] = {}  # local speaker → the main speaker of its clean frames
            for s in range(local.shape[1]):
                mine = labels[alone & local[:, s] & (labels >= 0)]
                if len(mine):
                    name[s] = int(np.bincount(mine).argmax())
            for f in both:
                pair = [name.get(int(s), -1) for s in np.flatnonzero(local[f])]
                others = [p for p in pair if p >= 0 and p != labels[f]]
                if labels[f] >= 0 and others:
                    votes.setdefault(off + int(f), Counter())[others[0]] += 1
        second = -np.ones(n, dtype=np.int64)
        for f, c in votes.items():
            second[f] = c.most_common(1)[0][0]
        return second
