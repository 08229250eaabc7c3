"""Quality and speed of the fast (no-LLM) entity extractor on real dialogue.

The extractor is the engine's own (`context_engine.extract.fast.FastExtractor`, in process,
model loaded once); every conversation goes through `extract_sync` as the engine's extraction
stage would run it for a session.

1. DialogRE dev (`dialogre/dev.json`, Friends transcripts): each dialogue is one session, each
   line "Speaker 1: text" a segment with speaker "Speaker 1".
   - Person entities. Gold, per dialogue: the arguments of type PER of its annotated relations,
     except the "Speaker N" placeholders (they name the speakers, not words said). Predicted:
     the names of the person entities the extractor returns (after its gates), but the speaker
     labels themselves (they stand for the gold's placeholders). A predicted name matches a
     gold one when they are equal case-insensitively or one is a whole-word part of the other
     ("Joey" ~ "Joey Tribbiani", "Cassie" ~ "Cousin Cassie"); the exact-only figures are
     printed beside. Precision is a lower bound: the gold holds only people some relation
     is about, and a dialogue names more. "Precision vs the split" also counts as right a name
     that is a PER argument in any dialogue of the split (recurring characters).
   - Person–person relations. DialogRE labels → our predicates (predicates.py):
     per:spouse → spouse or ex_spouse (DialogRE's spouse includes "ex-wife"), per:siblings →
     sibling, per:girl/boyfriend → partner or ex_partner ("broke up with"), per:friends →
     friend, per:roommate → roommate, per:neighbor → neighbor, per:alumni → classmate ("from
     college"), per:other_family → cousin, uncle, aunt, grandparent, grandchild, niece,
     nephew, in_law or relative (one class "other family": DialogRE does not say which),
     per:parents / per:children → parent / child (direction kept: (x, parent, y) means y is
     x's parent), per:boss / per:subordinate → boss / employee ((x, boss, y): y is x's boss;
     (x, employee, y): y works for x), per:client → doctor / therapist ((x, doctor, y): x is
     y's client). Symmetric classes compare the pair unordered. Other labels (alternate_names,
     impressions, title, acquaintance, dates, age) are not modelled and ignored, and so are
     our predicates DialogRE has no label for (colleague, mentor, likes, ...: counted and
     printed, not scored). Arguments are compared as people: "Speaker 1" and the names
     per:alternate_names gives it are one person, so (Speaker 1, sibling, Mary Angela) said
     by Speaker 1 ("my sister Mary Angela") matches gold (Joey, per:siblings, Mary Angela).
     Precision and recall per class and overall, and the target: recall ≥ 40 % at precision
     ≥ 70 %.
   - Person–place, organisation and pet relations, the same way: per:place_of_residence,
     per:origin, per:place_of_birth → one class "home" (DialogRE's residence takes "from" and
     "grew up in" too) ← lives_in, moved_to, lived_in, moved_from, is_from;
     per:place_of_work / per:employee_or_member_of → works_at, worked_at, quit;
     per:schools_attended → studies_at, studied_at, graduated_from; per:pet → pet. The
     subject is resolved as a person, the object matches when its words are a whole-word
     part of the gold argument's or the other way round.
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
   - Observations as weak gold (`observation`: per session and speaker, generated facts
     with the turn(s) they come from). Each session goes through `extract_sync` with the real
     speaker names (as the engine gets them after enrolment). An observation of speaker S is
     *covered* when, from one of its evidence turns, the extractor yields a relation whose
     subject is S, or an entity of type promise, decision, habit or event that S said there,
     whose object (the entity's name) shares a content word with the observation: words
     lower-cased, stop words (spaCy's list) and S's own name removed, crude suffixes cut
     ("paintings" ~ "painting" ~ "paint"). Printed: the covered share overall and per
     conversation, the share counting relations only, the share also counting person, place,
     organisation and topic entities S said in the turn (looser), how many relations cover
     an observation of their turn (a weak precision: the observations are incomplete), and
     `--sample` (100) extracted relations drawn at random (`--seed`) with their source turn,
     to judge by reading.
3. Throughput: every LoCoMo session through `extract_sync` with the real speaker names, warm
   (model loaded and one session run first), one process: segments/s and words/s (words split
   on whitespace), median of `--repeats` passes, with NER alone (`nlp.pipe` on the same texts,
   the other components off) and the whole spaCy pipeline on every turn (one pass) for
   comparison. Target: ≥ 200 segments/s in one process.

    uv run python bench/extract/extract_quality.py [--data ../shared/data] [--repeats 3]
        [--sample 100] [--seed 7]
"""

