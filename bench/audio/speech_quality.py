"""Speech quality and speed of the audio pipeline's fast path on real recordings.

Through the real pipeline, in process: the models are built from `Settings` (the embedded
defaults, or what AUDIO_PIPELINE_* variables choose: the segmentation model for speech, the
segmented diarizer, faster-whisper on the bundled Whisper base int8, the heuristic emotion)
and loaded once; then every clip goes through what
POST /v1/transcribe runs for it, without the HTTP layer: `decode_audio` on the WAV file's bytes,
`transcribe_clip` (VAD → diarization → STT → speaker identity → emotion) with a fresh
`SessionSpeakers`, and the transcript's JSONL append (`append_records`, as the runtime does).
The events file the runtime also writes is not included.

Measures
1. WER of the two-speaker call against its word-level reference (sample.stm);
2. DER (no collar, overlap scored, 10 ms frames, optimal one-to-one speaker mapping) of the
   diarizer's speaker turns on the call and on the two AMI meeting clips (inside their UEM),
   and the number of speakers found; the DER of the transcript segments' speakers is printed
   beside it (segments cover only the words, so they miss speech the turns hold);
3. RTF (processing time / audio duration) of the whole fast path per clip, median of
   `--repeats` runs after one warm-up, with the stage timings `transcribe_clip` reports;
4. cross-clip identity: each reference speaker of dev00 is enrolled into a fresh
   EnrollmentBank from their reference turns (only where nobody else talks, then VAD, as
   POST /v1/enroll does); dev01 then goes through the pipeline with a SessionSpeakers on that
   bank, and each dev01 reference speaker is checked against the person their diarized voice
   was named.

Diagnostics printed beside them: how similar the reference speakers' own voices are in the
embedder's space (what the diarizer can separate), and (`--stt-diagnosis`, on by default) the
STT stage alone on the VAD regions as the pipeline passes them vs on one span, with the number
of Whisper encoder passes each costs.

Targets: RTF ≤ 0.15 (2 cores), WER ≤ 20 % and DER ≤ 15 % on the call, DER ≤ 25 % on each
meeting clip.

    uv run python bench/audio/speech_quality.py [--data ../shared/data/speech] [--repeats 3]
"""

from __future__ import annotations

import contextlib
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/machine.py
from machine import console, print_footer, print_header
from scoring import (
    DerResult,
    SpeakerTurn,
    diarization_error,
    normalise,
    read_rttm,
    read_stm,
    read_uem,
    solo_regions,
    word_errors,
)

from audio_pipeline.audio import AudioClip, decode_audio
from audio_pipeline.config import Settings
from audio_pipeline.pipeline import ClipResult, Models, transcribe_clip
from audio_pipeline.speakers import Turn
from audio_pipeline.speakers.enrollment import EnrollmentBank, SessionSpeakers
from audio_pipeline.vad import SPEECH_PAD_S, pad_regions
from her_os_shared.jsonl import append_records
from her_os_shared.transcript import TranscriptPayload

TARGET_RTF = 0.15
TARGET_WER = 0.20
TARGET_DER = 0.15  # the call (issue 27)
TARGET_DER_MEETING = 0.25  # each dev meeting clip (issue 27)
STAGES = ("vad", "diarization", "stt", "speaker_id", "emotion")

CALL = "two-speaker-call"
MEETING = "meeting-clips"
NEEDED = (
    f"{CALL}/sample.wav",
    f"{CALL}/sample.rttm",
    f"{CALL}/sample.stm",
    f"{MEETING}/dev00.wav",
    f"{MEETING}/dev01.wav",
    f"{MEETING}/debug.development.rttm",
    f"{MEETING}/debug.development.uem",
)


@dataclass
class Run:
    decode_s: float
    write_s: float
    result: ClipResult
    turns: list[Turn]

    @property
    def total_s(self) -> float:
        return self.decode_s + self.result.timings_s.get("total", 0.0) + self.write_s


