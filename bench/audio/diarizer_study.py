"""What limits the embedded diarizer on the two-speaker call: its clustering settings or its
speaker embedder? Diarization alone (no STT), on the real clips.

Every clip goes through Silero VAD (what the documented figures used; the default VAD is now
the segmentation model, ADR 0025) and then the embedded diarizer (bundled ONNX d-vectors →
average-linkage clustering) with one variant of its settings at a time; DER is scored as in
speech_quality.py (no collar, overlap scored, 10 ms frames, optimal mapping; the UEM on the
meeting clips).

Beside each variant, the single-speaker controls: every reference speaker's solo speech
(their reference turns where nobody else talks, as regions of the same clip) diarized on its
own. One voice must come out as one speaker; a setting that "finds" the call's second caller
by splitting these is tuning, not a fix.

Variants:
- the distance threshold of the clustering (the embedder's default: 0.5 for VoiceFilter,
  0.645 for CAM++), lower values split more;
- an oracle count: the tree cut into exactly as many clusters as the reference has speakers
  (`ClusteringParams.num_speakers`), at the default hop and at a denser hop: how well the
  embeddings separate the voices once the count is right.

`--embedder` picks the speaker embedder (campplus or voicefilter; default: the settings').
Before the variants, the separation of the embedder's 1.5 s windows over each reference
speaker's solo speech, per clip: mean cosine similarity within a speaker and between the two,
d′ (their difference over the pooled spread), and the equal-error similarity over all clips
pooled — the statistics the CAM++ clustering defaults were derived from.

    uv run python bench/audio/diarizer_study.py [--data ../shared/data/speech] [--embedder E]
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Annotated

import numpy as np
import typer
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/machine.py
from machine import console, print_footer, print_header
from scoring import CALL, MEETING, SpeakerTurn, diarization_error, reference_clips, solo_regions

from audio_pipeline.audio import AudioClip, decode_audio
from audio_pipeline.config import Settings
from audio_pipeline.speakers import SpeakerEmbedder, create_embedder
from audio_pipeline.speakers.clustering import ClusteringParams
from audio_pipeline.speakers.embedded import EmbeddedDiarizer, _windows
from audio_pipeline.vad.silero import SileroVad


@dataclass
class Clip:
    key: str
    clip: AudioClip
    reference: list[SpeakerTurn]
    uem: list[tuple[float, float]] | None
    regions: list[tuple[float, float]]


@dataclass(frozen=True)
class Variant:
    label: str
    hop_s: float
    threshold: float
    oracle_count: bool = False


def variants(default: float) -> list[Variant]:
    """The embedder's default threshold, four lower and two higher ones, the oracle counts."""
    offsets = (-0.25, -0.2, -0.15, -0.1, 0.05, 0.1)
    out = [Variant(f"default (threshold {default:g}, hop 0.75 s)", 0.75, default)]
    out += [
        Variant(f"threshold {default + o:.3g}", 0.75, round(default + o, 3))
        for o in sorted(offsets, reverse=True)
    ]
    out += [
        Variant("oracle count, hop 0.75 s", 0.75, default, oracle_count=True),
        Variant("oracle count, hop 0.25 s", 0.25, default, oracle_count=True),
    ]
    return out


def diarizer_for(embedder: SpeakerEmbedder, v: Variant, speakers: int | None) -> EmbeddedDiarizer:
    base = getattr(embedder, "clustering", None) or ClusteringParams()
    params = replace(base, distance_threshold=v.threshold, num_speakers=speakers)
    return EmbeddedDiarizer(embedder, hop_s=v.hop_s, clustering=params)


