"""The machine, command and load lines every benchmark prints (no project imports, so any
benchmark can use it without pulling in a service's stack). Benchmarks put `bench/` on
sys.path and `from machine import ...`."""

from __future__ import annotations

import os
import platform
import shlex
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console

# Wide enough for tables and command lines when the output is piped into a file.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 140)


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def ram_gib() -> float:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) / 1024 / 1024
    except OSError:
        pass
    return float("nan")


def cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 0


def machine_line(extra: str = "") -> str:
    return (
        f"{cpu_model()}, {cores()} cores, {ram_gib():.1f} GiB RAM, "
        f"{extra + ', ' if extra else ''}Python {platform.python_version()}, "
        f"{platform.system()} {platform.release()}"
    )


def command_line() -> str:
    script = os.path.relpath(sys.argv[0], Path.cwd())
    return "uv run python " + shlex.join([script, *sys.argv[1:]])


def load_average() -> str:
    """1/5/15-minute load averages: other work on the machine skews every timing."""
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def print_header(title: str) -> None:
    console.rule(f"[bold]{title}")
    console.print(f"command: {command_line()}", soft_wrap=True)
    console.print(f"date:    {datetime.now(UTC).isoformat(timespec='seconds')}")
    console.print(f"load average at start (1/5/15 min): {load_average()}")


def print_footer(extra: str = "") -> None:
    console.print(f"load average at end (1/5/15 min): {load_average()}")
    console.print(f"date:    {datetime.now(UTC).isoformat(timespec='seconds')}")
    console.print(f"machine: {machine_line(extra)}", soft_wrap=True)
    console.print(f"command: {command_line()}", soft_wrap=True)


def code_line(engine_dir: str = "services/context-engine/src") -> str:
    """The commit measured, and whether the engine's files differed from it (figures move
    with the code)."""
    root = Path(__file__).resolve().parents[1]

    def git(*args: str) -> str:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True)
        return done.stdout.strip() if done.returncode == 0 else ""

    commit = git("rev-parse", "--short", "HEAD") or "unknown"
    dirty = git("status", "--porcelain", "--", engine_dir)
    return f"code: {commit}" + (
        ", with uncommitted changes in services/context-engine" if dirty else ""
    )