from __future__ import annotations

import json
import operator
import random
import re
import statistics
import sys
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # bench/machine.py
from machine import code_line, console, print_footer, print_header
from statement_quality import run_statements

from context_engine.extract.base import Extraction
from context_engine.extract.fast import FastExtractor, person_shape
from context_engine.extract.schema import (
    ExtractedEntity,
    ExtractedRelation,
    SegmentText,
    best_segment,
    canonical_name,
    passes_gate,
)

DIALOGRE = Path("dialogre/dev.json")
LOCOMO = Path("locomo/locomo-dev.json")
_SPEAKER_N = re.compile(r"^Speaker \d+$")

# DialogRE label → the class it is scored as; symmetric classes compare the pair unordered.
SYMMETRIC = {
    "per:spouse": "spouse",
    "per:siblings": "sibling",
    "per:girl/boyfriend": "partner",
    "per:friends": "friend",
    "per:roommate": "roommate",
    "per:neighbor": "neighbor",
    "per:other_family": "other family",
    "per:alumni": "classmate",
}
# Our predicate → the same classes. DialogRE's spouse and girl/boyfriend include former ones.
OURS_SYMMETRIC = {
    "spouse": "spouse",
    "ex_spouse": "spouse",
    "sibling": "sibling",
    "partner": "partner",
    "ex_partner": "partner",
    "friend": "friend",
    "roommate": "roommate",
    "neighbor": "neighbor",
    "classmate": "classmate",
    **dict.fromkeys(
        ("cousin", "uncle", "aunt", "grandparent", "grandchild", "niece", "nephew", "in_law",
         "relative"),
        "other family",
    ),
}  # fmt: skip
# Directed classes: (class, a, b). parent: b is a's parent; boss: b is a's boss; client: b is
# a's client (DialogRE's "Dr. Carlin per:client Speaker 3").
DIRECTED_GOLD = {
    "per:parents": ("parent", False),  # (x, y) as is
    "per:children": ("parent", True),  # reversed: x is y's parent
    "per:boss": ("boss", False),
    "per:subordinate": ("boss", True),
    "per:client": ("client", False),
}
DIRECTED_OURS = {
    "parent": ("parent", False),
    "child": ("parent", True),
    "boss": ("boss", False),
    "employee": ("boss", True),
    "doctor": ("client", True),  # (x, doctor, y): y's client is x
    "therapist": ("client", True),
}
# Person → place, organisation or pet.
# DialogRE's residence takes "from" and "grew up in" too, so residence and origin are one class.
OTHER_GOLD = {
    "per:place_of_residence": "home",
    "per:origin": "home",
    "per:place_of_birth": "home",
    "per:place_of_work": "employer",
    "per:employee_or_member_of": "employer",
    "per:schools_attended": "school",
    "per:pet": "pet",
}
OTHER_OURS = {
    **dict.fromkeys(("lives_in", "moved_to", "lived_in", "moved_from", "is_from"), "home"),
    **dict.fromkeys(("works_at", "worked_at", "quit"), "employer"),
    **dict.fromkeys(("studies_at", "studied_at", "graduated_from"), "school"),
    "pet": "pet",
}
TARGET_RECALL, TARGET_PRECISION = 0.40, 0.70
# Issue 36: with statements (every turn parsed) the target is 150 segments/s (was 200 when
# the parser ran on a third of the turns).
TARGET_SEGMENTS_S = 150


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
    return "—" if x != x else f"{100 * x:.1f} %"  # x != x: NaN, nothing to divide by


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


