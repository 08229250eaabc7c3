"""The atomic JSONL writer: concurrency, crash safety, path safety."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from her_os_shared.ids import InvalidIdError
from her_os_shared.jsonl import JsonlReader, append_records, replace_records, stream_path
from her_os_shared.transcript import TranscriptPayload

WORKER = Path(__file__).with_name("writer_worker.py")


def _spawn(directory: Path, session: str, worker: int, count: int, text_bytes: int, *extra: str):
    return subprocess.Popen(
        [
            sys.executable,
            str(WORKER),
            str(directory),
            session,
            str(worker),
            str(count),
            str(text_bytes),
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _read_all(path: Path) -> JsonlReader[TranscriptPayload]:
    reader = JsonlReader(path, TranscriptPayload)
    records = list(reader)
    reader.records = records  # type: ignore[attr-defined]
    return reader


def test_concurrent_processes_append_every_line_exactly_once(tmp_path: Path) -> None:
    n_procs, per_proc = 6, 40
    procs = [_spawn(tmp_path, "shared", w, per_proc, 200) for w in range(n_procs)]
    for p in procs:
        _out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()
    reader = _read_all(stream_path(tmp_path, "shared"))
    assert reader.skipped == []
    ids = [r.value.segments[0].segment_id for r in reader.records]
    assert len(ids) == n_procs * per_proc
    assert set(ids) == {f"w{w}_{i}" for w in range(n_procs) for i in range(per_proc)}
    # Each worker's own lines keep their order.
    for w in range(n_procs):
        mine = [int(i.split("_")[1]) for i in ids if i.startswith(f"w{w}_")]
        assert mine == sorted(mine)


def test_sigkill_mid_append_never_leaves_a_torn_line(tmp_path: Path) -> None:
    """Kill a busy writer at random moments, many times; every visible line stays whole."""
    rng = random.Random(1234)
    path = stream_path(tmp_path, "crashy")
    previous = 0
    kills_with_data = 0
    for _round in range(40):
        proc = _spawn(tmp_path, "crashy", _round, 0, 20_000, "--forever")
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == b"ready"
        time.sleep(rng.uniform(0.005, 0.15))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        assert proc.returncode == -signal.SIGKILL
        if not path.exists():
            continue
        raw = path.read_bytes()
        assert raw.endswith(b"\n"), "a partial line became visible"
        reader = _read_all(path)
        assert reader.skipped == [], reader.skipped
        assert reader.offset == len(raw)
        assert len(reader.records) >= previous, "lines were lost"
        if len(reader.records) > previous:
            kills_with_data += 1
        previous = len(reader.records)
    assert previous > 0 and kills_with_data >= 10
    # The stale .tmp a killed writer may leave is harmless: the next append succeeds.
    proc = _spawn(tmp_path, "crashy", 999, 1, 10)
    assert proc.wait(timeout=60) == 0
    assert len(_read_all(path).records) == previous + 1


def test_the_crash_check_detects_a_torn_line_written_non_atomically(tmp_path: Path) -> None:
    """Control for the test above: a naive in-place append killed between its two writes
    leaves a partial line, and the same checks see it."""
    path = tmp_path / "naive.jsonl"
    script = (
        "import os,sys,time\n"
        f"f=open({str(path)!r},'ab')\n"
        'f.write(b\'{"a": 1}\\n{"half": \'); f.flush(); os.fsync(f.fileno())\n'
        "print('written', flush=True); time.sleep(60)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE)
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == b"written"
    proc.kill()
    proc.wait()
    raw = path.read_bytes()
    assert not raw.endswith(b"\n")  # the torn line is visible to a reader of a naive file
    reader = JsonlReader(path)
    assert [r.value for r in reader] == [{"a": 1}]
    assert reader.offset == len(b'{"a": 1}\n')  # the reader stops before the partial line


def test_appending_after_a_foreign_partial_line_keeps_our_lines_whole(
    tmp_path: Path, payload_factory
) -> None:
    path = stream_path(tmp_path, "s1")
    path.write_bytes(b'{"torn": ')
    append_records(tmp_path, "s1", [payload_factory()])
    reader = JsonlReader(path, TranscriptPayload)
    records = list(reader)
    assert len(records) == 1 and records[0].value == payload_factory()
    assert len(reader.skipped) == 1 and "invalid JSON" in reader.skipped[0].reason


@pytest.mark.parametrize(
    "bad_id",
    ["../etc", "a/b", "..", ".", "", "a" * 129, "a b", "a\nb", "a\x00b", "ＡＢ", "x.jsonl", "-/"],
)
def test_path_tricks_are_rejected_before_touching_the_disk(
    tmp_path: Path, bad_id: str, payload_factory
) -> None:
    target = tmp_path / "volume"
    with pytest.raises(InvalidIdError, match="session_id"):
        append_records(target, bad_id, [payload_factory()])
    assert not target.exists()


def test_a_bad_record_writes_nothing_of_its_batch(tmp_path: Path, payload_factory) -> None:
    append_records(tmp_path, "s1", [payload_factory()])
    before = stream_path(tmp_path, "s1").read_bytes()
    with pytest.raises(TypeError):
        append_records(tmp_path, "s1", [payload_factory(), {"bad": object()}])
    assert stream_path(tmp_path, "s1").read_bytes() == before


def test_file_and_directory_are_fsynced_and_renamed(
    tmp_path: Path, payload_factory, monkeypatch
) -> None:
    calls: list[str] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        calls.append("dir" if os.path.isdir(f"/proc/self/fd/{fd}") else "file")
        real_fsync(fd)

    def rename(src, dst) -> None:
        calls.append(f"rename {Path(src).name}->{Path(dst).name}")
        real_rename(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    append_records(tmp_path, "s1", [payload_factory()])
    assert calls == ["file", "rename .s1.jsonl.tmp->s1.jsonl", "dir"]


def test_replace_records_swaps_the_whole_file_and_skips_identical_content(
    tmp_path: Path, payload_factory
) -> None:
    append_records(tmp_path, "s1", [payload_factory(), payload_factory()])
    new = payload_factory(prefix="new_")
    path, written = replace_records(tmp_path, "s1", [new])
    assert written and [r.value for r in JsonlReader(path, TranscriptPayload)] == [new]
    before = path.stat().st_ino
    assert replace_records(tmp_path, "s1", [new]) == (path, False)  # already so: untouched
    assert path.stat().st_ino == before
    _, fresh = replace_records(tmp_path, "s2", [new])  # a stream that did not exist
    assert fresh and not list(tmp_path.glob(".*.tmp"))
    with pytest.raises(ValueError):
        replace_records(tmp_path, "../escape", [new])
