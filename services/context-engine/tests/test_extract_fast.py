"""The fast extractor (spaCy NER + patterns + VADER) on hand-written transcripts, the model's
hash check, and arbitrary text (hypothesis). The model is loaded once for the module."""

from __future__ import annotations

import asyncio
import hashlib
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from context_engine.extract import spacy_model
from context_engine.extract.base import Extraction
from context_engine.extract.emotion import confidence_of, emotion_of
from context_engine.extract.fast import MAX_CHARS, FastExtractor, clean_name, looks_like_name
from context_engine.extract.schema import CONFIDENCE_GATES, ExtractedEntity, SegmentText


@pytest.fixture(scope="module")
def extractor() -> FastExtractor:
    x = FastExtractor()
    x.load()
    return x


def seg(segment_id: str, speaker: str, text: str) -> SegmentText:
    return SegmentText(segment_id, speaker, text)


# A household conversation: the user (enrolled as Asha) and a diarized visitor.
HOUSEHOLD = [
    seg(
        "c1-000",
        "Asha",
        "Hey Ravi! My wife Priya and her brother Arjun are coming over on Saturday.",
    ),
    seg("c1-001", "SPEAKER_01", "Nice. Is Arjun still living in Bangalore?"),
    seg(
        "c1-002",
        "Asha",
        "Yes, he moved to Bangalore last year. I'll call him tomorrow about the wedding on Sunday.",
    ),
    seg("c1-003", "Asha", "I'll be honest, it was a long week, right?"),
    seg(
        "c1-004",
        "SPEAKER_01",
        "We decided to sell the old car next month. How's your sister Meera doing?",
    ),
    seg("c1-005", "Asha", "I gave up coffee in January. I love green tea now."),
    seg("c1-006", "SPEAKER_01", "I'm so sad and upset about the accident, it was terrible."),
]


def found(out: Extraction, type_: str) -> dict[str, ExtractedEntity]:
    return {e.name: e for e in out.entities if e.type == type_}


def triples(out: Extraction) -> set[tuple[str, str, str]]:
    return {(r.subject, r.predicate, r.object) for r in out.relations}


def test_label_and_protocol_attributes(extractor: FastExtractor) -> None:
    assert (extractor.name, extractor.version, extractor.label) == ("fast", 4, "fast@4")


def test_people_and_places_with_speakers_and_segments(extractor: FastExtractor) -> None:
    out = extractor.extract_sync(HOUSEHOLD)
    people = found(out, "person")
    # the enrolled speaker, someone greeted, named in a relation, tagged by NER
    assert {"Asha", "Ravi", "Priya", "Arjun", "Meera"} <= set(people)
    assert "SPEAKER_01" not in people  # a diarization label is not a name
    assert people["Ravi"].segment_id == "c1-000"
    assert people["Ravi"].properties["speaker"] == "Asha"
    assert people["Meera"].segment_id == "c1-004"
    assert found(out, "place")["Bangalore"].segment_id in ("c1-001", "c1-002")
    for e in out.entities:  # every entity says where and by whom
        assert e.segment_id in {s.segment_id for s in HOUSEHOLD}
        assert e.properties["speaker"] in ("Asha", "SPEAKER_01")


def test_commitments_with_their_dates_and_no_fillers(extractor: FastExtractor) -> None:
    out = extractor.extract_sync(HOUSEHOLD)
    [promise] = found(out, "promise").values()  # "I'll be honest" is not one
    assert promise.name.startswith("I'll call him tomorrow")
    assert (promise.segment_id, promise.properties) == (
        "c1-002",
        {"speaker": "Asha", "when": "tomorrow"},
    )
    [decision] = found(out, "decision").values()
    assert decision.segment_id == "c1-004"
    assert decision.properties == {"speaker": "SPEAKER_01", "when": "next month"}
    wedding = found(out, "event")["wedding"]
    assert (wedding.properties["when"], wedding.segment_id) == ("Sunday", "c1-002")
    questions = {e.segment_id for e in found(out, "question").values()}
    assert questions == {"c1-001", "c1-004"}  # not "..., right?" in c1-003


