"""Reading data/logs/*.log: the last lines of a file, and following files like `tail -f`."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

_BLOCK = 64 * 1024


def tail_lines(path: Path, lines: int) -> list[str]:
    """The last `lines` lines of a file, reading backwards so big logs cost little."""
    if lines <= 0:
        return []
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return []
    with handle:
        handle.seek(0, os.SEEK_END)
        pos = handle.tell()
        data = b""
        while pos > 0 and data.count(b"\n") <= lines:
            step = min(_BLOCK, pos)
            pos -= step
            handle.seek(pos)
            data = handle.read(step) + data
    text = data.decode("utf-8", errors="replace")
    return text.splitlines()[-lines:]


# The supervisor writes this line into a child's log each time it starts the child.
START_MARKER = "--- her-os: starting "


def tail_text(path: Path, lines: int = 30) -> str:
    """The end of a child's log, from its latest start only (older runs are noise)."""
    tail = tail_lines(path, lines)
    starts = [i for i, line in enumerate(tail) if line.startswith(START_MARKER)]
    return "\n".join(tail[starts[-1] + 1 :] if starts else tail)


def log_names(logs_dir: Path) -> list[str]:
    return sorted(p.stem for p in logs_dir.glob("*.log")) if logs_dir.is_dir() else []


class _Follower:
    """Reads what was appended to one file since last time; starts over when it shrinks."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = path.stat().st_size if path.exists() else 0
        self.partial = b""

    def read(self) -> list[str]:
        try:
            size = self.path.stat().st_size
        except FileNotFoundError:
            return []
        if size < self.offset:  # truncated or replaced
            self.offset, self.partial = 0, b""
        if size == self.offset:
            return []
        with self.path.open("rb") as handle:
            handle.seek(self.offset)
            chunk = handle.read(size - self.offset)
        self.offset += len(chunk)
        data = self.partial + chunk
        *complete, self.partial = data.split(b"\n")
        return [line.decode("utf-8", errors="replace") for line in complete]


def follow(
    paths: dict[str, Path],
    interval: float = 0.5,
    should_stop: Callable[[], bool] = lambda: False,
) -> Iterator[tuple[str, str]]:
    """Yield (name, line) for every line appended to any of `paths`, until stopped."""
    followers = {name: _Follower(path) for name, path in paths.items()}
    while not should_stop():
        for name, follower in followers.items():
            for line in follower.read():
                yield name, line
        time.sleep(interval)
