"""`execute_python`: run the model's Python in an isolated, limited child process.

The child is `python -I -S -B sandbox_child.py`: isolated mode (no env vars, no user site, no
script dir on the path), no site-packages, no bytecode writes; an empty environment, stdin
closed, a fresh scratch directory as its cwd (deleted afterwards), its own process group (killed
whole on timeout). sandbox_child.py builds the sandbox; see there for what each layer does
and does not stop.

The tool fails closed: the child runs the model's code only inside a kernel-enforced boundary
(Landlock, or a uid drop plus a network namespace) and otherwise exits before compiling it. A
probe (the child in probe mode, once per process, cached) tells beforehand whether this host can
build that boundary: if not, `make_tools` leaves execute_python out of the model's tools and
/api/status says why (`sandbox_support().status()`). Each result ends with the boundary used.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import Field

from annie_voice.tools.base import Tool, ToolArguments, ToolConfig, ToolResult
from her_os_shared.logging import get_logger

log = get_logger(__name__)

CHILD = Path(__file__).with_name("sandbox_child.py")
MAX_CODE_CHARS = 20_000
_NOBODY = 65534
_FILE_BYTES = 16 * 1024 * 1024
_PROCESSES = 64  # per uid (nobody); only enforced when the child is not root
_REFUSED_EXIT = 3  # sandbox_child.REFUSED_EXIT: no kernel boundary, the code did not run
# layers the parent can switch off in the child (tests only; the model's code cannot reach it)
LAYERS = frozenset({"landlock", "netns", "uid_drop", "seccomp", "audit_hook"})
_PROBE_TIMEOUT_S = 60.0  # generous: a loaded host must not lose the tool to a slow start


@dataclass(frozen=True)
class SandboxSupport:
    """Whether the child can build its kernel-enforced boundary on this host, and if not why."""

    available: bool
    boundary: str | None = None
    reason: str | None = None
    layers: dict[str, Any] = field(default_factory=dict)  # the child's report

    def status(self) -> dict[str, Any]:
        return {"available": self.available, "boundary": self.boundary, "reason": self.reason}


_probed: dict[frozenset[str], SandboxSupport] = {}
_probe_lock = threading.Lock()


def sandbox_support(disabled_layers: frozenset[str] = frozenset()) -> SandboxSupport:
    """Run the child once in probe mode (cached per process; a probe that got no answer from
    the child is not cached). Blocking: ~0.2 s the first time."""
    with _probe_lock:
        cached = _probed.get(disabled_layers)
        if cached is not None:
            return cached
        support, definite = _probe(disabled_layers)
        if definite:
            _probed[disabled_layers] = support
    if support.available:
        log.info("execute_python_sandbox", boundary=support.boundary, layers=support.layers)
    else:
        log.warning("execute_python_unavailable", reason=support.reason, layers=support.layers)
    return support


def _probe(disabled: frozenset[str]) -> tuple[SandboxSupport, bool]:
    # its own private root: the scratch's parent is made traversable for nobody below
    root = Path(tempfile.mkdtemp(prefix="annie-sandbox-probe-"))
    try:
        scratch = _new_scratch(root)
        _hand_over(scratch)
        marker = _marker()
        spec = _spec(scratch, marker, disabled, memory_bytes=256 * 1024 * 1024, cpu_seconds=10)
        spec["probe"] = True
        try:
            done = subprocess.run(  # noqa: S603 (our interpreter and script, no shell)
                [sys.executable, "-I", "-S", "-B", str(CHILD), json.dumps(spec), ""],
                stdin=subprocess.DEVNULL, capture_output=True, cwd=scratch, env={},
                timeout=_PROBE_TIMEOUT_S, start_new_session=True, check=False,
            )  # fmt: skip
        except (OSError, subprocess.TimeoutExpired) as exc:
            return SandboxSupport(False, reason=f"the sandbox probe failed: {exc}"), False
        report, rest = _split_report(done.stderr, marker)
        if done.returncode == 0 and report.get("boundary"):
            return SandboxSupport(True, boundary=_describe(report), layers=report), True
        reason = report.get("reason") or (
            f"the sandbox probe exited with status {done.returncode}: "
            + rest.decode("utf-8", "replace").strip()[-500:]
        )
        return SandboxSupport(False, reason=str(reason), layers=report), "boundary" in report
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _hand_over(scratch: Path) -> None:
    if os.geteuid() == 0:
        # the child may drop to nobody: give it its scratch (and only that) to write in
        os.chmod(scratch.parent, 0o711)  # noqa: S103 (traverse only, no listing)
        os.chown(scratch, _NOBODY, _NOBODY)


def _marker() -> str:
    return f"\x00annie-sandbox-{secrets.token_hex(8)} "


def _spec(
    scratch: Path, marker: str, disabled: frozenset[str], *, memory_bytes: int, cpu_seconds: int
) -> dict[str, Any]:
    return {
        "scratch": str(scratch),
        "marker": marker,
        "memory_bytes": memory_bytes,
        "cpu_seconds": cpu_seconds,
        "file_bytes": _FILE_BYTES,
        "processes": _PROCESSES,
        "disable": sorted(disabled),
    }


def _describe(report: dict[str, Any]) -> str:
    """The boundary the child reported, in words."""
    if report.get("boundary") == "landlock":
        return str(report.get("landlock"))
    if report.get("boundary") == "uid+netns":
        return f"uid {report.get('uid')} in a network namespace"
    return "none"


class ExecutePythonTool(Tool):
    name: ClassVar[str] = "execute_python"
    description: ClassVar[str] = (
        "Run Python 3.11 code (standard library only) and return what it prints. Use for "
        "arithmetic, dates, unit conversions and data crunching. No network, no files outside "
        "its own empty working directory, limited time and memory; print the result."
    )

    class Arguments(ToolArguments):
        code: str = Field(min_length=1, max_length=MAX_CODE_CHARS)

    def __init__(
        self, config: ToolConfig, *, disabled_layers: frozenset[str] = frozenset()
    ) -> None:
        """`disabled_layers` (tests only): sandbox layers the child must not build."""
        unknown = disabled_layers - LAYERS
        if unknown:
            raise ValueError(f"unknown sandbox layers {sorted(unknown)}")
        self._config = config
        self._disabled = disabled_layers

    def sandbox(self) -> SandboxSupport:
        """Whether the child can build its boundary here (probed once, cached; blocking)."""
        return sandbox_support(self._disabled)

    async def _run(self, args: Arguments) -> ToolResult:
        code = args.code
        if "\x00" in code:
            return ToolResult.failure("execute_python: code must not contain NUL characters")
        scratch = _new_scratch(Path(self._config.python_scratch_root))
        try:
            return await self._execute(code, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    async def _execute(self, code: str, scratch: Path) -> ToolResult:
        cfg = self._config
        _hand_over(scratch)
        marker = _marker()
        spec = _spec(
            scratch, marker, self._disabled,
            memory_bytes=cfg.python_memory_bytes, cpu_seconds=math.ceil(cfg.python_timeout_s) + 1,
        )  # fmt: skip
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-I", "-S", "-B", str(CHILD), json.dumps(spec), code,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=scratch,
            env={},
            start_new_session=True,  # its own process group, so a kill takes all of it
        )  # fmt: skip
        cap = cfg.python_max_output_bytes
        assert proc.stdout is not None and proc.stderr is not None
        readers = [
            asyncio.create_task(_read_capped(proc.stdout, cap)),
            asyncio.create_task(_read_capped(proc.stderr, cap + 4096)),
        ]
        timed_out = False
        try:
            async with asyncio.timeout(cfg.python_timeout_s):
                await proc.wait()
        except TimeoutError:
            timed_out = True
        finally:
            _kill_group(proc.pid)
            await proc.wait()
        (out, out_cut), (err, err_cut) = [await r for r in readers]
        isolation, err = _split_report(err, marker)
        stdout = _text(out, out_cut, cap)
        stderr = _text(err, err_cut, cap)
        log.info(
            "execute_python",
            returncode=proc.returncode, timed_out=timed_out, boundary=isolation.get("boundary"),
            isolation=isolation, stdout_bytes=len(out), stderr_bytes=len(err),
        )  # fmt: skip
        if proc.returncode == _REFUSED_EXIT and not isolation.get("boundary"):
            return ToolResult.failure(
                "execute_python is unavailable here (the code did not run): "
                f"{isolation.get('reason', 'no kernel-enforced sandbox')}"
            )
        body = _format(stdout, stderr, isolation)
        if timed_out:
            return ToolResult.failure(
                f"execute_python: timed out after {cfg.python_timeout_s:g} s (killed)\n{body}"
            )
        if proc.returncode == -signal.SIGXCPU or proc.returncode == -signal.SIGKILL:
            return ToolResult.failure(f"execute_python: CPU time limit exceeded (killed)\n{body}")
        if "MemoryError" in stderr:
            mb = cfg.python_memory_bytes // (1024 * 1024)
            return ToolResult.failure(f"execute_python: memory limit ({mb} MB) exceeded\n{body}")
        if proc.returncode != 0:
            return ToolResult.failure(
                f"execute_python: exited with status {proc.returncode}\n{body}"
            )
        return ToolResult.success(body or "(no output; print the result)")


def _new_scratch(root: Path) -> Path:
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix="run-", dir=root))


async def _read_capped(stream: asyncio.StreamReader, cap: int) -> tuple[bytes, bool]:
    """Keep the first `cap` bytes; drain and drop the rest so the child never blocks on a pipe."""
    kept = bytearray()
    cut = False
    while chunk := await stream.read(65536):
        room = cap - len(kept)
        if len(chunk) > room:
            cut = True
        kept += chunk[: max(room, 0)]
    return bytes(kept), cut


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _split_report(err: bytes, marker: str) -> tuple[dict[str, Any], bytes]:
    head, _newline, rest = err.partition(b"\n")
    if head.startswith(marker.encode()):
        try:
            return json.loads(head[len(marker) :]), rest
        except ValueError:
            pass
    return {"network": "unknown (the child died before reporting)"}, err


def _text(raw: bytes, cut: bool, cap: int) -> str:
    text = raw.decode("utf-8", errors="replace")
    return text + f"\n[output cut at {cap} bytes]" if cut else text


def _format(stdout: str, stderr: str, isolation: dict[str, Any]) -> str:
    parts = []
    if stdout:
        parts.append(stdout.rstrip("\n"))
    if stderr:
        # a traceback's end says what went wrong: keep the tail
        parts.append("stderr:\n" + stderr.rstrip("\n")[-3_000:])
    parts.append(
        f"[sandbox: boundary={_describe(isolation)}; network={isolation.get('network')}; "
        f"seccomp={isolation.get('seccomp')}; run as uid {isolation.get('uid')}]"
    )
    return "\n".join(parts)
