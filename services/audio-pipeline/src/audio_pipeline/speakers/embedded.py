"""The embedded diarizer: VAD regions → sliding windows → d-vectors → clusters → turns.

VAD regions can span several speakers (VADs bridge short pauses), and a window straddling a
speaker change embeds a mix of both voices, which clusters as a spurious third "speaker". So
each region is first split at its internal pauses (at least `min_pause_s` of frames well below
the region's speech level): in conversation the floor nearly always changes hands at a pause.

Each piece is cut into `window_s` windows every `hop_s` (the last one aligned to the
region's end; a region shorter than a window is one window). Every window is embedded, the
embeddings are clustered (clustering.py), and each window owns the middle of its span — from
halfway through its overlap with the previous window to halfway through the next — so speaker
changes land within hop/2 of where the windows disagree. Regions too short to embed take the
speaker of the nearest embedded window. Adjacent same-speaker pieces separated by less than
`merge_gap_s` become one turn.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from audio_pipeline.speakers import ClipLike, SpeakerEmbedder, Turn, relabel_turns, speaker_label
from audio_pipeline.speakers.clustering import (
    Apart,
    ClusteringParams,
    centroids,
    cluster_embeddings,
    relabel_by_first_appearance,
)
from her_os_shared.logging import get_logger

log = get_logger(__name__)

# Windows quieter than this (RMS) hold no speech whatever the VAD said; they are skipped.
_SILENCE_RMS = 10 ** (-60 / 20)
# Pause detection: 25 ms frames every 10 ms. A frame is a pause when it is this far below the
# region's loud frames (95th percentile), or barely above its quietest ones (the noise floor).
_FRAME_S = 0.025
_STEP_S = 0.010
_PAUSE_BELOW_SPEECH_DB = 30.0
_PAUSE_ABOVE_FLOOR_DB = 6.0


@dataclass(frozen=True, slots=True)
class Diarization:
    turns: list[Turn]
    # Unit-norm centroid of each speaker's window embeddings, keyed like Turn.speaker.
    embeddings: dict[str, np.ndarray]


@dataclass(frozen=True, slots=True)
class _Window:
    start: float
    end: float
    core_start: float  # the part of the window whose speaker this window decides
    core_end: float


def _windows(start: float, end: float, window_s: float, hop_s: float) -> list[_Window]:
    length = end - start
    if length <= window_s:
        return [_Window(start, end, start, end)]
    n = 1 + int(np.ceil((length - window_s) / hop_s - 1e-9))
    starts = [min(start + i * hop_s, end - window_s) for i in range(n)]
    out = []
    for i, s in enumerate(starts):
        e = s + window_s
        core_start = start if i == 0 else (s + starts[i - 1] + window_s) / 2
        core_end = end if i == n - 1 else (starts[i + 1] + e) / 2
        out.append(_Window(s, e, core_start, core_end))
    return out


def _frame_db(samples: np.ndarray, rate: int) -> np.ndarray:
    frame, step = round(_FRAME_S * rate), round(_STEP_S * rate)
    if len(samples) < frame:
        return np.zeros(0)
    frames = np.lib.stride_tricks.sliding_window_view(samples, frame)[::step]
    power = np.mean(np.square(frames, dtype=np.float64), axis=1)
    return 10 * np.log10(power + 1e-12)


def split_at_pauses(
    samples: np.ndarray, rate: int, start: float, end: float, min_pause_s: float
) -> list[tuple[float, float]]:
    """(start, end) pieces of a region between its internal pauses of >= `min_pause_s`."""
    a = round(start * rate)
    db = _frame_db(samples[a : round(end * rate)], rate)
    if db.size == 0:
        return [(start, end)]
    threshold = max(
        np.percentile(db, 95) - _PAUSE_BELOW_SPEECH_DB,
        np.percentile(db, 5) + _PAUSE_ABOVE_FLOOR_DB,
    )
    quiet = db < threshold
    min_frames = max(1, round(min_pause_s / _STEP_S))
    pieces: list[tuple[float, float]] = []
    piece_start = start
    i = 0
    while i < len(quiet):
        if not quiet[i]:
            i += 1
            continue
        j = i
        while j < len(quiet) and quiet[j]:
            j += 1
        if j - i >= min_frames:
            # Pause from the first quiet frame's centre to the last one's.
            p0 = start + i * _STEP_S + _FRAME_S / 2
            p1 = min(end, start + (j - 1) * _STEP_S + _FRAME_S / 2)
            if p0 > piece_start:
                pieces.append((piece_start, p0))
            piece_start = p1
        i = j
    if end > piece_start:
        pieces.append((piece_start, end))
    return pieces


def _clean_regions(
    regions: Sequence[tuple[float, float]], duration: float
) -> list[tuple[float, float]]:
    clipped = sorted((max(0.0, float(a)), min(duration, float(b))) for a, b in regions if b > a)
    out: list[tuple[float, float]] = []
    for a, b in clipped:
        if b <= a:
            continue
        if out and a <= out[-1][1]:  # overlapping regions: merge
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _share_inside(a: float, b: float, spans: Sequence[tuple[float, float]]) -> float:
    """The share of [a, b) that lies inside `spans` (disjoint)."""
    if b <= a:
        return 0.0
    inside = sum(max(0.0, min(b, e) - max(a, s)) for s, e in spans)
    return inside / (b - a)


class EmbeddedDiarizer:
    name = "embedded"

    def __init__(
        self,
        embedder: SpeakerEmbedder,
        *,
        window_s: float = 1.5,
        hop_s: float = 0.75,
        merge_gap_s: float = 0.5,
        min_pause_s: float = 0.3,
        clustering: ClusteringParams | None = None,
        max_overlap_share: float = 0.25,
    ) -> None:
        if not 0 < hop_s <= window_s:
            raise ValueError("need 0 < hop_s <= window_s")
        self.embedder = embedder
        self.window_s = window_s
        self.hop_s = hop_s
        self.merge_gap_s = merge_gap_s
        self.min_pause_s = min_pause_s
        self.max_overlap_share = max_overlap_share
        # Without explicit parameters, the embedder's own defaults (its similarity scale).
        self.clustering = clustering or getattr(embedder, "clustering", None) or ClusteringParams()

    def load(self) -> None:
        load = getattr(self.embedder, "load", None)
        if callable(load):
            load()

    def diarize(self, clip: ClipLike, regions: Sequence[tuple[float, float]]) -> list[Turn]:
        return self.diarize_with_embeddings(clip, regions).turns

    def diarize_with_embeddings(
        self,
        clip: ClipLike,
        regions: Sequence[tuple[float, float]],
        *,
        overlap: Sequence[tuple[float, float]] = (),
        apart_of: Callable[[Sequence[tuple[float, float]]], Apart] | None = None,
    ) -> Diarization:
        """`overlap`: where two people talk at once (the segmentation model's count): windows
        that are mostly overlap mix two voices, so they do not shape the clusters; each takes
        the speaker of its nearest cluster afterwards. `apart_of`: given the clustered
        windows' spans, which pairs are known to be different voices (clustering.py)."""
        samples, rate = clip.samples, clip.sample_rate
        regions = [
            piece
            for a, b in _clean_regions(regions, len(samples) / rate)
            for piece in split_at_pauses(samples, rate, a, b, self.min_pause_s)
        ]
        min_len = self.embedder.min_duration_s
        windows: list[_Window] = []
        audio: list[np.ndarray] = []
        short: list[tuple[float, float]] = []
        for a, b in regions:
            if b - a < min_len:
                short.append((a, b))
                continue
            for w in _windows(a, b, self.window_s, self.hop_s):
                piece = samples[round(w.start * rate) : round(w.end * rate)]
                if len(piece) < min_len * rate:
                    continue  # rounding at the clip's end
                if float(np.sqrt(np.mean(np.square(piece, dtype=np.float64)))) < _SILENCE_RMS:
                    continue
                windows.append(w)
                audio.append(piece)

        if not windows:
            # Nothing long enough to tell voices apart: one unknown speaker, if any speech.
            voiced = [r for r in short if self._has_signal(samples, rate, r)]
            turns = self._merge([(a, b, 0) for a, b in voiced])
            return Diarization(turns, {})

        emb = self.embedder.embed_many(audio, rate)
        mixed = np.array([_share_inside(w.start, w.end, overlap) for w in windows]) > (
            self.max_overlap_share
        )
        if not (overlap and mixed.any() and not mixed.all()):
            mixed[:] = False
        shaping = [(w.start, w.end) for w, m in zip(windows, mixed, strict=True) if not m]
        apart = apart_of(shaping) if apart_of is not None else None
        if mixed.any():
            clean = cluster_embeddings(emb[~mixed], self.clustering, apart=apart)
            labels = np.empty(len(windows), dtype=np.int64)
            labels[~mixed] = clean
            labels[mixed] = np.argmax(emb[mixed] @ centroids(emb[~mixed], clean).T, axis=1)
            labels = relabel_by_first_appearance(labels)
        else:
            labels = cluster_embeddings(emb, self.clustering, apart=apart)
        pieces = [(w.core_start, w.core_end, int(c)) for w, c in zip(windows, labels, strict=True)]
        cores = np.array([(w.core_start + w.core_end) / 2 for w in windows])
        for a, b in short:
            if self._has_signal(samples, rate, (a, b)):
                nearest = int(np.argmin(np.abs(cores - (a + b) / 2)))
                pieces.append((a, b, int(labels[nearest])))

        raw = self._merge(sorted(pieces))
        # Labels follow first appearance in the final turns (a short region may come first).
        turns = relabel_turns(raw)
        rename = {old.speaker: new.speaker for old, new in zip(raw, turns, strict=True)}
        cents = centroids(emb, labels)
        embeddings = {rename[speaker_label(c)]: cents[c] for c in range(len(cents))}
        log.debug(
            "diarized",
            regions=len(regions),
            windows=len(windows),
            speakers=len(embeddings),
            turns=len(turns),
        )
        return Diarization(turns, embeddings)

    @staticmethod
    def _has_signal(samples: np.ndarray, rate: int, region: tuple[float, float]) -> bool:
        piece = samples[round(region[0] * rate) : round(region[1] * rate)]
        return piece.size > 0 and float(np.sqrt(np.mean(np.square(piece, dtype=np.float64)))) >= (
            _SILENCE_RMS
        )

    def _merge(self, pieces: list[tuple[float, float, int]]) -> list[Turn]:
        turns: list[Turn] = []
        for a, b, c in sorted(pieces):
            name = speaker_label(c)
            # Pieces never overlap: regions are disjoint and window cores tile each region.
            if turns and turns[-1].speaker == name and a - turns[-1].end <= self.merge_gap_s:
                turns[-1] = Turn(turns[-1].start, max(turns[-1].end, b), name)
            else:
                turns.append(Turn(a, b, name))
        return [Turn(round(t.start, 3), round(t.end, 3), t.speaker) for t in turns]
