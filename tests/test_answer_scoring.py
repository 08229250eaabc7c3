"""The answers benchmark's scoring (bench/answers/scoring.py): the LoCoMo paper's token F1
with Porter stems, its multi-answer F1 for multi-hop questions, abstention for adversarial
ones, and answer containment."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "answers"))
from scoring import abstains, contains, f1, f1_multi, normalise, score, tokens


def test_normalise_drops_case_punctuation_commas_and_articles() -> None:
    assert normalise("The Sunday, before 25 May 2023!") == "sunday before 25 may 2023"
    assert normalise("an apple and a pear") == "apple pear"
    assert normalise("she said: “Sweden”.") == "she said sweden"  # typographic quotes too


def test_tokens_are_porter_stems() -> None:
    assert tokens("Running shoes") == ["run", "shoe"]


def test_f1_of_a_reply_against_the_gold() -> None:
    assert f1("7 May 2023", "7 May 2023") == 1.0
    assert f1("On 7 May 2023, Caroline said: “I went to the group”", "7 May 2023") == (
        pytest.approx(2 * (3 / 10) * 1.0 / (3 / 10 + 1.0))  # 10 tokens, 3 of them the gold's
    )
    assert f1("nothing alike", "7 May 2023") == 0.0


def test_multi_hop_scores_each_gold_part_by_the_best_reply_part() -> None:
    assert f1_multi("pottery, camping", "camping, pottery") == 1.0
    assert f1_multi("pottery", "camping, pottery") == 0.5


def test_categories() -> None:
    assert score("Sweden", "Sweden; her home country", 3) == 1.0  # the first alternative
    assert score("pottery, camping", "camping, pottery", 1) == 1.0
    # adversarial: right only when the reply says it does not know
    assert score("I don't know: nothing is remembered about Zoltan.", None, 5) == 1.0
    assert score("That information is not mentioned.", None, 5) == 1.0
    assert score("She ran a charity race.", None, 5) == 0.0
    assert abstains("I don’t know") and not abstains("I know")


def test_containment_needs_the_whole_gold_in_order() -> None:
    assert contains("Kavya lives in Hyderabad since May.", "Hyderabad", 4)
    assert contains("On 7 May 2023 she said so", "7 May 2023", 2)
    assert not contains("On 7 June 2023 she said so", "7 May 2023", 2)
    assert not contains("anything", None, 4)


@given(st.text(min_size=1, max_size=60), st.text(min_size=1, max_size=60))
def test_f1_is_bounded_and_symmetric(a: str, b: str) -> None:
    assert 0.0 <= f1(a, b) <= 1.0
    assert f1(a, b) == pytest.approx(f1(b, a))