@dataclass
class Clip:
    key: str  # "call", "dev00", "dev01"
    path: Path
    reference: list[SpeakerTurn]
    uem: list[tuple[float, float]] | None
    data: bytes = b""
    clip: AudioClip | None = None
    runs: list[Run] = field(default_factory=list)


def bench_settings(work: Path, **values: object) -> Settings:
    """The pipeline's settings (its defaults, or AUDIO_PIPELINE_*) with every folder under
    `work`; prints the backends they choose."""
    settings = Settings(
        allow_insecure_no_token=True,
        models_dir=work / "models",
        enrollment_dir=work / "enrollment",
        transcripts_dir=work / "transcripts",
        events_dir=work / "events",
        **values,  # type: ignore[arg-type]
    )
    console.print(
        f"backends: stt {settings.stt_backend} ({settings.stt_compute_type}, "
        f"{settings.stt_threads} threads), vad {settings.vad_backend}, diarization "
        f"{settings.diarization_backend} (speaker embedder {settings.speaker_embedder}), "
        f"emotion {settings.emotion_backend}"
    )
    return settings


def fast_path(
    models: Models, data: bytes, speakers: SessionSpeakers,
    transcripts: Path, session_id: str,
) -> Run:  # fmt: skip
    """What POST /v1/transcribe does with one upload, minus HTTP and the events file."""
    t = time.perf_counter()
    clip = decode_audio(data, max_seconds=Settings.model_fields["max_audio_seconds"].default)
    decode_s = time.perf_counter() - t
    result = transcribe_clip(models, clip, speakers=speakers, id_prefix="c0000")
    turns = list(result.turns)  # empty when no speech is found (no diarization then)
    t = time.perf_counter()
    if result.segments:
        payload = TranscriptPayload(
            session_id=session_id,
            device_id="bench",
            session_started_at=datetime.now(UTC),
            segments=result.segments,
        )
        append_records(transcripts, session_id, [payload])
    write_s = time.perf_counter() - t
    return Run(decode_s, write_s, result, turns)


def as_turns(turns: Sequence[Turn]) -> list[SpeakerTurn]:
    return [SpeakerTurn(t.start, t.end, t.speaker) for t in turns]


def segment_turns(result: ClipResult) -> list[SpeakerTurn]:
    """What the transcript says of who spoke when: each segment's speaker over its span, and
    the other voices it records as overlapping it."""
    return [SpeakerTurn(s.start, s.end, s.speaker) for s in result.segments] + [
        SpeakerTurn(o.start, o.end, o.speaker) for s in result.segments for o in s.overlap
    ]


def same_output(a: Run, b: Run) -> bool:
    def words(r: Run) -> list[tuple[str, float, float, str]]:
        return [(s.speaker, s.start, s.end, s.text) for s in r.result.segments]

    return a.turns == b.turns and words(a) == words(b)


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


def verdict(ok: bool) -> str:
    return "[green]met[/]" if ok else "[red]missed[/]"


# --- sections -----------------------------------------------------------------------------


