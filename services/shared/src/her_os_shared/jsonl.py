"""Atomic JSONL capture: the writer that never tears a line, and the reader that never fails a file.

Writer (the design's protocol): take an exclusive `flock` on `.{stream_id}.lock`, copy the
current file to `.{stream_id}.jsonl.tmp`, append the new lines, fsync the file, `os.rename` it
over the original, fsync the directory. A reader therefore sees either the old file or the new
one, never a partial line, even if the writer is SIGKILLed mid-append; a crash leaves at worst a
stale dot-file `.tmp`, which the next writer overwrites under the lock.

Reader: streams the file from a byte offset in fixed-size chunks (never the whole file), reports
the offset after each complete line, stops before a trailing line that has no newline yet, and
skips a malformed line (bad UTF-8, bad JSON, contract violation, oversized) with a logged reason.

Note for consumers that track offsets: every append creates a new inode (rename), so "same inode"
is not a valid "same file" test; compare size and the bytes up to the stored offset instead.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
from collections.abc import Callable, Iterator, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, BinaryIO, Generic, Literal, TypeVar

from pydantic import BaseModel, ValidationError

from her_os_shared.errors import describe_validation_error
from her_os_shared.ids import validate_id
from her_os_shared.logging import get_logger

log = get_logger(__name__)

SUFFIX = ".jsonl"
READ_CHUNK_BYTES = 64 * 1024
MAX_LINE_BYTES = 32 * 1024 * 1024

M = TypeVar("M", bound=BaseModel)


class RecordTooLargeError(ValueError):
    pass


def stream_path(directory: Path, stream_id: str) -> Path:
    """`{directory}/{stream_id}.jsonl`, after validating the id (no path tricks)."""
    return Path(directory) / f"{validate_id(stream_id, 'session_id')}{SUFFIX}"


def encode_line(record: BaseModel | dict[str, Any]) -> bytes:
    """One JSON object on one line. JSON escapes newlines and NUL inside strings, so the
    only b"\\n" in the result is the terminator (UTF-8 never has 0x0A inside a character)."""
    if isinstance(record, BaseModel):
        body = record.model_dump_json().encode("utf-8")
    else:
        body = json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    if len(body) > MAX_LINE_BYTES:
        raise RecordTooLargeError(f"record is {len(body)} bytes; the limit is {MAX_LINE_BYTES}")
    return body + b"\n"


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _swap_in(directory: Path, stream_id: str, write: Callable[[BinaryIO, Path], None]) -> Path:
    """Under the stream's lock: `write(tmp_file, target)` fills a temporary file, which is
    fsynced and renamed over the target (then the directory fsynced): a reader sees the old
    file or the new one, never a mix."""
    target = stream_path(directory, stream_id)
    directory = target.parent
    directory.mkdir(parents=True, exist_ok=True)
    lock_path = directory / f".{stream_id}.lock"
    tmp_path = directory / f".{stream_id}{SUFFIX}.tmp"
    with open(lock_path, "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            with open(tmp_path, "wb") as out:
                write(out, target)
                out.flush()
                os.fsync(out.fileno())
            os.rename(tmp_path, target)
            _fsync_dir(directory)
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)
    return target


def append_records(
    directory: Path, stream_id: str, records: Sequence[BaseModel | dict[str, Any]]
) -> Path:
    """Append `records` to `{directory}/{stream_id}.jsonl` atomically; return the path.

    All records are encoded (and so validated) before the disk is touched: a bad record means
    nothing of the batch is written.
    """
    payload = b"".join(encode_line(r) for r in records)
    if not payload:
        return stream_path(directory, stream_id)

    def write(out: BinaryIO, target: Path) -> None:
        try:
            with open(target, "rb") as src:
                shutil.copyfileobj(src, out, 1024 * 1024)
                # A foreign writer may have left a last line without "\n": close it so that
                # line is skipped as malformed and ours stay intact.
                if out.tell() > 0:
                    src.seek(-1, os.SEEK_END)
                    if src.read(1) != b"\n":
                        out.write(b"\n")
        except FileNotFoundError:
            pass
        out.write(payload)

    return _swap_in(directory, stream_id, write)


def replace_records(
    directory: Path, stream_id: str, records: Sequence[BaseModel | dict[str, Any]]
) -> tuple[Path, bool]:
    """Make `{directory}/{stream_id}.jsonl` hold exactly `records`, atomically, under the same
    lock as appends; (path, False) when it already did (nothing written). Readers that track
    offsets see a rewritten file (context engine: a new generation)."""
    target = stream_path(directory, stream_id)
    payload = b"".join(encode_line(r) for r in records)
    try:
        if target.read_bytes() == payload:
            return target, False
    except FileNotFoundError:
        pass
    return _swap_in(directory, stream_id, lambda out, _: out.write(payload)), True


def rewrite_stream(
    directory: Path, stream_id: str, transform: Callable[[bytes], bytes | None]
) -> Literal["unchanged", "rewritten", "removed", "missing"]:
    """Read, transform and write back `{directory}/{stream_id}.jsonl` under the appenders'
    lock, so no append lands between the read and the write (forgetting, ADR 0013).
    `transform(old_bytes)` returns the new content; None or b"" removes the file."""
    target = stream_path(directory, stream_id)
    lock_path = target.parent / f".{stream_id}.lock"
    if not target.exists():
        return "missing"
    with open(lock_path, "a+b") as lock:
        fcntl.flock(lock.fileno(), fcntl.LOCK_EX)
        try:
            try:
                old = target.read_bytes()
            except FileNotFoundError:
                return "missing"
            new = transform(old)
            if new == old:
                return "unchanged"
            if not new:
                os.unlink(target)
                _fsync_dir(target.parent)
                return "removed"
            tmp_path = target.parent / f".{stream_id}{SUFFIX}.tmp"
            with open(tmp_path, "wb") as out:
                out.write(new)
                out.flush()
                os.fsync(out.fileno())
            os.rename(tmp_path, target)
            _fsync_dir(target.parent)
            return "rewritten"
        finally:
            fcntl.flock(lock.fileno(), fcntl.LOCK_UN)


@dataclass(frozen=True, slots=True)
class JsonlRecord(Generic[M]):
    """A parsed line: bytes [offset, end) of the file, `end` just after its newline."""

    offset: int
    end: int
    value: M | Any


@dataclass(frozen=True, slots=True)
class SkippedLine:
    offset: int
    end: int
    reason: str


@dataclass
class JsonlReader(Generic[M]):
    """Iterate the complete lines of a JSONL file from `start`.

    After (or during) iteration, `offset` is the byte offset just past the last complete line
    seen (parsed or skipped): store it and resume from it later. `skipped` lists bad lines.
    Give `file` (opened in binary mode, left open) to read a version of the file already
    opened: the writer renames new versions into place, and a consumer that fingerprints what
    it read must read that same version.
    """

    path: Path
    model: type[M] | None = None
    start: int = 0
    max_line_bytes: int = MAX_LINE_BYTES
    chunk_bytes: int = READ_CHUNK_BYTES
    file: IO[bytes] | None = None
    offset: int = field(init=False)
    skipped: list[SkippedLine] = field(init=False, default_factory=list)
    _oversize_start: int = field(init=False, default=0, repr=False)

    def __post_init__(self) -> None:
        if self.start < 0:
            raise ValueError("start must be >= 0")
        self.offset = self.start

    def __iter__(self) -> Iterator[JsonlRecord[M]]:
        with open(self.path, "rb") if self.file is None else nullcontext(self.file) as f:
            f.seek(self.start)
            buf = bytearray()
            buf_offset = self.start  # file offset of buf[0]
            oversized = False  # discarding the rest of a line longer than the limit
            while True:
                chunk = f.read(self.chunk_bytes)
                if not chunk:
                    return  # a trailing line without newline is not complete yet: leave it
                buf += chunk
                pos = 0
                while True:
                    nl = buf.find(b"\n", pos)
                    if nl < 0:
                        break
                    line_start, line_end = buf_offset + pos, buf_offset + nl + 1
                    if oversized:
                        oversized = False
                        self._skip(self._oversize_start, line_end, "line longer than the limit")
                    else:
                        record = self._parse(bytes(buf[pos:nl]), line_start, line_end)
                        if record is not None:
                            yield record
                    self.offset = line_end
                    pos = nl + 1
                del buf[:pos]
                buf_offset += pos
                if len(buf) > self.max_line_bytes:
                    if not oversized:
                        oversized = True
                        self._oversize_start = buf_offset
                    buf_offset += len(buf)
                    buf.clear()

    def _parse(self, raw: bytes, start: int, end: int) -> JsonlRecord[M] | None:
        if not raw.strip():
            self._skip(start, end, "blank line")
            return None
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            self._skip(start, end, f"invalid UTF-8 at byte {exc.start}")
            return None
        try:
            if self.model is None:
                value: Any = json.loads(text)
            else:
                value = self.model.model_validate_json(text)
        except ValidationError as exc:
            errors = exc.errors()
            if errors and errors[0]["type"] == "json_invalid":
                self._skip(start, end, f"invalid JSON: {errors[0]['ctx']['error']}")
            else:
                self._skip(start, end, describe_validation_error(exc))
            return None
        except ValueError as exc:  # json.JSONDecodeError
            self._skip(start, end, f"invalid JSON: {exc}")
            return None
        return JsonlRecord(start, end, value)

    def _skip(self, start: int, end: int, reason: str) -> None:
        self.skipped.append(SkippedLine(start, end, reason))
        log.warning("jsonl.line_skipped", path=str(self.path), offset=start, end=end, reason=reason)