def gold_relations(d: Dialogue, people: People) -> tuple[set[tuple], set[tuple]]:
    """(person–person, person–other) gold of a dialogue, as scoring classes."""
    persons: set[tuple] = set()
    others: set[tuple] = set()
    for r in d.relations:
        if r["x_type"] != "PER":
            continue
        x = people.find(r["x"])
        for label in r["r"]:
            if label in OTHER_GOLD:
                others.add((OTHER_GOLD[label], x, canonical_name(r["y"])))
            if r["y_type"] != "PER":
                continue
            y = people.find(r["y"])
            if label in SYMMETRIC:
                persons.add((SYMMETRIC[label], frozenset((x, y))))
            elif label in DIRECTED_GOLD:
                cls, reverse = DIRECTED_GOLD[label]
                persons.add((cls, y, x) if reverse else (cls, x, y))
    return persons, others


def predicted_relation(
    subject: str, predicate: str, obj: str, people: People
) -> tuple[str, tuple] | None:
    """("person", class tuple) or ("other", class tuple) of a predicted relation; None for a
    predicate DialogRE has no label for."""
    s = people.resolve(subject)
    if predicate in OTHER_OURS:
        return "other", (OTHER_OURS[predicate], s, canonical_name(obj))
    o = people.resolve(obj)
    if predicate in OURS_SYMMETRIC:
        return "person", (OURS_SYMMETRIC[predicate], frozenset((s, o)))
    if predicate in DIRECTED_OURS:
        cls, reverse = DIRECTED_OURS[predicate]
        return "person", ((cls, o, s) if reverse else (cls, s, o))
    return None


def _other_match(p: tuple, g: tuple) -> bool:
    """Same class and subject; the objects are the same words or one is part of the other."""
    return p[0] == g[0] and p[1] == g[1] and same_person(p[2], g[2])


@dataclass
class RelScore:
    """Precision and recall of relations per scoring class."""

    gold: Counter = field(default_factory=Counter)
    found: Counter = field(default_factory=Counter)  # gold items some prediction matches
    pred: Counter = field(default_factory=Counter)
    right: Counter = field(default_factory=Counter)  # predictions matching some gold item

    def add(
        self,
        predicted: set[tuple],
        gold: set[tuple],
        same: Callable[[tuple, tuple], bool] = operator.eq,
    ) -> set[tuple]:
        """Count one dialogue; returns the predictions that are right."""
        right = {p for p in predicted if any(same(p, g) for g in gold)}
        for g in gold:
            self.gold[g[0]] += 1
            self.found[g[0]] += any(same(p, g) for p in predicted)
        for p in predicted:
            self.pred[p[0]] += 1
            self.right[p[0]] += p in right
        return right

    def precision(self, cls: str | None = None) -> float:
        pred = self.pred[cls] if cls else self.pred.total()
        right = self.right[cls] if cls else self.right.total()
        return right / pred if pred else float("nan")

    def recall(self, cls: str | None = None) -> float:
        gold = self.gold[cls] if cls else self.gold.total()
        found = self.found[cls] if cls else self.found.total()
        return found / gold if gold else float("nan")


