"""Scoring for the speech benchmarks: reference readers (RTTM, UEM, STM), word error rate and
diarization error rate. numpy and scipy only (no jiwer, no pyannote.metrics).

WER: both sides normalised the same way (lower case, apostrophes dropped, other punctuation
→ space, whitespace collapsed; numbers left as written), then a word-level Levenshtein
alignment; substitutions, deletions and insertions are counted from the backtrace.

DER: on a grid of `frame_s` frames (10 ms) inside the scored regions (the UEM, or the whole
clip), as NIST md-eval scores it with no collar and overlap scored: in each frame with
N_ref reference and N_hyp hypothesis speakers, missed = max(0, N_ref − N_hyp), false alarm =
max(0, N_hyp − N_ref), confusion = min(N_ref, N_hyp) − N_correct, where N_correct counts the
reference speakers whose mapped hypothesis speaker is also active. The one-to-one speaker
mapping maximises the total overlap time (Hungarian, scipy's linear_sum_assignment). DER is
(missed + false alarm + confusion) / total reference speech, overlapped speech counted once
per speaker.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import linear_sum_assignment

# --- references -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SpeakerTurn:
    start: float
    end: float
    speaker: str


def read_rttm(path: Path) -> dict[str, list[SpeakerTurn]]:
    """File id → its SPEAKER turns (start, start + duration, name)."""
    out: dict[str, list[SpeakerTurn]] = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if not f or f[0] != "SPEAKER":
            continue
        start, dur = float(f[3]), float(f[4])
        out.setdefault(f[1], []).append(SpeakerTurn(start, start + dur, f[7]))
    return out


def read_uem(path: Path) -> dict[str, list[tuple[float, float]]]:
    """File id → scored (start, end) regions."""
    out: dict[str, list[tuple[float, float]]] = {}
    for line in path.read_text().splitlines():
        f = line.split()
        if len(f) >= 4:
            out.setdefault(f[0], []).append((float(f[2]), float(f[3])))
    return out


@dataclass(frozen=True, slots=True)
class StmLine:
    start: float
    end: float
    speaker: str
    text: str


def read_stm(path: Path) -> list[StmLine]:
    """`file channel speaker start end text...` lines, sorted by start."""
    lines = []
    for line in path.read_text().splitlines():
        f = line.split(maxsplit=5)
        if len(f) >= 5 and not line.startswith(";;"):
            lines.append(StmLine(float(f[3]), float(f[4]), f[2], f[5] if len(f) > 5 else ""))
    return sorted(lines, key=lambda x: (x.start, x.end))


# --- WER ------------------------------------------------------------------------------------

_APOSTROPHES = re.compile(r"['’`]")
_PUNCT = re.compile(r"[^\w\s]|_")


def normalise(text: str) -> list[str]:
    """Lower case, apostrophes dropped ("didn't" → "didnt"), other punctuation → space."""
    text = _APOSTROPHES.sub("", text.lower())
    return _PUNCT.sub(" ", text).split()


@dataclass(frozen=True, slots=True)
class WerResult:
    ref_words: int
    hyp_words: int
    substitutions: int
    deletions: int
    insertions: int
    # (op, ref word, hyp word) for every error, in order; op is S, D or I.
    errors: list[tuple[str, str, str]]

    @property
    def wer(self) -> float:
        s, d, i = self.substitutions, self.deletions, self.insertions
        return (s + d + i) / self.ref_words if self.ref_words else float("nan")


def word_errors(ref: Sequence[str], hyp: Sequence[str]) -> WerResult:
    """Minimum-edit alignment of two word lists (all edits cost 1)."""
    n, m = len(ref), len(hyp)
    d = np.zeros((n + 1, m + 1), dtype=np.int64)
    d[:, 0] = np.arange(n + 1)
    d[0, :] = np.arange(m + 1)
    for i in range(1, n + 1):
        for j in range(1, m + 1):
            sub = d[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1])
            d[i, j] = min(sub, d[i - 1, j] + 1, d[i, j - 1] + 1)
    i, j = n, m
    errors: list[tuple[str, str, str]] = []
    s = dl = ins = 0
    while i > 0 or j > 0:
        if i > 0 and j > 0 and d[i, j] == d[i - 1, j - 1] + (ref[i - 1] != hyp[j - 1]):
            if ref[i - 1] != hyp[j - 1]:
                s += 1
                errors.append(("S", ref[i - 1], hyp[j - 1]))
            i, j = i - 1, j - 1
        elif i > 0 and d[i, j] == d[i - 1, j] + 1:
            dl += 1
            errors.append(("D", ref[i - 1], ""))
            i -= 1
        else:
            ins += 1
            errors.append(("I", "", hyp[j - 1]))
            j -= 1
    return WerResult(n, m, s, dl, ins, errors[::-1])


# --- DER ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class DerResult:
    scored_s: float  # length of the scored regions
    reference_s: float  # reference speech, once per speaker (the denominator)
    missed_s: float
    false_alarm_s: float
    confusion_s: float
    ref_speakers: int
    hyp_speakers: int  # with any speech inside the scored regions
    mapping: dict[str, str]  # reference speaker → hypothesis speaker (optimal)

    @property
    def der(self) -> float:
        err = self.missed_s + self.false_alarm_s + self.confusion_s
        return err / self.reference_s if self.reference_s else float("nan")


def _activity(
    turns: Iterable[SpeakerTurn], speakers: list[str], n: int, frame_s: float
) -> np.ndarray:
    """(n frames, speakers) bool: a frame is active when its centre lies inside a turn."""
    act = np.zeros((n, len(speakers)), dtype=bool)
    index = {s: k for k, s in enumerate(speakers)}
    centres = (np.arange(n) + 0.5) * frame_s
    for t in turns:
        a = int(np.searchsorted(centres, t.start, side="left"))
        b = int(np.searchsorted(centres, t.end, side="left"))
        act[a:b, index[t.speaker]] = True
    return act


def diarization_error(
    reference: Sequence[SpeakerTurn],
    hypothesis: Sequence[SpeakerTurn],
    *,
    duration_s: float,
    uem: Sequence[tuple[float, float]] | None = None,
    frame_s: float = 0.01,
) -> DerResult:
    n = int(np.ceil(duration_s / frame_s - 1e-9))
    centres = (np.arange(n) + 0.5) * frame_s
    scored = np.zeros(n, dtype=bool)
    for a, b in uem if uem is not None else [(0.0, duration_s)]:
        scored |= (centres >= a) & (centres < b)
    ref_names = sorted({t.speaker for t in reference})
    hyp_names = sorted({t.speaker for t in hypothesis})
    ref = _activity(reference, ref_names, n, frame_s)[scored]
    hyp = _activity(hypothesis, hyp_names, n, frame_s)[scored]
    # Overlap time of every (reference, hypothesis) pair; the mapping maximises its sum.
    overlap = ref.T.astype(np.int64) @ hyp.astype(np.int64)
    rows, cols = linear_sum_assignment(overlap, maximize=True) if overlap.size else ([], [])
    mapping = {ref_names[r]: hyp_names[c] for r, c in zip(rows, cols, strict=True)}
    n_ref = ref.sum(axis=1)
    n_hyp = hyp.sum(axis=1)
    n_correct = np.zeros(len(ref), dtype=np.int64)
    for r, c in zip(rows, cols, strict=True):
        n_correct += ref[:, r] & hyp[:, c]
    missed = np.maximum(0, n_ref - n_hyp).sum()
    false_alarm = np.maximum(0, n_hyp - n_ref).sum()
    confusion = (np.minimum(n_ref, n_hyp) - n_correct).sum()
    return DerResult(
        scored_s=float(scored.sum() * frame_s),
        reference_s=float(n_ref.sum() * frame_s),
        missed_s=float(missed * frame_s),
        false_alarm_s=float(false_alarm * frame_s),
        confusion_s=float(confusion * frame_s),
        ref_speakers=len(ref_names),
        hyp_speakers=int((hyp.sum(axis=0) > 0).sum()),
        mapping=mapping,
    )


CALL = "two-speaker-call"
MEETING = "meeting-clips"
MEETING_TRAIN = "meeting-clips-train"  # nine more AMI excerpts (trn01 … trn09)


def reference_clips(
    data: Path,
) -> list[tuple[str, Path, list[SpeakerTurn], list[tuple[float, float]] | None]]:
    """The speech data's scored clips: (key, wav, reference turns, UEM or None) — the call,
    the two dev meeting clips, and the nine train meeting clips where the data has them."""
    rttm_call = read_rttm(data / CALL / "sample.rttm")
    out = [("call", data / CALL / "sample.wav", rttm_call.get("sample", []), None)]
    return out + meeting_clips(data)


def meeting_clips(
    data: Path,
) -> list[tuple[str, Path, list[SpeakerTurn], list[tuple[float, float]] | None]]:
    """The AMI meeting excerpts, each on its UEM: dev00, dev01, then trn01 … (when present)."""
    out = []
    for folder, name in ((MEETING, "debug.development"), (MEETING_TRAIN, "debug.train")):
        rttm_path = data / folder / f"{name}.rttm"
        if not rttm_path.is_file():
            continue
        rttm, uem = read_rttm(rttm_path), read_uem(data / folder / f"{name}.uem")
        for key in sorted(uem):
            wav = data / folder / f"{key}.wav"
            if wav.is_file():
                out.append((key, wav, rttm.get(key, []), uem.get(key)))
    return out


def solo_regions(turns: Sequence[SpeakerTurn], speaker: str) -> list[tuple[float, float]]:
    """Where `speaker` talks and no other reference speaker does (for enrollment)."""
    mine = sorted((t.start, t.end) for t in turns if t.speaker == speaker)
    others = sorted((t.start, t.end) for t in turns if t.speaker != speaker)
    out: list[tuple[float, float]] = []
    for a, b in mine:
        pieces = [(a, b)]
        for oa, ob in others:
            nxt = []
            for pa, pb in pieces:
                if ob <= pa or oa >= pb:
                    nxt.append((pa, pb))
                    continue
                if oa > pa:
                    nxt.append((pa, oa))
                if ob < pb:
                    nxt.append((ob, pb))
            pieces = nxt
        out += pieces
    return sorted(p for p in out if p[1] > p[0])
