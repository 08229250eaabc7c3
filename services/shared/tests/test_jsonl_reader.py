"""The streaming JSONL reader: offsets, resumption, malformed and partial lines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from her_os_shared.jsonl import JsonlReader, append_records, stream_path
from her_os_shared.transcript import TranscriptPayload


def test_offsets_cover_every_line_and_resume_where_they_stopped(
    tmp_path: Path, payload_factory
) -> None:
    for i in range(5):
        append_records(tmp_path, "s1", [payload_factory(prefix=f"p{i}_")])
    path = stream_path(tmp_path, "s1")
    raw = path.read_bytes()
    records = list(JsonlReader(path, TranscriptPayload))
    assert [r.offset for r in records] == [0, *[r.end for r in records[:-1]]]
    assert records[-1].end == len(raw)
    for r in records:
        assert raw[r.offset : r.end].endswith(b"\n")
    resumed = JsonlReader(path, TranscriptPayload, start=records[2].end)
    assert [r.value for r in resumed] == [r.value for r in records[3:]]
    assert resumed.offset == len(raw)


def test_malformed_lines_are_skipped_with_a_reason(tmp_path: Path, payload_factory) -> None:
    good = payload_factory().model_dump_json().encode()
    bad_contract = json.dumps({"session_id": "../x"}).encode()
    lines = [good, b"{not json", b"\xff\xfe bad utf8", b"   ", bad_contract, good]
    path = tmp_path / "s.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    reader = JsonlReader(path, TranscriptPayload)
    values = [r.value for r in reader]
    assert values == [payload_factory(), payload_factory()]
    reasons = [s.reason for s in reader.skipped]
    assert len(reasons) == 4
    assert "invalid JSON" in reasons[0] or "json" in reasons[0].lower()
    assert "invalid UTF-8" in reasons[1]
    assert reasons[2] == "blank line"
    assert "session_id" in reasons[3]
    assert reader.offset == path.stat().st_size


def test_a_trailing_line_without_newline_is_left_for_later(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":')
    reader = JsonlReader(path)
    assert [r.value for r in reader] == [{"a": 1}]
    assert reader.offset == 8 and reader.skipped == []
    with open(path, "ab") as f:
        f.write(b"2}\n")
    later = JsonlReader(path, start=reader.offset)
    assert [r.value for r in later] == [{"b": 2}]


def test_an_oversized_line_is_skipped_and_reading_continues(tmp_path: Path) -> None:
    path = tmp_path / "s.jsonl"
    big = b'{"x":"' + b"y" * 5000 + b'"}'
    path.write_bytes(b'{"a":1}\n' + big + b'\n{"b":2}\n')
    reader = JsonlReader(path, max_line_bytes=1000, chunk_bytes=256)
    assert [r.value for r in reader] == [{"a": 1}, {"b": 2}]
    assert len(reader.skipped) == 1
    skip = reader.skipped[0]
    assert skip.reason == "line longer than the limit"
    assert (skip.offset, skip.end) == (8, 8 + len(big) + 1)


def test_the_reader_never_reads_the_whole_file_at_once(tmp_path: Path, monkeypatch) -> None:
    import her_os_shared.jsonl as jsonl_module

    path = tmp_path / "s.jsonl"
    path.write_bytes(b'{"a":1}\n' * 10_000)
    sizes: list[int] = []

    class SpyFile:
        def __init__(self, f):
            self.f = f

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.f.close()

        def seek(self, *args):
            return self.f.seek(*args)

        def read(self, n=-1):
            sizes.append(n)
            return self.f.read(n)

    monkeypatch.setattr(jsonl_module, "open", lambda *a, **k: SpyFile(open(*a, **k)), raising=False)
    assert sum(1 for _ in JsonlReader(path, chunk_bytes=4096)) == 10_000
    assert len(sizes) > 10 and all(0 < n <= 4096 for n in sizes)


def test_negative_start_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        JsonlReader(tmp_path / "x.jsonl", start=-1)


@settings(max_examples=60, deadline=None)
@given(
    values=st.lists(
        st.dictionaries(st.text(max_size=5), st.text(max_size=40) | st.integers(), max_size=3),
        min_size=1,
        max_size=12,
    ),
    chunk=st.integers(min_value=1, max_value=64),
)
def test_any_chunk_size_yields_the_same_records(values, chunk, tmp_path_factory) -> None:
    directory = tmp_path_factory.mktemp("chunks")
    append_records(directory, "s", values)
    path = stream_path(directory, "s")
    reader = JsonlReader(path, chunk_bytes=chunk)
    assert [r.value for r in reader] == values
    assert reader.offset == path.stat().st_size