@dataclass
class DialogreResult:
    people: PR = field(default_factory=PR)
    people_exact: PR = field(default_factory=PR)
    split_tp: int = 0
    speaker_labels: int = 0  # person entities that are a "Speaker N" label
    rel_person: RelScore = field(default_factory=RelScore)
    rel_other: RelScore = field(default_factory=RelScore)
    rel_unscored: Counter = field(default_factory=Counter)  # our predicates DialogRE lacks
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
        people = [e.name for e in out.entities if e.type == "person"]
        # The speaker labels themselves ("Speaker 1") are left out, as they are of the gold.
        predicted = [p for p in people if not _SPEAKER_N.match(p)]
        res.speaker_labels += len(people) - len(predicted)
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
    gold_person, gold_other = gold_relations(d, people)
    # In the order said (dicts, not sets: the examples printed are the same every run).
    predicted: dict[str, dict[tuple, None]] = {"person": {}, "other": {}}
    said: dict[tuple, str] = {}
    for r in out.relations:
        found = predicted_relation(r.subject, r.predicate, r.object, people)
        if found is None:
            res.rel_unscored[r.predicate] += 1
            continue
        kind, p = found
        predicted[kind][p] = None
        said.setdefault(p, f"d{d.index}: ({r.subject}, {r.predicate}, {r.object}) — “{r.evidence}”")
    right = res.rel_person.add(set(predicted["person"]), gold_person)
    right |= res.rel_other.add(set(predicted["other"]), gold_other, _other_match)
    for p in [*predicted["person"], *predicted["other"]]:
        if len(res.rel_examples) < 40:
            res.rel_examples.append(("✓ " if p in right else "✗ ") + said[p])


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
        f'person entities that are a speaker label ("Speaker N"), left out as in the gold: '
        f"{res.speaker_labels}"
    )
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

    for title, score in (
        ("Person–person relations (DialogRE labels mapped to ours)", res.rel_person),
        ("Person–place, organisation and pet relations", res.rel_other),
    ):
        table = Table(title=title)
        for col in ("class", "gold", "found", "recall", "predicted", "right", "precision"):
            table.add_column(col, justify="left" if col == "class" else "right")
        for cls in sorted(set(score.gold) | set(score.pred)):
            table.add_row(
                cls, str(score.gold[cls]), str(score.found[cls]), pct(score.recall(cls)),
                str(score.pred[cls]), str(score.right[cls]), pct(score.precision(cls)),
            )  # fmt: skip
        table.add_row(
            "[bold]all[/]", str(score.gold.total()), str(score.found.total()),
            f"[bold]{pct(score.recall())}[/]", str(score.pred.total()),
            str(score.right.total()), f"[bold]{pct(score.precision())}[/]",
        )  # fmt: skip
        console.print(table)
    p = res.rel_person
    met = p.recall() >= TARGET_RECALL and p.precision() >= TARGET_PRECISION
    console.print(
        f"target (person–person): recall ≥ {TARGET_RECALL:.0%} at precision ≥ "
        f"{TARGET_PRECISION:.0%} — recall {pct(p.recall())}, precision {pct(p.precision())}: "
        + ("[green]met[/]" if met else "[red]not met[/]")
    )
    console.print(
        "extracted relations with no DialogRE label (not scored): "
        + (", ".join(f"{k} {n}" for k, n in res.rel_unscored.most_common()) or "none")
    )
    console.print("scored relations (first 40; ✓ matches the gold):")
    for line in res.rel_examples:
        console.print("  " + line, soft_wrap=True, markup=False)


# --- LoCoMo ---------------------------------------------------------------------------------

_PLACE_Q = re.compile(
    r"^\s*(?:where\b|(?:which|what)\s+(?:\w+\s+)?(?:country|countries|city|cities|state|states|"
    r"town|towns)\b)",
    re.IGNORECASE,
)


@dataclass
class Observation:
    """A LoCoMo observation: a generated fact about `speaker` with the turns it comes from."""

    speaker: str
    text: str
    segments: frozenset[str]  # segment ids of its evidence turns


@dataclass
class Conversation:
    sample_id: str
    speakers: tuple[str, str]
    sessions: list[list[SegmentText]]
    gold_places: list[str]
    observations: list[Observation] = field(default_factory=list)
    evidence_dropped: list[str] = field(default_factory=list)  # ids naming no turn


