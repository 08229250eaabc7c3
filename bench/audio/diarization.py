"""Diarization alone (no STT) on the real clips, backend against backend: DER with overlap
scored and no collar (10 ms frames, optimal mapping; the UEM on the meeting clips), split
into missed speech, false alarm and confusion; speakers found against the reference; the
overlap found; and the seconds the diarizer took per second of audio.

First, voice activity alone: Silero's regions and the segmentation model's speech against the
reference speech (missed and false alarm), the evidence for the default VAD.

Backends:
- `embedded`: Silero VAD regions → CAM++ 1.5 s windows → clustering (one speaker at a time);
- `segmented`: pyannote's segmentation-3.0 (ONNX) for speech, overlap and speaker count;
  the same windows for who is who, windows touching overlap left out of the clustering; two
  turns at once in overlap (speakers/segmented.py); `--step` sets its chunk step.

The clips are the whole files (the meeting clips are scored on their UEM, the first 30 s);
references without solo speech or silent clips are scored as they are (no speaker needs solo
speech here).

    uv run python bench/audio/diarization.py [--data ../shared/data/speech] [--step 1.0]
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/machine.py
from machine import console, print_footer, print_header
from scoring import CALL, MEETING, SpeakerTurn, diarization_error, reference_clips

from audio_pipeline.audio import AudioClip, decode_audio
from audio_pipeline.config import Settings
from audio_pipeline.speakers import create_embedder
from audio_pipeline.speakers.embedded import EmbeddedDiarizer
from audio_pipeline.speakers.segmented import SegmentedDiarizer
from audio_pipeline.stt import Region
from audio_pipeline.vad.segmentation import SegmentationVad
from audio_pipeline.vad.silero import SileroVad


@dataclass
class Clip:
    key: str
    clip: AudioClip
    reference: list[SpeakerTurn]
    uem: list[tuple[float, float]] | None


def load_clips(data: Path, max_seconds: float) -> list[Clip]:
    return [
        Clip(key, decode_audio(path.read_bytes(), max_seconds=max_seconds), ref, uem)
        for key, path, ref, uem in reference_clips(data)
    ]


def report_vad(clips: list[Clip], vads: dict[str, Callable[[AudioClip], list[Region]]]) -> None:
    """Speech found against the reference's speech (all speakers as one): missed speech and
    false alarm as shares of the reference speech, inside the UEM on the meeting clips. The
    padded rows are what STT gets (Silero pads 0.2 s, the segmentation VAD SPEECH_PAD_S); the
    unpadded segmentation row is the speech the segmented diarizer works on."""
    table = Table(title="Voice activity: each detector's speech against the reference speech")
    for col in ("clip", "VAD", "missed %", "false alarm %", "detection error %", "speech s (ref)"):
        table.add_column(col, justify="left" if col in ("clip", "VAD") else "right")
    for c in clips:
        reference = [SpeakerTurn(t.start, t.end, "speech") for t in c.reference]
        for name, regions in vads.items():
            found = [SpeakerTurn(a, b, "speech") for a, b in regions(c.clip)]
            d = diarization_error(reference, found, duration_s=c.clip.duration_s, uem=c.uem)
            ref_s = d.reference_s or float("nan")
            table.add_row(
                c.key,
                name,
                f"{d.missed_s / ref_s * 100:.1f}",
                f"{d.false_alarm_s / ref_s * 100:.1f}",
                f"{(d.missed_s + d.false_alarm_s) / ref_s * 100:.1f}",
                f"{d.reference_s - d.missed_s + d.false_alarm_s:.1f} ({d.reference_s:.1f})",
            )
    console.print(table)


def main(
    data: Annotated[Path, typer.Option(help="the speech data folder")] = Path(
        "../shared/data/speech"
    ),
    step: Annotated[float, typer.Option(help="the segmented backend's chunk step (s)")] = 1.0,
) -> None:
    if not (data / CALL / "sample.wav").is_file() or not (data / MEETING / "dev00.wav").is_file():
        console.print(f"[red]speech data not found under {data.resolve()}[/]; pass --data PATH")
        raise typer.Exit(2)
    from her_os_shared.logging import configure_logging

    configure_logging("bench", "warning", "json")
    print_header("audio pipeline: diarization backends on the real clips")
    settings = Settings(allow_insecure_no_token=True)
    clips = load_clips(data, settings.max_audio_seconds)
    embedder = create_embedder(settings)
    vad = SileroVad()
    segmented = SegmentedDiarizer(embedder, step_s=step)
    embedded = EmbeddedDiarizer(embedder)
    for loadable in (embedder, vad, segmented, embedded):
        loadable.load()
    report_vad(
        clips,
        {
            "Silero (padded 0.2 s)": vad.regions,
            "segmentation": lambda clip: segmented.speech(clip),
            "segmentation (padded 0.4 s)": SegmentationVad(segmented.segmentation).regions,
        },
    )

    table = Table(title=f"DER, overlap scored, no collar (segmented: step {step} s)")
    for col in ("clip", "backend", "DER %", "missed %", "false alarm %", "confusion %"):
        table.add_column(col, justify="right" if "%" in col else "left")
    table.add_column("speakers found/ref", justify="right")
    table.add_column("overlap found s", justify="right")
    table.add_column("diarize s/s audio", justify="right")
    for c in clips:
        runs = []
        t = time.perf_counter()
        regions = vad.regions(c.clip)
        turns = embedded.diarize(c.clip, regions)
        runs.append(("embedded (Silero VAD)", turns, time.perf_counter() - t, 0.0))
        t = time.perf_counter()
        result = segmented.run(c.clip)
        overlap = sum(b - a for a, b in result.overlap)
        runs.append(("segmented", result.turns, time.perf_counter() - t, overlap))
        for name, found, seconds, overlap_s in runs:
            hyp = [SpeakerTurn(x.start, x.end, x.speaker) for x in found]
            d = diarization_error(c.reference, hyp, duration_s=c.clip.duration_s, uem=c.uem)
            ref_s = d.reference_s or float("nan")
            table.add_row(
                c.key,
                name,
                f"{d.der * 100:.1f}",
                f"{d.missed_s / ref_s * 100:.1f}",
                f"{d.false_alarm_s / ref_s * 100:.1f}",
                f"{d.confusion_s / ref_s * 100:.1f}",
                f"{d.hyp_speakers}/{d.ref_speakers}",
                f"{overlap_s:.1f}",
                f"{seconds / c.clip.duration_s:.3f}",
            )
    console.print(table)
    console.print(
        "diarize s/s audio: this run's time for the whole clip (VAD included for embedded), "
        "2 ONNX threads; noisy on a shared VM"
    )
    print_footer()


if __name__ == "__main__":
    typer.run(main)
