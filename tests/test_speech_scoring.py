"""The speech benchmarks' scorer (bench/audio/scoring.py): reference readers, WER by word
alignment, DER with overlap scored and no collar, solo regions; references with a speaker
who never talks alone, and empty or silent ones, score without crashing."""

from __future__ import annotations

import math
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st
from scripts_harness import load_audio_scoring

S = load_audio_scoring()
Turn = S.SpeakerTurn


def test_readers_parse_rttm_uem_and_stm(tmp_path: Path) -> None:
    rttm = tmp_path / "r.rttm"
    rttm.write_text(
        "SPEAKER f1 1 1.500 2.000 <NA> <NA> alice <NA> <NA>\n"
        "SPEAKER f1 1 4.000 0.500 <NA> <NA> bob <NA> <NA>\n"
        "NOISE f1 1 0 1 <NA> <NA> x <NA> <NA>\n"
    )
    assert S.read_rttm(rttm) == {"f1": [Turn(1.5, 3.5, "alice"), Turn(4.0, 4.5, "bob")]}
    uem = tmp_path / "r.uem"
    uem.write_text("f1 NA 0.000 30.000\n")
    assert S.read_uem(uem) == {"f1": [(0.0, 30.0)]}
    stm = tmp_path / "r.stm"
    stm.write_text(";; comment\nf1 A bob 4.0 4.5 see you\nf1 A alice 1.5 3.5 Hello, there!\n")
    assert [(x.speaker, x.text) for x in S.read_stm(stm)] == [
        ("alice", "Hello, there!"),
        ("bob", "see you"),
    ]


def test_word_errors_count_substitutions_deletions_and_insertions() -> None:
    assert S.normalise("Didn't we—say: 'Hello'?") == ["didnt", "we", "say", "hello"]
    r = S.word_errors("we met at noon today".split(), "we sat at noon today again".split())
    assert (r.substitutions, r.deletions, r.insertions) == (1, 0, 1)
    assert ("S", "met", "sat") in r.errors and ("I", "", "again") in r.errors
    assert math.isclose(r.wer, 2 / 5)
    r = S.word_errors("we met at noon".split(), "we at noon".split())
    assert (r.substitutions, r.deletions, r.insertions, r.errors) == (0, 1, 0, [("D", "met", "")])
    assert math.isnan(S.word_errors([], ["extra"]).wer)


def test_der_scores_overlap_missed_false_alarm_and_confusion() -> None:
    ref = [Turn(0.0, 2.0, "A"), Turn(1.0, 3.0, "B")]  # 1 s of overlap
    # One speaker at a time: the overlap's second speaker is missed (1 s of 4).
    d = S.diarization_error(ref, [Turn(0.0, 2.0, "x"), Turn(2.0, 3.0, "y")], duration_s=4.0)
    assert math.isclose(d.reference_s, 4.0)
    assert math.isclose(d.missed_s, 1.0) and d.false_alarm_s == 0 and d.confusion_s == 0
    assert math.isclose(d.der, 0.25) and d.mapping == {"A": "x", "B": "y"}
    # Speech where nobody talks is false alarm; the wrong voice is confusion.
    d = S.diarization_error(ref, [Turn(0.0, 3.0, "x"), Turn(3.0, 4.0, "y")], duration_s=4.0)
    assert math.isclose(d.false_alarm_s, 1.0)
    assert math.isclose(d.missed_s, 1.0) and math.isclose(d.confusion_s, 1.0)
    # The UEM limits what is scored.
    d = S.diarization_error(ref, [], duration_s=4.0, uem=[(0.0, 1.0)])
    assert math.isclose(d.scored_s, 1.0) and math.isclose(d.missed_s, 1.0) and d.der == 1.0


def test_a_speaker_heard_only_in_overlap_and_empty_references_do_not_crash() -> None:
    ref = [Turn(0.0, 4.0, "A"), Turn(1.0, 2.0, "B")]  # B never talks alone
    assert S.solo_regions(ref, "B") == []
    assert S.solo_regions(ref, "A") == [(0.0, 1.0), (2.0, 4.0)]
    d = S.diarization_error(ref, [Turn(0.0, 4.0, "x")], duration_s=4.0)
    assert d.ref_speakers == 2 and math.isclose(d.missed_s, 1.0)
    silent = S.diarization_error([], [], duration_s=5.0)
    assert math.isnan(silent.der) and silent.ref_speakers == silent.hyp_speakers == 0
    only_hyp = S.diarization_error([], [Turn(0.0, 1.0, "x")], duration_s=5.0)
    assert math.isclose(only_hyp.false_alarm_s, 1.0)


turns = st.lists(
    st.tuples(st.integers(0, 900), st.integers(5, 300), st.sampled_from(["a", "b", "c"])).map(
        lambda t: Turn(t[0] / 100, (t[0] + t[1]) / 100, t[2])
    ),
    max_size=8,
)


@settings(max_examples=60, deadline=None)
@given(turns)
def test_a_reference_scored_against_itself_or_renamed_has_no_error(ref: list) -> None:
    renamed = [Turn(t.start, t.end, f"spk-{t.speaker}") for t in ref]
    d = S.diarization_error(ref, renamed, duration_s=13.0)
    assert d.missed_s == d.false_alarm_s == d.confusion_s == 0