def read_observations(item: dict, turns: set[str]) -> tuple[list[Observation], list[str]]:
    """Every observation of a conversation; evidence like "D8:6; D9:17" is split, ids that
    name no turn are dropped (and returned)."""
    out, dropped = [], []
    for by_speaker in item.get("observation", {}).values():
        for speaker, facts in by_speaker.items():
            for fact, evidence in facts:
                ids = evidence if isinstance(evidence, list) else [evidence]
                segments = set()
                for part in (p for e in ids for p in re.split(r"[;,\s]+", e) if p):
                    m = re.fullmatch(r"D(\d+):(\d+)", part)
                    seg = f"{item['sample_id']}-D{int(m[1])}:{int(m[2])}" if m else ""
                    if seg in turns:
                        segments.add(seg)
                    else:
                        dropped.append(part)
                if segments:
                    out.append(Observation(speaker, fact, frozenset(segments)))
    return out, dropped


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
        turns = {seg.segment_id for session in sessions for seg in session}
        observations, dropped = read_observations(item, turns)
        out.append(
            Conversation(
                item["sample_id"], speakers, sessions, sorted(set(places), key=str.casefold),
                observations, dropped,
            )
        )  # fmt: skip
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


# --- LoCoMo observations as weak gold ----------------------------------------------------------

# Entities that state something the speaker did, plans or keeps doing (the headline rule).
FACT_TYPES = frozenset({"promise", "decision", "habit", "event"})
# The looser count adds the things a turn names.
THING_TYPES = frozenset({"person", "place", "organization", "topic"})
_SUFFIXES = (("ies", "i"), ("ing", ""), ("ed", ""), ("es", ""), ("s", ""))


def stem(word: str) -> str:
    """A crude stem, enough to match "paintings" / "painting" / "painted" / "paint" and
    "loves" / "loved" / "love" (the NER-only model has no lemmatizer)."""
    for _ in range(2):
        for suffix, repl in _SUFFIXES:
            if suffix == "s" and word.endswith(("ss", "us", "is")):
                continue  # "class", "bus", "this"
            if word.endswith(suffix) and len(word) - len(suffix) >= 3:
                word = word[: -len(suffix)] + repl
                if repl == "" and len(word) > 3 and word[-1] == word[-2] not in "lsz":
                    word = word[:-1]  # "running" → "runn" → "run"
                break
        else:
            break
    if len(word) > 3 and word[-1] in "ey":
        word = word[:-1] + ("i" if word[-1] == "y" else "")  # "movie(s)", "stud(y|ies)"
    return word


def content_words(text: str, drop: frozenset[str] = frozenset()) -> set[str]:
    from spacy.lang.en.stop_words import STOP_WORDS

    return {
        stem(w)
        for w in re.findall(r"[a-z0-9]+", text.casefold())
        if len(w) > 1 and w not in STOP_WORDS and w not in drop
    }


@dataclass
class Said:
    """One extracted relation with where it was said."""

    sample_id: str
    segment: SegmentText
    relation: ExtractedRelation
    covers: bool = False  # covers an observation of its turn


@dataclass
class ObservationScore:
    observations: int = 0
    covered: int = 0  # relations or promise/decision/habit/event entities
    by_relations: int = 0
    looser: int = 0  # also person/place/organization/topic entities
    relations: list[Said] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)


def score_observations(extractor: FastExtractor, c: Conversation) -> ObservationScore:
    """Each session through the extractor with the real speaker names; an observation is
    covered when its evidence turn yields what the module docstring says."""
    score = ObservationScore(observations=len(c.observations))
    rels: dict[str, list[ExtractedRelation]] = defaultdict(list)
    ents: dict[str, list[ExtractedEntity]] = defaultdict(list)
    for session in c.sessions:
        out = extractor.extract_sync(session)
        by_id = {s.segment_id: s for s in session}
        for r in out.relations:
            seg = r.segment_id or best_segment(r.evidence or r.object, session)
            if seg in by_id:
                rels[seg].append(r)
                score.relations.append(Said(c.sample_id, by_id[seg], r))
        for e in out.entities:
            if e.segment_id:
                ents[e.segment_id].append(e)
    said_by = {id(s.relation): s for s in score.relations}
    for o in c.observations:
        want = content_words(o.text, frozenset(words(o.speaker)))
        hit_rel = [
            r
            for seg in o.segments
            for r in rels[seg]
            if same_person(r.subject, o.speaker) and content_words(r.object) & want
        ]
        said = [
            e
            for seg in o.segments
            for e in ents[seg]
            if same_person(str(e.properties.get("speaker", "")), o.speaker)
            and content_words(e.name) & want
        ]
        hit_ent = [e for e in said if e.type in FACT_TYPES]
        for r in hit_rel:
            said_by[id(r)].covers = True
        score.by_relations += bool(hit_rel)
        score.covered += bool(hit_rel or hit_ent)
        score.looser += bool(hit_rel or hit_ent or any(e.type in THING_TYPES for e in said))
        if (hit_rel or hit_ent) and len(score.examples) < 4:
            how = (
                f"({hit_rel[0].subject}, {hit_rel[0].predicate}, {hit_rel[0].object})"
                if hit_rel
                else f"{hit_ent[0].type} “{hit_ent[0].name}”"
            )
            score.examples.append(f"{c.sample_id} {o.speaker}: “{o.text}” ← {how}")
    return score


