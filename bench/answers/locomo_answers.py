"""Answers to the LoCoMo dev questions through Annie's `POST /v1/chat`, scored as the LoCoMo
paper scores answers (scoring.py), beside a baseline that answers with the top segment.

Each conversation becomes its own memory, as in bench/locomo/locomo_recall.py (its own
PostgreSQL database, `python -m context_engine` with default settings, FalkorDB graph; the
sessions written in order as JSONL, every stage waited for, consolidated as of the end).
Annie (`annie_voice.app`, in this process) is pointed at that engine with default settings:
the offline responder (no LLM) unless `--llm-url` names an OpenAI-compatible server. Every
question is one new chat session, so no answer leans on another. The offline responder does
not read the session briefing, so the briefing is off for it (the answer is the same, with
four fewer engine requests per question); with an LLM it is on, as in production.

Baseline, in the same run on the same memory: the text of the top-ranked segment of
`GET /v1/context` (limit 1, as of the conversation's end) as the answer.

Reported per category (1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop, 5 adversarial)
and overall: the paper's score (token F1 with Porter stems; adversarial: whether the reply
says it does not know), answer containment (the gold answer's tokens in order inside the
reply), and the median reply length in words. Targets (issue 24): the answers beat the
baseline in every category, and reach at least 1.5× its overall F1.

Then the memory design's worked examples (stories.py: another household, other words) as
questions with gold answers, through their own memory the same way, reported apart.

    uv run python bench/answers/locomo_answers.py [--data ../shared/data/locomo]
    uv run python bench/answers/locomo_answers.py --llm-url http://127.0.0.1:8080/v1 --llm-model m
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import sys
import time
from collections import defaultdict
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from statistics import mean, median
from typing import Annotated, Any

import httpx
import typer
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "context_engine"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "locomo"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from common import (
    TOKEN,
    EngineProcess,
    KeepOption,
    console,
    postgres,
    print_footer,
    print_header,
    report_log,
    workdir,
)
from locomo_recall import (
    CATEGORIES,
    DEFAULT_DATA,
    CaptionsOption,
    Conversation,
    ConversationsOption,
    DataOption,
    Question,
    consolidate,
    conversation_engine,
    falkordb,
    load,
    postgres_version,
    wait_embedder,
    wait_indexed,
    write_sessions,
)
from machine import code_line
from scoring import contains, score, words
from stories import story

TARGET_RATIO = 1.5
CONCURRENCY = 4
ANNIE_TOKEN = "bench-annie-token-0123456789abcdef"


@dataclass
class Reply:
    sample_id: str
    question: str
    category: int
    answer: str | None
    reply: str
    baseline: str
    seconds: float
    recall: dict[str, Any] | None = None  # the /v1/context body Annie's search got (--recalls)

    def scores(self, which: str) -> tuple[float, bool]:
        said = self.reply if which == "answer" else self.baseline
        return score(said, self.answer, self.category), contains(said, self.answer, self.category)


def annie_app(engine: EngineProcess, work: Path, llm_url: str | None, llm_model: str | None):
    from annie_voice.app import create_app
    from annie_voice.config import Settings

    settings = Settings(
        internal_token=ANNIE_TOKEN,
        context_engine_url=engine.base_url,
        context_engine_token=TOKEN,
        models_dir=work / "models",
        python_scratch_root=work / "scratch",
        voice_preload=False,
        engine_timeout_s=60,
        briefing_enabled=llm_url is not None,
        llm_base_url=llm_url,
        llm_model=llm_model,
        max_sessions=10_000,
    )
    return create_app(settings)


async def chat(client: httpx.AsyncClient, message: str) -> str:
    """Annie's whole answer to one message in a new session (the `done` event's text)."""
    event, text = "", None
    async with client.stream("POST", "/v1/chat", json={"message": message}) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith("event:"):
                event = line[6:].strip()
            elif line.startswith("data:") and event in ("done", "error"):
                data = json.loads(line[5:])
                if event == "error":
                    raise RuntimeError(f"Annie failed: {data}")
                text = data["text"]
    if text is None:
        raise RuntimeError("the chat stream ended without an answer")
    return text


async def annie_recall(client: httpx.AsyncClient, question: str) -> dict[str, Any]:
    """The `/v1/context` body of the search the offline responder makes for `question`."""
    from annie_voice.llm.offline import SEARCH_LIMIT

    r = await client.get("/v1/context", params={"query": question[:512], "limit": SEARCH_LIMIT})
    r.raise_for_status()
    return r.json()


async def top_segment(client: httpx.AsyncClient, question: str, as_of: datetime) -> str:
    r = await client.get(
        "/v1/context", params={"query": question[:512], "limit": 1, "as_of": as_of.isoformat()}
    )
    r.raise_for_status()
    results = r.json()["results"]
    return results[0]["text"] if results else ""


async def ask_all(
    engine: EngineProcess,
    conv: Conversation,
    as_of: datetime,
    work: Path,
    llm: tuple[str | None, str | None],
    progress: Progress,
    task: object,
    recalls: bool = False,
) -> list[Reply]:
    from asgi_lifespan import LifespanManager

    app = annie_app(engine, work, *llm)
    gate = asyncio.Semaphore(CONCURRENCY)
    async with (
        LifespanManager(app) as manager,
        httpx.AsyncClient(
            transport=httpx.ASGITransport(app=manager.app), base_url="http://annie",
            headers={"X-Internal-Token": ANNIE_TOKEN}, timeout=300,
        ) as annie,
        httpx.AsyncClient(base_url=engine.base_url, headers=engine.headers, timeout=120) as ce,
    ):  # fmt: skip

        async def one(q: Question) -> Reply:
            async with gate:
                started = time.perf_counter()
                reply = await chat(annie, q.text)
                seconds = time.perf_counter() - started
                baseline = await top_segment(ce, q.text, as_of)
                body = await annie_recall(ce, q.text) if recalls else None
            progress.advance(task)  # type: ignore[arg-type]
            return Reply(
                conv.sample_id, q.text, q.category, q.answer, reply, baseline, seconds, body
            )

        return list(await asyncio.gather(*(one(q) for q in conv.questions)))


# --- the report -------------------------------------------------------------------------------


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def figures(replies: list[Reply]) -> dict[str, dict[str, float]]:
    """Per category name and "overall": n, F1 and containment of both, median words."""
    groups: dict[str, list[Reply]] = defaultdict(list)
    for r in replies:
        groups[f"{r.category} {CATEGORIES[r.category]}"].append(r)
    groups["overall"] = list(replies)
    out = {}
    for name, rs in sorted(groups.items()):
        row: dict[str, float] = {"n": len(rs)}
        for which in ("answer", "baseline"):
            scored = [r.scores(which) for r in rs]
            row[f"{which}_f1"] = mean(s for s, _ in scored)
            row[f"{which}_contains"] = mean(float(c) for _, c in scored)
            said = [r.reply if which == "answer" else r.baseline for r in rs]
            row[f"{which}_words"] = median(words(x) for x in said)
        out[name] = row
    return out


def report_stories(replies: list[Reply]) -> dict[str, Any]:
    table = Table(title="The design's stories: every question")
    for col in ("question", "gold", "answer", "F1", "baseline F1"):
        table.add_column(col, justify="right" if "F1" in col else "left")
    for r in replies:
        table.add_row(r.question, r.answer or "", r.reply, f"{r.scores('answer')[0]:.2f}",
                      f"{r.scores('baseline')[0]:.2f}")  # fmt: skip
    console.print(table)
    rows = figures(replies)["overall"]
    console.print(
        f"stories: F1 {_pct(rows['answer_f1'])} (baseline {_pct(rows['baseline_f1'])}), "
        f"containment {_pct(rows['answer_contains'])} (baseline "
        f"{_pct(rows['baseline_contains'])}), median {rows['answer_words']:.0f} words"
    )
    return rows


def report(replies: list[Reply], backend: str, sample: int, seed: int) -> dict[str, Any]:
    rows = figures(replies)
    table = Table(title=f"LoCoMo dev answers: {backend} vs the top segment (baseline)")
    for col in ("category", "n", "F1 answer", "F1 baseline", "ratio", "contains answer",
                "contains baseline", "median words answer / baseline"):  # fmt: skip
        table.add_column(col, justify="left" if col == "category" else "right")
    beaten = []
    for name, row in rows.items():
        ratio = row["answer_f1"] / row["baseline_f1"] if row["baseline_f1"] else float("inf")
        if name != "overall":
            beaten.append(row["answer_f1"] > row["baseline_f1"])
        table.add_row(
            name, str(int(row["n"])), _pct(row["answer_f1"]), _pct(row["baseline_f1"]),
            f"{ratio:.2f}×", _pct(row["answer_contains"]), _pct(row["baseline_contains"]),
            f"{row['answer_words']:.0f} / {row['baseline_words']:.0f}",
        )  # fmt: skip
    console.print(table)
    overall = rows["overall"]
    ratio = overall["answer_f1"] / overall["baseline_f1"] if overall["baseline_f1"] else 0.0
    every = all(beaten)
    console.print(
        "target: beats the baseline in every category — "
        + ("[green]met[/]" if every else "[red]not met[/]")
        + f"; overall F1 ≥ {TARGET_RATIO}× the baseline's — {ratio:.2f}× "
        + ("[green]met[/]" if ratio >= TARGET_RATIO else "[red]not met[/]")
    )
    console.print(
        f"median reply: {overall['answer_words']:.0f} words (baseline "
        f"{overall['baseline_words']:.0f}); median time to the whole answer "
        f"{median(r.seconds for r in replies):.2f} s"
    )
    console.rule(f"{sample} replies to judge (seed {seed})")
    for r in random.Random(seed).sample(replies, min(sample, len(replies))):
        s, _ = r.scores("answer")
        b, _ = r.scores("baseline")
        console.print(f"[bold]{r.sample_id} cat {r.category}[/] {r.question}")
        console.print(f"  gold: {r.answer!r}")
        console.print(f"  answer ({s:.2f}): {r.reply}")
        console.print(f"  baseline ({b:.2f}): {r.baseline}")
    return {"figures": rows, "every_category": every, "ratio": ratio}


async def run(
    data: Path, conversations: int | None, captions: bool, keep: bool,
    llm: tuple[str | None, str | None], index_timeout_s: float, stories: bool,
    recalls: bool = False,
) -> tuple[list[Reply], str]:  # fmt: skip
    path = data / "locomo-dev.json"
    if not path.exists():
        console.print(f"[red]no LoCoMo data at {path}[/] (--data; ../shared/data/README.md)")
        raise typer.Exit(2)
    convs, _ = load(path, captions, conversations)
    console.print(
        f"{len(convs)} LoCoMo conversations, {sum(len(c.questions) for c in convs)} questions "
        f"(those with evidence turns){' and the design stories' if stories else ''}; "
        "Annie's backend: "
        f"{'OpenAI-compatible at ' + llm[0] if llm[0] else 'the offline responder (no LLM)'}"
    )
    if stories:
        convs.append(story())
    replies: list[Reply] = []
    with workdir("her-os-answers-", keep) as root_name, contextlib.ExitStack() as stack:
        root = Path(root_name)
        pg = stack.enter_context(postgres(None, root))
        graph_url = stack.enter_context(falkordb(root))
        for conv in convs:
            console.rule(f"{conv.sample_id}: {len(conv.sessions)} sessions, {conv.turns} turns")
            home = root / conv.memory_id
            engine = await conversation_engine(
                conv, root, pg.url,
                {"CONTEXT_ENGINE_LEG_TIMEOUT_S": "30", "CONTEXT_ENGINE_GRAPH_URL": graph_url,
                 "CONTEXT_ENGINE_GRAPH_GROUP_ID": conv.memory_id},
            )  # fmt: skip
            with engine:
                wait_embedder(engine)
                as_of = write_sessions(conv, engine.transcripts_dir, home / "staging")
                await wait_indexed(engine.database_url, conv, True, index_timeout_s)
                console.print(f"consolidated as of the end: {consolidate(engine, as_of)}")
                with Progress(
                    "  {task.description:<10}", BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console,
                ) as progress:  # fmt: skip
                    task = progress.add_task("asked", total=len(conv.questions))
                    replies += await ask_all(
                        engine, conv, as_of, home, llm, progress, task, recalls
                    )
                report_log(engine.log_events(), f"{conv.sample_id} engine log")
        version = await postgres_version(pg.url)
    return replies, version


def main(
    data: DataOption = DEFAULT_DATA,
    conversations: ConversationsOption = None,
    captions: CaptionsOption = True,
    llm_url: Annotated[
        str | None, typer.Option(help="an OpenAI-compatible server for Annie (default: none)")
    ] = None,
    llm_model: Annotated[str | None, typer.Option(help="the model name at --llm-url")] = None,
    sample: Annotated[int, typer.Option(min=0, help="replies printed to judge")] = 20,
    seed: Annotated[int, typer.Option(help="seed of the sample")] = 7,
    keep: KeepOption = False,
    out: Annotated[Path | None, typer.Option(help="write every reply and figure here")] = None,
    index_timeout: Annotated[float, typer.Option(help="seconds to wait for indexing")] = 1800,
    stories: Annotated[bool, typer.Option(help="also the design's worked examples")] = True,
    recalls: Annotated[
        bool,
        typer.Option(help="keep each question's /v1/context body in --out (for replay.py)"),
    ] = False,
) -> None:
    print_header("Annie's answers to LoCoMo dev questions (POST /v1/chat)")
    console.print(code_line())
    backend = f"LLM {llm_model or ''} at {llm_url}" if llm_url else "offline responder"
    replies, version = asyncio.run(
        run(
            data,
            conversations,
            captions,
            keep,
            (llm_url, llm_model),
            index_timeout,
            stories,
            recalls,
        )
    )
    locomo = [r for r in replies if r.sample_id != "design-stories"]
    result = report(locomo, backend, sample, seed)
    if stories:
        result["stories"] = report_stories([r for r in replies if r.sample_id == "design-stories"])
    if out is not None:
        out.write_text(
            json.dumps({**result, "replies": [asdict(r) for r in replies]}, indent=1, default=str)
        )
        console.print(f"written to {out}")
    print_footer(version)


if __name__ == "__main__":
    typer.run(main)
