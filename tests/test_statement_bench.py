"""The statement benchmark's calibration and sample (bench/extract/statement_quality.py): the
threshold is the one the judged pairs agree with most, and the sample does not move when the
extractor adds a statement."""

from __future__ import annotations

import sys
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "extract"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from statement_quality import calibrate, key


def test_the_threshold_separates_judged_pairs_as_well_as_any() -> None:
    judged = [(0.95, True), (0.91, True), (0.89, False), (0.88, True), (0.84, False), (0.8, False)]
    t = calibrate(judged)
    assert t == 0.88  # 5 of 6 on the right side; no cut does better
    assert sum((c >= t) == ok for c, ok in judged) == 5


@given(st.lists(st.tuples(st.floats(0, 1), st.booleans()), min_size=1, max_size=40))
def test_no_other_cut_puts_more_judged_pairs_on_the_right_side(
    judged: list[tuple[float, bool]],
) -> None:
    t = calibrate(judged)
    best = sum((c >= t) == ok for c, ok in judged)
    for other, _ in judged:
        assert sum((c >= other) == ok for c, ok in judged) <= best


def test_keys_are_stable_and_distinct() -> None:
    assert key("conv-1", "Asha moved to Pune") == key("conv-1", "Asha moved to Pune")
    assert key("conv-1", "Asha moved to Pune") != key("conv-2", "Asha moved to Pune")
    assert len(key("x")) == 16