def run_observations(
    extractor: FastExtractor, convs: list[Conversation], sample: int, seed: int
) -> None:
    console.rule("LoCoMo observations as weak gold (real speaker names)")
    console.print(
        "rule: an observation of speaker S is covered when, from one of its evidence turns, "
        "the extractor yields a relation whose subject is S — or an entity of type promise, "
        "decision, habit or event said by S — whose object (entity name) shares a content "
        "word with the observation (lower-cased, spaCy stop words and S's own name removed, "
        "crude suffixes cut). Looser: also person, place, organisation and topic entities S "
        "said in the turn.",
        soft_wrap=True,
    )
    dropped = [d for c in convs for d in c.evidence_dropped]
    console.print(
        f"evidence ids naming no turn, dropped: {len(dropped)}"
        + (f" ({', '.join(sorted(set(dropped)))})" if dropped else "")
    )
    table = Table(title="Observations covered by what the extractor yields from their turn")
    for col in ("conversation", "observations", "covered", "relations only",
                "looser", "relations", "covering one"):  # fmt: skip
        table.add_column(col, justify="left" if col == "conversation" else "right")
    total = ObservationScore()
    examples: list[str] = []
    for c in convs:
        s = score_observations(extractor, c)
        n = s.observations
        covering = sum(x.covers for x in s.relations)
        table.add_row(
            c.sample_id, str(n), f"{s.covered} ({pct(s.covered / n)})",
            f"{s.by_relations} ({pct(s.by_relations / n)})", f"{s.looser} ({pct(s.looser / n)})",
            str(len(s.relations)), str(covering),
        )  # fmt: skip
        total.observations += n
        total.covered += s.covered
        total.by_relations += s.by_relations
        total.looser += s.looser
        total.relations += s.relations
        examples += s.examples
    n = total.observations
    covering = sum(x.covers for x in total.relations)
    table.add_row(
        "[bold]all[/]", str(n), f"[bold]{total.covered} ({pct(total.covered / n)})[/]",
        f"{total.by_relations} ({pct(total.by_relations / n)})",
        f"{total.looser} ({pct(total.looser / n)})", str(len(total.relations)), str(covering),
    )  # fmt: skip
    console.print(table)
    rels = total.relations
    console.print(
        f"observations covered: {pct(total.covered / n)} ({total.covered} of {n}); by relations "
        f"only {pct(total.by_relations / n)}; relations extracted {len(rels)}, of which "
        f"{covering} ({pct(covering / len(rels) if rels else float('nan'))}) cover an "
        "observation of their turn (a weak precision: the observations are incomplete)"
    )
    by_predicate = Counter(x.relation.predicate for x in rels)
    covers = Counter(x.relation.predicate for x in rels if x.covers)
    console.print(
        "relations by predicate (covering an observation): "
        + (", ".join(f"{p} {k} ({covers[p]})" for p, k in by_predicate.most_common()) or "none"),
        soft_wrap=True,
    )
    console.print("covered, first examples per conversation:")
    for line in examples:
        console.print("  " + line, soft_wrap=True, markup=False)

    picked = sorted(random.Random(seed).sample(range(len(rels)), min(sample, len(rels))))
    console.rule(
        f"{len(picked)} of {len(rels)} extracted relations, drawn at random (seed {seed}), "
        "to judge by reading"
    )
    for i, k in enumerate(picked, 1):
        x = rels[k]
        r = x.relation
        console.print(
            f"{i:3d}. {x.segment.segment_id}  ({r.subject}, {r.predicate}, {r.object})  "
            f"{json.dumps(r.properties, ensure_ascii=False, default=str)}"
            f"{'  [covers an observation]' if x.covers else ''}\n"
            f"     {x.segment.speaker}: “{x.segment.text}”",
            soft_wrap=True,
            markup=False,
        )


