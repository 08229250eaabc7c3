from __future__ import annotations

from her_os.logs import _Follower, log_names, tail_lines, tail_text


def test_tail_lines_of_big_file(tmp_path):
    path = tmp_path / "big.log"
    path.write_text("".join(f"line {i}\n" for i in range(50_000)))
    assert tail_lines(path, 3) == ["line 49997", "line 49998", "line 49999"]
    assert tail_lines(path, 0) == []
    assert tail_lines(tmp_path / "missing.log", 5) == []


def test_tail_text_starts_at_latest_start_marker(tmp_path):
    path = tmp_path / "svc.log"
    path.write_text(
        "old run\n"
        "--- her-os: starting svc at 1 ---\nfirst\n"
        "--- her-os: starting svc at 2 ---\nnew\n"
    )
    assert tail_text(path) == "new"


def test_follower_reads_appended_complete_lines(tmp_path):
    path = tmp_path / "f.log"
    path.write_text("before\n")
    follower = _Follower(path)
    assert follower.read() == []
    with path.open("a") as handle:
        handle.write("one\ntw")
    assert follower.read() == ["one"]
    with path.open("a") as handle:
        handle.write("o\n")
    assert follower.read() == ["two"]
    path.write_text("new\n")  # truncated and rewritten
    assert follower.read() == ["new"]


def test_log_names(tmp_path):
    (tmp_path / "postgres.log").write_text("")
    (tmp_path / "annie-voice.log").write_text("")
    (tmp_path / "notes.txt").write_text("")
    assert log_names(tmp_path) == ["annie-voice", "postgres"]
    assert log_names(tmp_path / "missing") == []