def test_relations_resolve_owners_and_preferences(extractor: FastExtractor) -> None:
    out = extractor.extract_sync(HOUSEHOLD)
    assert triples(out) == {
        ("Asha", "spouse", "Priya"),
        ("Priya", "sibling", "Arjun"),  # "her brother": the person mentioned last
        ("Asha", "sibling", "Meera"),  # "your sister", said to Asha by the previous turn's other
        ("Asha", "avoids", "coffee"),
        ("Asha", "likes", "green tea"),
    }  # not ("Arjun", moved_to, "Bangalore"): "he moved" is a guess, and a guess never moves
    # anyone (it would end where they live; ADR 0017)
    by_triple = {(r.subject, r.predicate, r.object): r for r in out.relations}
    assert by_triple[("Asha", "spouse", "Priya")].segment_id == "c1-000"
    assert by_triple[("Asha", "likes", "green tea")].segment_id == "c1-005"
    # the speaker's own relation is surer than a resolved pronoun
    assert (
        by_triple[("Asha", "spouse", "Priya")].confidence
        > by_triple[("Priya", "sibling", "Arjun")].confidence
    )


def test_unresolvable_pronoun_owner_is_dropped(extractor: FastExtractor) -> None:
    out = extractor.extract_sync([seg("s-0", "SPEAKER_00", "Her sister Meera called again.")])
    assert triples(out) == set()
    assert "Meera" in found(out, "person")
    # a person said before, in an earlier segment, is who "his" refers to
    out = extractor.extract_sync(
        [
            seg("s-0", "Asha", "I had lunch with Rohan Mehta today."),
            seg("s-1", "Asha", "His daughter Anya starts school in June."),
        ]
    )
    assert ("Rohan Mehta", "child", "Anya") in triples(out)
    # "your" is whoever is addressed by name; someone addressed is never "her"
    out = extractor.extract_sync(
        [
            seg("v-0", "SPEAKER_00", "Hey Gina, how is your sister Amy?"),
            seg("v-1", "SPEAKER_01", "Hey Gina! Her brother Tom called."),
        ]
    )
    assert triples(out) == {("Gina", "sibling", "Amy"), ("Amy", "sibling", "Tom")}


def test_emotions_from_strong_sentiment(extractor: FastExtractor) -> None:
    out = extractor.extract_sync(HOUSEHOLD)
    sad = found(out, "emotion")["sadness"]
    assert sad.segment_id == "c1-006"
    assert sad.properties["speaker"] == "SPEAKER_01"
    assert sad.properties["compound"] < -0.5 and sad.confidence >= CONFIDENCE_GATES["emotion"]
    neutral = seg("n", "Asha", "The meeting is at three in room four.")
    assert emotion_of(neutral) is None
    assert confidence_of(0.6) < CONFIDENCE_GATES["emotion"]  # mild positivity is politeness
    assert confidence_of(-0.9) > confidence_of(-0.6) >= CONFIDENCE_GATES["emotion"]


def test_speaker_labels_and_names() -> None:
    for label in ("SPEAKER_00", "Speaker 1", "speaker_3", "user", "unknown", "Unknown", "", "me"):
        assert not looks_like_name(label), label
    for name in ("Priya", "Asha Rao", "Anne-Marie"):
        assert looks_like_name(name), name
    assert clean_name("Hey Joey") == "Joey"
    assert clean_name("Joey's") == "Joey"
    assert clean_name("Y'know") is None
    assert clean_name("Noooo") is None


async def test_async_extract_runs_in_a_thread_and_matches(extractor: FastExtractor) -> None:
    out = await extractor.extract(HOUSEHOLD)
    same = extractor.extract_sync(HOUSEHOLD)
    assert [(e.type, e.name, e.segment_id) for e in out.entities] == [
        (e.type, e.name, e.segment_id) for e in same.entities
    ]
    assert out.relations == same.relations


