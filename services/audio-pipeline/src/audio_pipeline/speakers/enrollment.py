"""Speaker identity: the persistent enrollment bank and per-session speaker ids.

The bank holds people, each with one or more voice "styles" (the same person on a phone, in a
car, whispering...). A style is the mean of the unit-norm embeddings enrolled into it plus a
sample count and created/updated times; its centroid is that mean, normalised.

The design's rule (settings speaker_match_threshold = 0.55, speaker_novel_style_distance =
0.15, both on cosine):
- a voice matches a person when its cosine similarity to one of their styles is >= the match
  threshold (the best such style wins);
- when that match is confident but the voice is farther than the novel-style distance from
  every style of that person (similarity < 1 - 0.15), it is stored as a new style of theirs,
  so the bank learns how a known person sounds in new conditions. Guards: only when no other
  person also matches (an ambiguous voice teaches nothing) and while the person has fewer than
  `max_styles` styles.

Storage: one JSON file (`enrollment.json` in enrollment_dir) with the vectors as base64
float32, written atomically (temporary file, fsync, rename, fsync of the folder), so a crash
leaves either the old or the new bank. A file that cannot be read is reported with
`EnrollmentBankError` and left untouched: silently starting empty would forget everyone and
overwrite the evidence on the next save. The file records which embedder made its vectors
(settings `speaker_embedder`). A bank from a different embedder is not an error but cannot be
used (its vectors live in another space): it is renamed aside, intact, to
`enrollment.<its embedder>.json` (logged as `enrollment_bank_set_aside`, with how to get it
back) and this embedder starts an empty bank; switching the embedder back and renaming the
file restores it. One process owns a bank folder; within it every operation holds a lock.

`SessionSpeakers` gives the voices of one session stable names: enrolled people by name,
everyone else `unknown_1`, `unknown_2`... in order of appearance. Naming an unknown later
(feedback) enrolls its voice, so the next session recognises the person.
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import tempfile
import threading
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from audio_pipeline.bundled import CAMPPLUS_MODEL, embedder_id_of
from audio_pipeline.speakers.campplus_embedder import EMBEDDING_DIM as CAMPPLUS_DIM
from audio_pipeline.speakers.onnx_embedder import EMBEDDING_DIM as VOICEFILTER_DIM
from audio_pipeline.speakers.onnx_embedder import VOICEFILTER_EMBEDDER
from her_os_shared.logging import get_logger

if TYPE_CHECKING:
    from audio_pipeline.config import Settings

log = get_logger(__name__)

BANK_FILENAME = "enrollment.json"
SCHEMA_VERSION = 1
# Which embedder's space the stored vectors live in (distribution, version, model sha256),
# and its dimension, for each `speaker_embedder` setting; the default is settings' default.
EMBEDDERS: dict[str, tuple[str, int]] = {
    "campplus": (embedder_id_of(CAMPPLUS_MODEL), CAMPPLUS_DIM),
    "voicefilter": (embedder_id_of(VOICEFILTER_EMBEDDER), VOICEFILTER_DIM),
}
DEFAULT_EMBEDDER_ID, EMBEDDING_DIM = EMBEDDERS["campplus"]
# A style's mean moves by at most 1/_MAX_WEIGHT per new sample, so it can follow a voice that
# changes slowly instead of freezing after hundreds of samples.
_MAX_WEIGHT = 50
MAX_PERSON_LEN = 100
# Labels the pipeline itself hands out; a person may not be called one of these.
_RESERVED = re.compile(r"^(unknown_\d+|SPEAKER_\d+)$", re.IGNORECASE)
_UNKNOWN_PREFIX = "unknown_"


class EnrollmentBankError(RuntimeError):
    """The bank file is unreadable or corrupt (left untouched)."""


@dataclass(frozen=True, slots=True)
class Match:
    person: str
    style: str  # style id
    similarity: float
    # identify() stored this voice as a new style of `person` (the novel-style rule).
    new_style: bool = False


@dataclass(frozen=True, slots=True)
class StyleInfo:
    id: str
    label: str | None
    count: int
    created_at: str
    updated_at: str


@dataclass(frozen=True, slots=True)
class PersonInfo:
    person: str
    styles: list[StyleInfo]


@dataclass(slots=True)
class _Style:
    id: str
    label: str | None
    mean: np.ndarray  # mean of the enrolled unit vectors (not normalised)
    count: int
    created_at: str
    updated_at: str

    def centroid(self) -> np.ndarray:
        return _unit(self.mean)

    def add(self, embedding: np.ndarray, now: str) -> None:
        weight = min(self.count, _MAX_WEIGHT - 1)
        self.mean = ((self.mean * weight + embedding) / (weight + 1)).astype(np.float32)
        self.count += 1
        self.updated_at = now


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _unit(v: np.ndarray) -> np.ndarray:
    return (v / (float(np.linalg.norm(v)) + 1e-12)).astype(np.float32)


def _check_embedding(embedding: np.ndarray, dim: int) -> np.ndarray:
    v = np.asarray(embedding, dtype=np.float32).reshape(-1)
    if v.shape != (dim,):
        raise ValueError(f"speaker embedding must have {dim} values, got {v.size}")
    if not np.isfinite(v).all() or float(np.linalg.norm(v)) < 1e-6:
        raise ValueError("speaker embedding must be finite and non-zero")
    return _unit(v)


def check_person(person: str) -> str:
    """`person` stripped; ValueError when it is empty, too long or a reserved label."""
    name = person.strip() if isinstance(person, str) else ""
    if not name:
        raise ValueError("person must be a non-empty name")
    if len(name) > MAX_PERSON_LEN:
        raise ValueError(f"person name longer than {MAX_PERSON_LEN} characters")
    if any(ord(c) < 32 for c in name):
        raise ValueError("person name contains control characters")
    if _RESERVED.match(name):
        raise ValueError(f"{name!r} is a label the pipeline assigns, not a person name")
    return name


def _encode(v: np.ndarray) -> str:
    return base64.b64encode(np.asarray(v, dtype="<f4").tobytes()).decode("ascii")


def _decode(text: str, dim: int) -> np.ndarray:
    raw = base64.b64decode(text.encode("ascii"), validate=True)
    if len(raw) != dim * 4:
        raise ValueError(f"vector of {len(raw)} bytes, expected {dim * 4}")
    v = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not np.isfinite(v).all():
        raise ValueError("vector holds non-finite values")
    return v


class EnrollmentBank:
    """People's voice styles, persisted in `directory`; every method is thread-safe."""

    def __init__(
        self,
        directory: Path,
        *,
        match_threshold: float = 0.55,
        novel_style_distance: float = 0.15,
        dim: int = EMBEDDING_DIM,
        embedder_id: str = DEFAULT_EMBEDDER_ID,
        max_styles: int = 16,
    ) -> None:
        self.directory = Path(directory)
        self.path = self.directory / BANK_FILENAME
        self.match_threshold = match_threshold
        self.novel_style_distance = novel_style_distance
        self.dim = dim
        self.embedder_id = embedder_id
        self.max_styles = max_styles
        self._lock = threading.RLock()
        self._persons: dict[str, list[_Style]] = {}
        self._load()

    @classmethod
    def from_settings(cls, settings: Settings) -> EnrollmentBank:
        embedder_id, dim = EMBEDDERS[settings.speaker_embedder]
        return cls(
            settings.enrollment_dir,
            match_threshold=settings.speaker_match_threshold,
            novel_style_distance=settings.speaker_novel_style_distance,
            dim=dim,
            embedder_id=embedder_id,
        )

    # ------------------------------------------------------------------ persistence
    def _load(self) -> None:
        try:
            text = self.path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return
        except (OSError, UnicodeDecodeError) as exc:
            raise EnrollmentBankError(f"cannot read enrollment bank {self.path}: {exc}") from exc
        try:
            data = json.loads(text)
            if self._from_other_embedder(data):
                self._set_aside(data)
                return
            self._persons = self._parse(data)
        except (ValueError, TypeError, KeyError, AttributeError, binascii.Error) as exc:
            raise EnrollmentBankError(
                f"enrollment bank {self.path} is corrupt ({type(exc).__name__}: {exc}); it was "
                "left untouched: restore it from a backup, or move it aside to start an empty "
                "bank (every person would have to enroll again)"
            ) from exc
        log.info(
            "enrollment_bank_loaded",
            path=str(self.path),
            persons=len(self._persons),
            styles=sum(len(s) for s in self._persons.values()),
        )

    def _from_other_embedder(self, data: Any) -> bool:
        """A well-formed bank whose vectors another speaker embedder made."""
        if not isinstance(data, dict):
            raise ValueError("top level is not an object")
        if data.get("schema_version") != SCHEMA_VERSION:
            raise ValueError(f"unsupported schema_version {data.get('schema_version')!r}")
        embedder, dim = data.get("embedder"), data.get("dim")
        if not isinstance(embedder, str) or not embedder or not isinstance(dim, int):
            raise ValueError("the bank does not say which speaker embedder made it")
        return embedder != self.embedder_id or dim != self.dim

    def _set_aside(self, data: dict[str, Any]) -> None:
        """Rename another embedder's bank out of the way (intact) and start empty."""
        other = str(data["embedder"])
        tag = re.sub(r"[^A-Za-z0-9.=-]+", "_", other.split(":", 1)[0])[:60] or "other"
        target = self.directory / f"enrollment.{tag}.json"
        n = 1
        while target.exists():
            n += 1
            target = self.directory / f"enrollment.{tag}.{n}.json"
        try:
            os.rename(self.path, target)
        except OSError as exc:
            raise EnrollmentBankError(
                f"enrollment bank {self.path} was made with speaker embedder {other!r}, not "
                f"{self.embedder_id!r}, and could not be moved aside ({exc}); move it yourself"
            ) from exc
        log.warning(
            "enrollment_bank_set_aside",
            path=str(target),
            persons=len(data.get("persons") or {}),
            bank_embedder=other,
            bank_dim=data.get("dim"),
            embedder=self.embedder_id,
            dim=self.dim,
            message=(
                "the enrollment bank was made with another speaker embedder, whose voiceprints "
                "cannot be compared with this one's: it was renamed aside unchanged and an "
                "empty bank started (everyone must enroll again). To go back, set "
                f"speaker_embedder to the old embedder and rename {target.name} to "
                f"{BANK_FILENAME}"
            ),
        )

    def _parse(self, data: Any) -> dict[str, list[_Style]]:
        persons: dict[str, list[_Style]] = {}
        seen: set[str] = set()
        for name, entry in data["persons"].items():
            styles = []
            for s in entry["styles"]:
                style = _Style(
                    id=str(s["id"]),
                    label=None if s.get("label") is None else str(s["label"]),
                    mean=_decode(s["mean"], self.dim),
                    count=int(s["count"]),
                    created_at=str(s["created_at"]),
                    updated_at=str(s["updated_at"]),
                )
                if style.id in seen or style.count < 1:
                    raise ValueError(f"duplicate style id or bad count in style {style.id!r}")
                seen.add(style.id)
                styles.append(style)
            if styles:
                persons[str(name)] = styles
        return persons

    def _save(self) -> None:
        data = {
            "schema_version": SCHEMA_VERSION,
            "embedder": self.embedder_id,
            "dim": self.dim,
            "persons": {
                name: {
                    "styles": [
                        {
                            "id": s.id,
                            "label": s.label,
                            "mean": _encode(s.mean),
                            "count": s.count,
                            "created_at": s.created_at,
                            "updated_at": s.updated_at,
                        }
                        for s in styles
                    ]
                }
                for name, styles in self._persons.items()
            },
        }
        self.directory.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{BANK_FILENAME}.", suffix=".tmp", dir=self.directory)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(data, f, ensure_ascii=False, indent=1)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        # The rename is durable only once the folder entry is on disk too.
        dir_fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    # ------------------------------------------------------------------ queries
    def _scores(self, v: np.ndarray) -> list[tuple[float, str, _Style]]:
        return [
            (float(style.centroid() @ v), person, style)
            for person, styles in self._persons.items()
            for style in styles
        ]

    def list(self) -> list[PersonInfo]:
        with self._lock:
            return [
                PersonInfo(
                    person,
                    [StyleInfo(s.id, s.label, s.count, s.created_at, s.updated_at) for s in styles],
                )
                for person, styles in sorted(self._persons.items())
            ]

    def persons(self) -> list[str]:
        with self._lock:
            return sorted(self._persons)

    def centroid(self, style_id: str) -> np.ndarray | None:
        with self._lock:
            for styles in self._persons.values():
                for s in styles:
                    if s.id == style_id:
                        return s.centroid()
        return None

    def rank(self, embedding: np.ndarray) -> list[Match]:
        """Every person this voice matches (>= the threshold), best first, by their best style."""
        v = _check_embedding(embedding, self.dim)
        with self._lock:
            best: dict[str, Match] = {}
            for sim, person, style in self._scores(v):
                if sim >= self.match_threshold and (
                    person not in best or sim > best[person].similarity
                ):
                    best[person] = Match(person, style.id, sim)
        return sorted(best.values(), key=lambda m: -m.similarity)

    def identify(self, embedding: np.ndarray, *, auto_enroll: bool = True) -> Match | None:
        """The enrolled person this voice belongs to, or None (see the module docstring)."""
        v = _check_embedding(embedding, self.dim)
        with self._lock:
            scores = self._scores(v)
            if not scores:
                return None
            sim, person, style = max(scores, key=lambda t: t[0])
            if sim < self.match_threshold:
                return None
            match = Match(person, style.id, sim)
            if not auto_enroll or sim >= 1.0 - self.novel_style_distance:
                return match
            others = [s for s, p, _ in scores if p != person and s >= self.match_threshold]
            if others:
                log.info("speaker_style_not_learned", person=person, reason="ambiguous")
                return match
            if len(self._persons[person]) >= self.max_styles:
                log.info("speaker_style_not_learned", person=person, reason="max_styles")
                return match
            new = self._new_style(person, v, label=None)
            self._save()
            log.info("speaker_style_learned", person=person, style=new.id, similarity=sim)
            return Match(person, new.id, sim, new_style=True)

    # ------------------------------------------------------------------ changes
    def _new_style(self, person: str, v: np.ndarray, label: str | None) -> _Style:
        now = _now()
        style = _Style(f"style_{uuid.uuid4().hex[:12]}", label, v.copy(), 1, now, now)
        self._persons.setdefault(person, []).append(style)
        return style

    def enroll(self, person: str, embedding: np.ndarray, style: str | None = None) -> str:
        """Add a voice sample of `person`; returns the id of the style it went into.

        `style` names a style (e.g. "phone"): the sample joins that style of the person, which
        is created if needed. Without it the sample joins the person's closest style when it
        is within the novel-style distance, and otherwise starts a new style.
        """
        name = check_person(person)
        v = _check_embedding(embedding, self.dim)
        label = style.strip() if style is not None else None
        if label == "":
            raise ValueError("style must be non-empty when given")
        with self._lock:
            styles = self._persons.get(name, [])
            target: _Style | None = None
            if label is not None:
                target = next((s for s in styles if s.label == label), None)
            elif styles:
                best = max(styles, key=lambda s: float(s.centroid() @ v))
                if float(best.centroid() @ v) >= 1.0 - self.novel_style_distance:
                    target = best
            if target is None:
                target = self._new_style(name, v, label)
            else:
                target.add(v, _now())
            self._save()
            log.info("speaker_enrolled", person=name, style=target.id, count=target.count)
            return target.id

    def delete_style(self, style_id: str) -> bool:
        """Remove one style; a person left without styles is removed. False if unknown."""
        with self._lock:
            for person, styles in self._persons.items():
                for i, s in enumerate(styles):
                    if s.id == style_id:
                        del styles[i]
                        if not styles:
                            del self._persons[person]
                        self._save()
                        log.info("speaker_style_deleted", person=person, style=style_id)
                        return True
        return False

    def delete_person(self, person: str) -> list[str]:
        """Remove a person and every style of theirs, the name matched as a person would be
        named aloud (any case, runs of spaces as one): "priya" removes "Priya". Returns the
        names removed (none when unknown)."""
        key = " ".join(person.split()).casefold()
        with self._lock:
            gone = [p for p in self._persons if " ".join(p.split()).casefold() == key]
            if not gone:
                return []
            for name in gone:
                del self._persons[name]
            self._save()
            log.info("speaker_person_deleted", persons=len(gone))
            return gone

    def delete_all(self) -> int:
        """Forget everyone; returns how many people were removed."""
        with self._lock:
            n = len(self._persons)
            self._persons = {}
            self._save()
            log.info("speaker_bank_cleared", persons=n)
            return n

    def rename(self, old: str, new: str) -> None:
        """Rename a person; if `new` exists already, `old`'s styles are merged into theirs."""
        target = check_person(new)
        with self._lock:
            styles = self._persons.pop(old.strip(), None)
            if styles is None:
                raise KeyError(f"no enrolled person {old!r}")
            self._persons.setdefault(target, []).extend(styles)
            self._save()
            log.info("speaker_renamed", old=old, new=target)