def separation(embedder: SpeakerEmbedder, clips: list[Clip]) -> None:
    """Within/between-speaker similarity of 1.5 s windows of solo reference speech."""
    table = Table(title="1.5 s windows of solo reference speech: cosine similarity")
    for col in ("clip", "windows", "within mean", "between mean", "d′"):
        table.add_column(col, justify="right")
    pooled_w, pooled_b = [], []
    worst_within, least_between = 1.0, 1.0
    for c in clips:
        audio, names = [], []
        for person in sorted({t.speaker for t in c.reference}):
            for a, b in solo_regions(c.reference, person):
                if b - a < embedder.min_duration_s:
                    continue
                for w in _windows(a, b, 1.5, 0.75):
                    piece = c.clip.slice(w.start, w.end).samples
                    if len(piece) >= embedder.min_duration_s * c.clip.sample_rate:
                        audio.append(piece)
                        names.append(person)
        x = embedder.embed_many(audio, c.clip.sample_rate)
        labels = np.array(names)
        i, j = np.triu_indices(len(x), 1)
        sims = np.sum(x[i] * x[j], axis=1)
        same = labels[i] == labels[j]
        w, b = sims[same], sims[~same]
        d = (w.mean() - b.mean()) / np.sqrt((w.var() + b.var()) / 2)
        for person in sorted(set(names)):
            k = (labels[i] == person) & (labels[j] == person)
            worst_within = min(worst_within, float(sims[k].mean()))
        least_between = min(least_between, 1.0 - float(b.mean()))
        pooled_w.append(w)
        pooled_b.append(b)
        table.add_row(c.key, str(len(x)), f"{w.mean():.3f}", f"{b.mean():.3f}", f"{d:.2f}")
    w, b = np.concatenate(pooled_w), np.concatenate(pooled_b)
    grid = np.linspace(-1, 1, 2001)
    far = np.array([(b >= t).mean() for t in grid])
    frr = np.array([(w < t).mean() for t in grid])
    k = int(np.argmin(np.abs(far - frr)))
    console.print(table)
    console.print(
        f"pooled: within {w.mean():.3f}, between {b.mean():.3f}; equal error {far[k]:.3f} at "
        f"similarity {grid[k]:.3f}. Largest within-speaker mean distance (one speaker) "
        f"{1 - worst_within:.3f}, smallest between-speaker mean distance {least_between:.3f}: "
        f"midpoint {(1 - worst_within + least_between) / 2:.3f}"
    )


def main(
    data: Annotated[
        Path, typer.Option(help="the speech evaluation data (never copied into the repository)")
    ] = Path("../shared/data/speech"),
    embedder_name: Annotated[
        str | None,
        typer.Option("--embedder", help="campplus or voicefilter (default: the settings')"),
    ] = None,
) -> None:
    needed = [data / CALL / "sample.wav", data / MEETING / "dev00.wav"]
    if not all(p.is_file() for p in needed):
        console.print(f"[red]speech data not found under {data.resolve()}[/]; pass --data PATH")
        raise typer.Exit(2)

    from her_os_shared.logging import configure_logging

    configure_logging("bench", "warning", "json")
    print_header("audio pipeline: embedded diarizer, clustering variants vs the embedder")

    settings = Settings(allow_insecure_no_token=True)
    vad = SileroVad()
    vad.load()
    if embedder_name:
        settings = settings.model_copy(update={"speaker_embedder": embedder_name})
    embedder = create_embedder(settings)
    embedder.load()
    console.print(f"speaker embedder: {settings.speaker_embedder}")
    clips = []
    for key, path, ref, uem in reference_clips(data):
        audio = decode_audio(path.read_bytes(), max_seconds=settings.max_audio_seconds)
        clips.append(Clip(key, audio, ref, uem, vad.regions(audio)))

    separation(embedder, clips)
    default = (getattr(embedder, "clustering", None) or ClusteringParams()).distance_threshold
    table = Table(title="embedded diarizer variants: DER (speakers found) and controls")
    table.add_column("variant")
    for c in clips:
        table.add_column(f"{c.key} DER (found/ref)", justify="right")
    controls = [
        f"{c.key}/{person}" for c in clips for person in sorted({t.speaker for t in c.reference})
    ]
    table.add_column("controls: speakers found (want 1 each)", justify="left")
    table.add_column("diarize s", justify="right")
    for v in variants(default):
        row = [v.label]
        elapsed = 0.0
        for c in clips:
            n_ref = len({t.speaker for t in c.reference})
            diarizer = diarizer_for(embedder, v, n_ref if v.oracle_count else None)
            t = time.perf_counter()
            turns = diarizer.diarize(c.clip, c.regions)
            elapsed += time.perf_counter() - t
            hyp = [SpeakerTurn(x.start, x.end, x.speaker) for x in turns]
            d = diarization_error(c.reference, hyp, duration_s=c.clip.duration_s, uem=c.uem)
            row.append(f"{d.der * 100:.1f} % ({d.hyp_speakers}/{d.ref_speakers})")
        if v.oracle_count:
            row.append("— (count given)")
        else:
            found = []
            diarizer = diarizer_for(embedder, v, None)
            for c in clips:
                for person in sorted({t.speaker for t in c.reference}):
                    solo = [(a, b) for a, b in solo_regions(c.reference, person) if b > a]
                    turns = diarizer.diarize(c.clip, solo)
                    found.append(str(len({t.speaker for t in turns})))
            row.append(" ".join(found))
        row.append(f"{elapsed:.2f}")
        table.add_row(*row)
    console.print(table)
    console.print(f"controls, in order: {', '.join(controls)}")
    console.print(
        "diarize s: the three clips together, this run (2 ONNX threads; noisy on a shared VM)"
    )
    print_footer()


if __name__ == "__main__":
    typer.run(main)