def run_throughput(extractor: FastExtractor, convs: list[Conversation], repeats: int) -> None:
    console.rule("Throughput (LoCoMo, real speaker names, warm, one process)")
    sessions = [s for c in convs for s in c.sessions]
    extractor.extract_sync(sessions[0])  # warm-up
    n_seg = sum(len(s) for s in sessions)
    n_words = sum(len(seg.text.split()) for s in sessions for seg in s)
    texts = [seg.text for s in sessions for seg in s]
    nlp = extractor.nlp
    # NER alone: every component but "ner" off (the sm model's NER has its own tok2vec).
    others = [c for c in nlp.pipe_names if c != "ner"]
    runs, ner_runs = [], []
    for i in range(repeats):
        t = time.perf_counter()
        for s in sessions:
            extractor.extract_sync(s)
        runs.append(time.perf_counter() - t)
        t = time.perf_counter()
        with nlp.select_pipes(disable=others):
            for _ in nlp.pipe(texts, batch_size=extractor.batch_size):
                pass
        ner_runs.append(time.perf_counter() - t)
        console.print(
            f"run {i + 1}/{repeats}: extractor {runs[-1]:.2f} s, NER alone {ner_runs[-1]:.2f} s"
        )
    full = None
    if others:  # the whole pipeline once, for scale: the extractor parses only some turns
        t = time.perf_counter()
        for _ in nlp.pipe(texts, batch_size=extractor.batch_size):
            pass
        full = time.perf_counter() - t
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
    if full is not None:
        console.print(
            f"the whole spaCy pipeline on every turn ({', '.join(nlp.pipe_names)}; one pass): "
            f"{n_seg / full:,.0f} segments/s"
        )
    rate = n_seg / dt
    console.print(
        f"target: ≥ {TARGET_SEGMENTS_S} segments/s in one process — {rate:,.0f} (median): "
        + ("[green]met[/]" if rate >= TARGET_SEGMENTS_S else "[red]not met[/]")
    )


def main(
    data: Annotated[
        Path, typer.Option(help="the shared evaluation data (never copied into the repository)")
    ] = Path("../shared/data"),
    repeats: Annotated[int, typer.Option(min=1, help="timed passes over LoCoMo")] = 3,
    sample: Annotated[
        int, typer.Option(min=0, help="extracted LoCoMo relations printed to judge")
    ] = 100,
    seed: Annotated[int, typer.Option(help="seed of the sample")] = 7,
    judge: Annotated[
        bool, typer.Option(help="print the closest pairs not yet judged (statement coverage)")
    ] = False,
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
    console.print(code_line())
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
    run_observations(extractor, convs, sample, seed)
    run_statements(
        extractor,
        {c.sample_id: c.sessions for c in convs},
        [(c.sample_id, o.speaker, o.text, o.segments) for c in convs for o in c.observations],
        same_person,
        sample=sample,
        seed=seed,
        judge=judge,
    )
    run_throughput(extractor, convs, repeats)
    import spacy

    meta = extractor.nlp.meta
    print_footer(
        f"spaCy {spacy.__version__}, {meta['lang']}_{meta['name']} {meta['version']} "
        f"({', '.join(extractor.nlp.pipe_names)})"
    )


if __name__ == "__main__":
    typer.run(main)
