"""The offline responder's answers again, from the `/v1/context` bodies a `locomo_answers.py
--recalls --out FILE` run kept: the same questions and memory, without an engine, in seconds —
for changing how Annie words an answer and seeing what it does to the scores at once. The
figures it prints are a replay's; docs/benchmarks.md takes a full run's.

    uv run python bench/answers/replay.py /tmp/answers.json [--show 20] [--category 2]
"""

from __future__ import annotations

import json
import random
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from locomo_answers import Reply, console, print_header, report  # also puts bench/ on the path

from annie_voice.engine import Recall
from annie_voice.llm.offline import compose


def replay(path: Path) -> list[Reply]:
    kept = json.loads(path.read_text())["replies"]
    missing = sum(1 for r in kept if r.get("recall") is None)
    if missing:
        console.print(f"[red]{missing} replies have no recall[/]: run locomo_answers.py --recalls")
        raise typer.Exit(2)
    now = datetime.now(UTC)
    out = []
    for r in kept:
        answer = compose(
            r["question"], Recall.from_body(r["recall"]), now=now, zone=UTC, owner_speakers=()
        )
        out.append(
            Reply(r["sample_id"], r["question"], r["category"], r["answer"], answer.text,
                  r["baseline"], 0.0)
        )  # fmt: skip
    return out


def main(
    path: Annotated[Path, typer.Argument(help="a locomo_answers.py --recalls --out file")],
    show: Annotated[int, typer.Option(min=0, help="replies printed to judge")] = 20,
    seed: Annotated[int, typer.Option(help="seed of the sample")] = 7,
    category: Annotated[int | None, typer.Option(help="print only this category's")] = None,
) -> None:
    print_header("Annie's offline answers replayed from kept recalls")
    replies = replay(path)
    locomo = [r for r in replies if r.sample_id != "design-stories"]
    shown = [r for r in locomo if category is None or r.category == category]
    report(locomo, "offline responder (replayed)", 0, seed)
    for r in random.Random(seed).sample(shown, min(show, len(shown))):
        console.print(f"[bold]{r.sample_id} cat {r.category}[/] {r.question}")
        console.print(f"  gold: {r.answer!r}")
        console.print(f"  answer ({r.scores('answer')[0]:.2f}): {r.reply}")


if __name__ == "__main__":
    typer.run(main)