def test_odd_input_never_raises(extractor: FastExtractor) -> None:
    long = "I'll call Priya tomorrow. " * 2000 + "Then I'll call Arjun."  # ~52k characters
    segments = [
        seg("e0", "Asha", ""),
        seg("e1", "Asha", "   \n\t "),
        seg("e2", "Asha", long),
        seg("e3", "SPEAKER_00", "¿Dónde está la biblioteca? Ich möchte nach Berlin fahren."),
        seg("e4", "SPEAKER_00", "北京欢迎你 😀🎉🔥 ok 👍"),
        seg("e5", "SPEAKER_00", "\x00\x01 ' \" ’’ “” — …"),
    ]
    out = extractor.extract_sync(segments)
    assert all(e.confidence >= CONFIDENCE_GATES[e.type] for e in out.entities)
    # text past MAX_CHARS is not read
    assert "Arjun" not in found(out, "person") and len(long) > MAX_CHARS
    assert extractor.extract_sync([]) == Extraction()
    # without a speaker, nothing is owned by nobody
    anonymous = extractor.extract_sync([seg("x", " ", "I love coffee. My wife Priya is here.")])
    assert anonymous.relations == []


async def test_concurrent_sessions_give_the_same_output(extractor: FastExtractor) -> None:
    sessions = [HOUSEHOLD, HOUSEHOLD[::-1], HOUSEHOLD[:3], HOUSEHOLD]
    outs = await asyncio.gather(*(extractor.extract(s) for s in sessions))
    assert outs[0] == outs[3] == extractor.extract_sync(HOUSEHOLD)
    assert outs[2] == extractor.extract_sync(HOUSEHOLD[:3])


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    texts=st.lists(st.text(max_size=300), min_size=1, max_size=4),
    speaker=st.sampled_from(["Asha", "SPEAKER_00", "user", ""]),
)
def test_arbitrary_text_never_raises_and_passes_gates(
    extractor: FastExtractor, texts: list[str], speaker: str
) -> None:
    segments = [seg(f"h{i}", speaker, t) for i, t in enumerate(texts)]
    out = extractor.extract_sync(segments)
    ids = {s.segment_id for s in segments}
    for e in out.entities:
        assert e.confidence >= CONFIDENCE_GATES[e.type]
        assert e.segment_id in ids
    for r in out.relations:
        assert r.subject and r.object and r.subject.lower() not in ("her", "his", "their")


# --- the model's hash check -------------------------------------------------------------------


def test_pinned_hashes_match_the_installed_model() -> None:
    """EXPECTED_SHA256 lists every file of the model (so a new file is noticed too). To update
    after an upgrade: `uv run python -m context_engine.extract.spacy_model` prints them."""
    assert spacy_model.file_hashes(spacy_model.model_dir()) == spacy_model.EXPECTED_SHA256


def test_a_changed_weight_file_stops_the_load(tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(spacy_model.model_dir(), copy)
    weights = copy / "ner" / "model"
    data = bytearray(weights.read_bytes())
    data[len(data) // 2] ^= 0xFF
    weights.write_bytes(bytes(data))
    with pytest.raises(spacy_model.ModelIntegrityError, match=r"ner/model has sha256 [0-9a-f]{64}"):
        spacy_model.load_verified(copy)
    (copy / "tok2vec" / "model").unlink()
    expected = {"tok2vec/model": spacy_model.EXPECTED_SHA256["tok2vec/model"]}
    with pytest.raises(spacy_model.ModelIntegrityError, match=r"missing: .*tok2vec/model"):
        spacy_model.verify(copy, expected)


def test_a_wrong_expected_hash_names_the_file() -> None:
    real = spacy_model.model_dir()
    digest = hashlib.sha256((real / "ner" / "moves").read_bytes()).hexdigest()
    spacy_model.verify(real, {"ner/moves": digest})  # right: no error
    with pytest.raises(spacy_model.ModelIntegrityError, match="ner/moves"):
        spacy_model.verify(real, {"ner/moves": "0" * 64})


def test_a_score_without_a_feeling_word_is_not_an_emotion(extractor: FastExtractor) -> None:
    # VADER scores greetings and politeness high; with no word naming a feeling the fast
    # extractor keeps nothing (a "positive" entity per turn was noise, issue 23)
    out = extractor.extract_sync([seg("e-0", "Asha", "Thank you so much, that is wonderful!")])
    assert found(out, "emotion") == {}
    out = extractor.extract_sync([seg("e-1", "Asha", "I am so happy and grateful for you!")])
    assert set(found(out, "emotion")) == {"joy"}