def report_speed(clips: list[Clip]) -> tuple[float, str, dict[str, float]]:
    """Median-run stage timings per clip; returns the overall RTF, the dominant stage and
    each clip's RTF."""
    table = Table(title="RTF of the whole fast path (median run; seconds)")
    for col in ("clip", "audio", "VAD regions", "decode", "vad", "diar.", "stt", "spk id",
                "emotion", "rest", "write", "total", "RTF", "every run"):  # fmt: skip
        table.add_column(col, justify="left" if col == "clip" else "right")
    audio = processing = 0.0
    stage_sums = dict.fromkeys(("decode", *STAGES, "rest", "write"), 0.0)
    per_clip: dict[str, float] = {}
    for c in clips:
        assert c.clip is not None
        runs = sorted(c.runs, key=lambda r: r.total_s)
        med = runs[len(runs) // 2]
        t = med.result.timings_s
        rest = t.get("total", 0.0) - sum(t.get(s, 0.0) for s in STAGES)
        parts = {"decode": med.decode_s, **{s: t.get(s, 0.0) for s in STAGES}, "rest": rest,
                 "write": med.write_s}  # fmt: skip
        for k, v in parts.items():
            stage_sums[k] += v
        dur = c.clip.duration_s
        audio += dur
        processing += med.total_s
        per_clip[c.key] = med.total_s / dur
        table.add_row(
            c.key, f"{dur:.1f}", str(len(med.result.regions)),
            *(f"{v:.3f}" for v in parts.values()), f"{med.total_s:.3f}",
            f"{med.total_s / dur:.3f}", ", ".join(f"{r.total_s:.2f}" for r in c.runs),
        )  # fmt: skip
    console.print(table)
    console.print(
        "rest: grouping words into segments; write: the transcript's JSONL append (fsync); "
        "every run: total seconds of each measured run"
    )
    rtf = processing / audio
    dominant = max(stage_sums, key=lambda k: stage_sums[k])
    shares = ", ".join(f"{k} {100 * v / processing:.0f} %" for k, v in stage_sums.items())
    console.print(f"all clips: {processing:.2f} s for {audio:.1f} s of audio → RTF {rtf:.3f}")
    console.print(f"share of the processing time: {shares}")
    return rtf, dominant, per_clip


def report_wer(call: Clip, stm_path: Path) -> float:
    ref_lines = read_stm(stm_path)
    ref = normalise(" ".join(x.text for x in ref_lines))
    segs = sorted(call.runs[0].result.segments, key=lambda s: (s.start, s.end))
    hyp = normalise(" ".join(s.text for s in segs))
    w = word_errors(ref, hyp)
    console.rule("WER: two-speaker call vs sample.stm")
    console.print("transcript (speaker, start–end, text):")
    for s in segs:
        console.print(f"  {s.speaker:>10} {s.start:6.2f}–{s.end:6.2f}  {s.text}")
    console.print(f"reference ({w.ref_words} words): {' '.join(ref)}", soft_wrap=True)
    console.print(f"hypothesis ({w.hyp_words} words): {' '.join(hyp)}", soft_wrap=True)
    console.print(
        f"substitutions {w.substitutions}, deletions {w.deletions}, insertions {w.insertions} "
        f"→ [bold]WER {pct(w.wer)}[/] (target ≤ {pct(TARGET_WER)}: "
        f"{verdict(w.wer <= TARGET_WER)})"
    )
    if w.errors:
        shown = ", ".join(
            {"S": f"{r}→{h}", "D": f"-{r}", "I": f"+{h}"}[op] for op, r, h in w.errors
        )
        console.print(f"errors: {shown}", soft_wrap=True)
    return w.wer


def report_der(clips: list[Clip]) -> dict[str, DerResult]:
    table = Table(title="DER (no collar, overlap scored, 10 ms frames, optimal mapping)")
    for col in ("clip", "hypothesis", "scored s", "ref speech s", "missed", "false alarm",
                "confusion", "DER", "speakers ref / found"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("clip", "hypothesis") else "right")
    out: dict[str, DerResult] = {}
    for c in clips:
        assert c.clip is not None
        run = c.runs[0]
        for name, hyp in (("diarizer turns", as_turns(run.turns)),
                          ("transcript segments", segment_turns(run.result))):  # fmt: skip
            d = diarization_error(c.reference, hyp, duration_s=c.clip.duration_s, uem=c.uem)
            if name == "diarizer turns":
                out[c.key] = d
            ref_s = d.reference_s or float("nan")
            table.add_row(
                c.key, name, f"{d.scored_s:.1f}", f"{d.reference_s:.2f}",
                f"{d.missed_s:.2f} ({pct(d.missed_s / ref_s)})",
                f"{d.false_alarm_s:.2f} ({pct(d.false_alarm_s / ref_s)})",
                f"{d.confusion_s:.2f} ({pct(d.confusion_s / ref_s)})",
                f"[bold]{pct(d.der)}[/]", f"{d.ref_speakers} / {d.hyp_speakers}",
            )  # fmt: skip
    console.print(table)
    for c in clips:
        run = c.runs[0]
        named = {k: v.label for k, v in run.result.speakers.items()}
        console.print(
            f"{c.key}: {len(run.result.regions)} VAD regions, {len(run.turns)} turns, "
            f"speakers named {named}; mapping ref → hyp {out[c.key].mapping}"
        )
    return out


# Solo speech needed to say anything about a reference speaker's voice (the embedder's minimum).
MIN_SOLO_S = 0.5


def solo_speech(clip: Clip, person: str) -> np.ndarray | None:
    """`person`'s reference speech where nobody else talks, joined; None when there is too
    little (a speaker heard only in overlap, a silent clip)."""
    assert clip.clip is not None
    parts = [clip.clip.slice(a, b).samples for a, b in solo_regions(clip.reference, person)]
    joined = np.concatenate(parts).astype(np.float32) if parts else np.zeros(0, np.float32)
    return joined if len(joined) >= MIN_SOLO_S * clip.clip.sample_rate else None


def enroll_reference_speakers(models: Models, bank: EnrollmentBank, clip: Clip) -> dict[str, float]:
    """Each reference speaker of `clip`, enrolled as in POST /v1/enroll from their solo
    reference speech; returns the seconds of speech each embedding used."""
    assert clip.clip is not None
    used: dict[str, float] = {}
    for person in sorted({t.speaker for t in clip.reference}):
        solo = solo_speech(clip, person)
        if solo is None:
            console.print(f"{clip.key} {person}: no solo speech to enroll from, skipped")
            continue
        theirs = AudioClip(solo)
        # runtime._enroll: their speech found by VAD, at most 30 s of it, one embedding.
        speech = [theirs.slice(a, b).samples for a, b in models.vad.regions(theirs)]
        joined = np.concatenate(speech)[: 30 * theirs.sample_rate] if speech else solo
        if len(joined) < MIN_SOLO_S * theirs.sample_rate:
            console.print(f"{clip.key} {person}: the VAD kept too little speech, skipped")
            continue
        bank.enroll(person, models.embedder.embed(joined, theirs.sample_rate))
        used[person] = len(joined) / theirs.sample_rate
    return used


def report_identity(
    models: Models, enrol: Clip, target: Clip, work: Path
) -> tuple[int, int, int, int]:
    """Enroll `enrol`'s reference speakers, run `target`; returns (recognised, speakers, and
    of the enrolled speakers' solo speech in `target`: frames named right, frames)."""
    assert enrol.clip is not None and target.clip is not None
    console.rule(f"Cross-clip identity: enrolled from {enrol.key}, recognised in {target.key}")
    names_a = sorted({t.speaker for t in enrol.reference})
    names_b = sorted({t.speaker for t in target.reference})
    shared = sorted(set(names_a) & set(names_b))
    console.print(
        f"reference speakers: {enrol.key} {names_a}, {target.key} {names_b}; "
        f"shared names: {shared or 'none'}"
    )
    bank = EnrollmentBank(
        work / "identity-bank", dim=models.embedder.dim, embedder_id=models.embedder.embedder_id
    )
    used = enroll_reference_speakers(models, bank, enrol)
    console.print(
        "enrolled: " + ", ".join(f"{p} ({s:.1f} s of solo speech)" for p, s in used.items())
    )
    styles = {p.person: [s.id for s in p.styles] for p in bank.list()}
    cents = {p: bank.centroid(ids[0]) for p, ids in styles.items()}
    if len(cents) == 2:
        a, b = cents.values()
        console.print(f"similarity between the two enrolled voices: {float(a @ b):.3f}")

    # Oracle segmentation: each target speaker's own solo reference speech vs the bank.
    for person in names_b:
        solo = solo_speech(target, person)
        if solo is None:
            console.print(f"  {target.key} {person}: no solo speech, not embedded")
            continue
        v = models.embedder.embed(solo, 16_000)
        sims = ", ".join(f"{p} {float(c @ v):.3f}" for p, c in cents.items())
        console.print(f"  {target.key} {person}, reference turns embedded directly: {sims}")

    run = fast_path(models, target.data, SessionSpeakers(bank), work / "tx", "identity")
    d = diarization_error(
        target.reference, as_turns(run.turns), duration_s=target.clip.duration_s, uem=target.uem
    )
    who = run.result.speakers
    table = Table(title=f"{target.key} through the pipeline with the enrolled bank")
    for col in ("reference speaker", "diarized as", "named", "similarity", "right person",
                "share of their solo speech named right"):  # fmt: skip
        table.add_column(col)
    # Time-weighted: frames where exactly one reference speaker talks and a turn is active.
    frame = 0.01
    n = int(np.ceil(target.clip.duration_s / frame))
    centres = (np.arange(n) + 0.5) * frame
    hyp_person: list[str | None] = [None] * n
    for t in run.turns:
        ident = who.get(t.speaker)
        for i in np.flatnonzero((centres >= t.start) & (centres < t.end)):
            hyp_person[i] = ident.person if ident else None
    recognised = solo_right = solo_all = 0
    for person in names_b:
        label = d.mapping.get(person)
        ident = who.get(label) if label else None
        ok = ident is not None and ident.person == person
        recognised += ok
        solo = np.zeros(n, dtype=bool)
        for a, b in solo_regions(target.reference, person):
            solo |= (centres >= a) & (centres < b)
        idx = np.flatnonzero(solo)
        right = sum(1 for i in idx if hyp_person[i] == person)
        if person in used:  # the share counts the voices that could be enrolled
            solo_right, solo_all = solo_right + right, solo_all + len(idx)
        sim = f"{ident.similarity:.3f}" if ident and ident.similarity is not None else "—"
        table.add_row(
            person, label or "—", ident.label if ident else "—", sim,
            "yes" if ok else "no", f"{right}/{len(idx)} frames ({pct(right / max(1, len(idx)))})",
        )  # fmt: skip
    console.print(table)
    extra = {k: v.label for k, v in who.items() if k not in d.mapping.values()}
    if extra:
        console.print(f"diarized voices mapped to no reference speaker: {extra}")
    console.print(f"DER of this run: {pct(d.der)} ({d.hyp_speakers} speakers found)")
    return recognised, len(names_b), solo_right, solo_all


def report_voice_separability(models: Models, clips: list[Clip]) -> None:
    """Cosine similarity of the reference speakers' own solo speech (one embedding each), with
    the same embedder the diarizer uses: how far apart the voices are in its space (the
    diarizer splits voices whose 1.5 s windows average below ~0.5 similarity)."""
    for c in clips:
        assert c.clip is not None
        vecs = {}
        for n in sorted({t.speaker for t in c.reference}):
            solo = solo_speech(c, n)
            if solo is None:
                console.print(f"{c.key}: {n} has no solo speech, left out")
            else:
                vecs[n] = models.embedder.embed(solo, 16_000)
        names = sorted(vecs)
        pairs = [
            f"{a}–{b} {float(vecs[a] @ vecs[b]):.3f}"
            for i, a in enumerate(names)
            for b in names[i + 1 :]
        ]
        console.print(
            f"{c.key}: reference speakers' solo speech, cosine between them: {', '.join(pairs)}"
        )


@contextlib.contextmanager
def count_encoder_passes() -> Iterator[list[int]]:
    """Counts Whisper encoder passes (faster-whisper's WhisperModel.encode) while active."""
    from faster_whisper.transcribe import WhisperModel

    count = [0]
    original = WhisperModel.encode

    def encode(self: WhisperModel, features: object) -> object:
        count[0] += 1
        return original(self, features)

    WhisperModel.encode = encode  # type: ignore[method-assign]
    try:
        yield count
    finally:
        WhisperModel.encode = original  # type: ignore[method-assign]


def report_stt_spans(models: Models, clips: list[Clip]) -> None:
    """Diagnosis of the STT stage (not the fast path): the configured STT on the clip's VAD
    regions, as the pipeline calls it, and on one span from the first region's start to the
    last one's end; time and Whisper encoder passes of each."""
    if models.stt.name != "faster-whisper":
        return
    table = Table(title="STT stage alone: per VAD region (as the pipeline) vs one span")
    for col in ("clip", "VAD regions", "per region s", "encoder passes", "one span s",
                "encoder passes "):  # fmt: skip
        table.add_column(col, justify="left" if col == "clip" else "right")
    for c in clips:
        assert c.clip is not None
        regions = c.runs[0].result.regions
        if not regions:
            continue
        row = [c.key, str(len(regions))]
        for spans in (regions, [(regions[0][0], regions[-1][1])]):
            with count_encoder_passes() as passes:
                t = time.perf_counter()
                models.stt.transcribe(c.clip, list(spans))
                row += [f"{time.perf_counter() - t:.2f}", str(passes[0])]
        table.add_row(*row)
    console.print(table)


def report_pad_study(models: Models, clips: list[Clip], stm_path: Path) -> None:
    """How much the STT stage depends on where its spans start: the segmentation model's
    speech widened by 0–0.5 s (SPEECH_PAD_S is the default), the call's WER and each clip's
    STT seconds. Whisper's output moves with the window start; on a short reference that
    moves the WER by several points."""
    if not models.speech_from_diarizer:
        return
    reference = [w for line in read_stm(stm_path) for w in normalise(line.text)]
    table = Table(title="STT on the segmentation model's speech, padded by …")
    for col in ("pad s", "call WER", *(f"{c.key} STT s" for c in clips)):
        table.add_column(col, justify="right")
    speech = {}
    for c in clips:
        assert c.clip is not None
        speech[c.key] = models.diarizer.diarize_speech(c.clip).speech  # type: ignore[attr-defined]
    for pad in (0.0, 0.1, 0.2, 0.3, SPEECH_PAD_S, 0.5):
        row = [f"{pad:.1f}" + (" (default)" if pad == SPEECH_PAD_S else "")]
        seconds = []
        for c in clips:
            assert c.clip is not None
            t = time.perf_counter()
            out = models.stt.transcribe(c.clip, pad_regions(speech[c.key], c.clip.duration_s, pad))
            seconds.append(f"{time.perf_counter() - t:.2f}")
            if c.key == "call":
                said = [w for s in out for word in s.words for w in normalise(word.text)]
                row.append(pct(word_errors(reference, said).wer))
        table.add_row(*row, *seconds)
    console.print(table)


# --- main ---------------------------------------------------------------------------------


def main(
    data: Annotated[
        Path, typer.Option(help="the speech evaluation data (never copied into the repository)")
    ] = Path("../shared/data/speech"),
    repeats: Annotated[int, typer.Option(min=1, help="measured runs per clip")] = 3,
    stt_diagnosis: Annotated[
        bool, typer.Option(help="also time the STT stage per VAD region vs on one span")
    ] = True,
    pad_study: Annotated[
        bool, typer.Option(help="also run STT on the speech padded by 0–0.5 s (about 1 min)")
    ] = False,
    speaker_embedder: Annotated[
        str | None, typer.Option(help="campplus or voicefilter (default: the settings')")
    ] = None,
) -> None:
    missing = [p for p in NEEDED if not (data / p).is_file()]
    if missing:
        console.print(
            f"[red]speech data not found under {data.resolve()}[/] (missing: "
            f"{', '.join(missing)}); pass --data PATH to the shared data's speech folder "
            "(bench/README.md)"
        )
        raise typer.Exit(2)

    from her_os_shared.logging import configure_logging

    configure_logging("bench", "warning", "json")  # the pipeline logs every clip at info
    print_header("audio pipeline: speech quality and speed of the fast path")

    rttm_call = read_rttm(data / CALL / "sample.rttm")
    rttm_meet = read_rttm(data / MEETING / "debug.development.rttm")
    uem_meet = read_uem(data / MEETING / "debug.development.uem")
    clips = [
        Clip("call", data / CALL / "sample.wav", rttm_call["sample"], None),
        Clip("dev00", data / MEETING / "dev00.wav", rttm_meet["dev00"], uem_meet["dev00"]),
        Clip("dev01", data / MEETING / "dev01.wav", rttm_meet["dev01"], uem_meet["dev01"]),
    ]

    with tempfile.TemporaryDirectory(prefix="bench-audio-", ignore_cleanup_errors=True) as tmp:
        work = Path(tmp)
        settings = bench_settings(
            work, **({"speaker_embedder": speaker_embedder} if speaker_embedder else {})
        )
        models = Models.from_settings(settings)
        t = time.perf_counter()
        with console.status("loading the models (assembling the bundled Whisper model)"):
            models.load()
        console.print(f"models loaded in {time.perf_counter() - t:.1f} s")

        for c in clips:
            c.data = c.path.read_bytes()
            c.clip = decode_audio(c.data, max_seconds=settings.max_audio_seconds)
        empty_bank = EnrollmentBank.from_settings(settings)
        with console.status("warm-up run (call)"):
            cold = fast_path(models, clips[0].data, SessionSpeakers(empty_bank),
                             settings.transcripts_dir, "warmup")  # fmt: skip
        console.print(f"warm-up (first clip after load): {cold.total_s:.2f} s for the call")
        for c in clips:
            for i in range(repeats):
                with console.status(f"{c.key}: run {i + 1}/{repeats}"):
                    run = fast_path(models, c.data, SessionSpeakers(empty_bank),
                                    settings.transcripts_dir, f"{c.key}-{i}")  # fmt: skip
                c.runs.append(run)
                console.print(f"{c.key}: run {i + 1}/{repeats}: {run.total_s:.2f} s")
            same = all(same_output(c.runs[0], r) for r in c.runs[1:])
            console.print(f"{c.key}: output identical across runs: {'yes' if same else 'NO'}")

        rtf, dominant, per_clip = report_speed(clips)
        wer = report_wer(clips[0], data / CALL / "sample.stm")
        console.rule("DER")
        ders = report_der(clips)
        report_voice_separability(models, clips)
        recognised, total, _, _ = report_identity(models, clips[1], clips[2], work)
        if stt_diagnosis:
            console.rule("Diagnosis: the STT stage")
            report_stt_spans(models, clips)
        if pad_study:
            report_pad_study(models, clips, data / CALL / "sample.stm")

    console.rule("Targets")
    der_call = ders["call"].der
    console.print(
        f"RTF ≤ {TARGET_RTF} (whole fast path, all clips): {rtf:.3f} — {verdict(rtf <= TARGET_RTF)}"
        f" (largest share: {dominant}); per clip: "
        + ", ".join(f"{k} {v:.3f} {verdict(v <= TARGET_RTF)}" for k, v in per_clip.items())
    )
    console.print(f"WER ≤ {pct(TARGET_WER)} (call): {pct(wer)} — {verdict(wer <= TARGET_WER)}")
    console.print(
        f"DER ≤ {pct(TARGET_DER)} (call, diarizer turns): {pct(der_call)} — "
        f"{verdict(der_call <= TARGET_DER)}"
    )
    for k in ("dev00", "dev01"):
        d = ders[k]
        console.print(
            f"DER ≤ {pct(TARGET_DER_MEETING)} ({k}, diarizer turns): {pct(d.der)} — "
            f"{verdict(d.der <= TARGET_DER_MEETING)}; speakers {d.hyp_speakers} found for "
            f"{d.ref_speakers}"
        )
    console.print(f"cross-clip identity: {recognised}/{total} dev01 speakers named right")
    print_footer()


if __name__ == "__main__":
    typer.run(main)
