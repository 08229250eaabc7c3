"""`execute_python`: run the model's Python in an isolated, limited child process.

The child is `python -I -S -B sandbox_child.py`: isolated mode (no env vars, no user site, no
script dir on the path), no site-packages, no bytecode writes; an empty environment, stdin
closed, a fresh scratch directory as its cwd (deleted afterwards), its own process group (killed
whole on timeout). sandbox_child.py applies the kernel limits and the audit hook; see there for
what each layer does and does not stop.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import secrets
import shutil
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar

from annie_voice.tools.base import Tool, ToolConfig, ToolResult
from her_os_shared.logging import get_logger

log = get_logger(__name__)

CHILD = Path(__file__).with_name("sandbox_child.py")
MAX_CODE_CHARS = 20_000
_NOBODY = 65534
_FILE_BYTES = 16 * 1024 * 1024
_PROCESSES = 64  # per uid (nobody); only enforced when the child is not root


class ExecutePythonTool(Tool):
    name: ClassVar[str] = "execute_python"
    description: ClassVar[str] = (
        "Run Python 3.11 code (standard library only) and return what it prints. Use for "
        "arithmetic, dates, unit conversions and data crunching. No network, no files outside "
        "its own empty working directory, limited time and memory; print the result."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {"code": {"type": "string", "minLength": 1, "maxLength": MAX_CODE_CHARS}},
        "required": ["code"],
        "additionalProperties": False,
    }

    def __init__(self, config: ToolConfig) -> None:
        self._config = config

    async def _run(self, args: dict[str, Any]) -> ToolResult:
        code: str = args["code"]
        if "\x00" in code:
            return ToolResult.failure("execute_python: code must not contain NUL characters")
        scratch = _new_scratch(Path(self._config.python_scratch_root))
        try:
            return await self._execute(code, scratch)
        finally:
            shutil.rmtree(scratch, ignore_errors=True)

    async def _execute(self, code: str, scratch: Path) -> ToolResult:
        cfg = self._config
        if os.geteuid() == 0:
            # the child drops to nobody: give it its scratch (and only that) to write in
            os.chmod(scratch.parent, 0o711)  # noqa: S103 (traverse only, no listing)
            os.chown(scratch, _NOBODY, _NOBODY)
        marker = f"\x00annie-sandbox-{secrets.token_hex(8)} "
        spec = {
            "scratch": str(scratch),
            "marker": marker,
            "memory_bytes": cfg.python_memory_bytes,
            "cpu_seconds": math.ceil(cfg.python_timeout_s) + 1,
            "file_bytes": _FILE_BYTES,
            "processes": _PROCESSES,
        }
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
            returncode=proc.returncode, timed_out=timed_out, isolation=isolation,
            stdout_bytes=len(out), stderr_bytes=len(err),
        )  # fmt: skip
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
    parts.append(f"[sandbox: network={isolation.get('network')}]")
    return "\n".join(parts)