@dataclass(frozen=True, slots=True)
class SpeakerIdentity:
    label: str  # the person's name, or unknown_N
    person: str | None  # None while unknown
    similarity: float | None  # to the matched person's style or unknown's centroid
    new_style: bool = False


@dataclass(slots=True)
class _Unknown:
    label: str
    mean: np.ndarray
    count: int
    person: str | None = None  # set once named through feedback


class SessionSpeakers:
    """Stable speaker names within one session (e.g. a wearable's stream of chunks).

    `resolve_many` maps the voices of each chunk (diarized speaker → embedding) to enrolled
    people or to session-local `unknown_N` ids, reusing an unknown when the same voice returns
    (cosine similarity >= the bank's match threshold). Within a chunk no identity is given
    twice: candidate pairs are assigned greedily, most similar first, so a weaker look-alike
    cannot take a name from the better match. Kept in memory for the session's life.
    """

    def __init__(self, bank: EnrollmentBank) -> None:
        self.bank = bank
        self._unknowns: list[_Unknown] = []
        self._lock = threading.Lock()

    def resolve(self, embedding: np.ndarray) -> SpeakerIdentity:
        return self.resolve_many({"_": embedding})["_"]

    def resolve_many(self, embeddings: Mapping[str, np.ndarray]) -> dict[str, SpeakerIdentity]:
        """Identity of each diarized speaker of one chunk (keys as given)."""
        vectors = {k: _check_embedding(v, self.bank.dim) for k, v in embeddings.items()}
        threshold = self.bank.match_threshold
        with self._lock:
            # (similarity, speaker, identity label, person or None, unknown or None)
            candidates: list[tuple[float, str, str, str | None, _Unknown | None]] = []
            best_person: dict[str, str] = {}
            for key, v in vectors.items():
                ranked = self.bank.rank(v)
                if ranked:
                    best_person[key] = ranked[0].person
                candidates += [(m.similarity, key, m.person, m.person, None) for m in ranked]
                for u in self._unknowns:
                    sim = float(_unit(u.mean) @ v)
                    if sim >= threshold:
                        candidates.append((sim, key, u.person or u.label, u.person, u))
            candidates.sort(key=lambda c: -c[0])

            out: dict[str, SpeakerIdentity] = {}
            taken: set[str] = set()
            for sim, key, label, person, unknown in candidates:
                if key in out or label in taken:
                    continue
                taken.add(label)
                new_style = False
                if unknown is not None:
                    weight = min(unknown.count, _MAX_WEIGHT - 1)
                    unknown.mean = ((unknown.mean * weight + vectors[key]) / (weight + 1)).astype(
                        np.float32
                    )
                    unknown.count += 1
                elif person == best_person.get(key):
                    # The bank's own best match: apply its novel-style rule now.
                    learned = self.bank.identify(vectors[key])
                    new_style = learned is not None and learned.new_style
                out[key] = SpeakerIdentity(label, person, sim, new_style)
            for key, v in vectors.items():
                if key not in out:
                    unknown = _Unknown(f"{_UNKNOWN_PREFIX}{len(self._unknowns) + 1}", v.copy(), 1)
                    self._unknowns.append(unknown)
                    out[key] = SpeakerIdentity(unknown.label, None, None)
            return {k: out[k] for k in embeddings}

    def unknowns(self) -> list[str]:
        """Session labels of voices not (yet) named."""
        with self._lock:
            return [u.label for u in self._unknowns if u.person is None]

    def name(self, label: str, person: str, *, style: str | None = None) -> str:
        """Feedback: `label` (unknown_N) is `person`. Enrolls the voice; returns the style id.

        From then on this session reports the voice as `person`, and any later session
        recognises them through the bank.
        """
        name = check_person(person)
        with self._lock:
            unknown = next((u for u in self._unknowns if u.label == label), None)
            if unknown is None:
                raise KeyError(f"no speaker {label!r} in this session")
            style_id = self.bank.enroll(name, _unit(unknown.mean), style=style)
            unknown.person = name
            log.info("speaker_named", label=label, person=name, style=style_id)
            return style_id
