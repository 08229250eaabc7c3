"""bench/context_engine/upkeep_scans.py at a small scale: it loads a memory whose upkeep is
done, and what it reports is what the scans found — nothing while nothing changed, the new
session and the changed entities after a change, from the marks and in full alike."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench" / "context_engine"))


def test_the_scans_find_what_changed_and_nothing_else(capsys: pytest.CaptureFixture[str]) -> None:
    import upkeep_scans

    upkeep_scans.main(segments=3_500, entities=300, seed=7, database_url=None, keep=False)
    rows = {
        (cells[0], cells[1]): cells[3]
        for line in capsys.readouterr().out.splitlines()
        if len(cells := [c.strip() for c in line.strip().strip("│").split("│")]) == 4
    }
    # nothing changed: neither way finds anything
    assert rows["segments to embed", "full comparison"] == "0 sessions"
    assert rows["segments to embed", "marks (vector_todo)"] == "0 sessions"
    assert rows["entities to embed", "full comparison"] == "pending: False"
    assert rows["entities to embed", "marks (vector_todo)"] == "pending: False"
    # after a change: the new session, both ways; the 100 changed entities' documents
    assert rows["after a session arrived", "marks (vector_todo)"] == "found ['new']"
    assert rows["after a session arrived", "full comparison"] == "found ['new']"
    assert rows["after 100 entities changed", "their documents (marks)"] == "100 to embed"
