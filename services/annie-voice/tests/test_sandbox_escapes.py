"""execute_python's sandbox against escapes, each run through the real child process.

Most attacks run under several layer sets: all layers; the kernel layers without the audit hook
(what holds once the hook is bypassed); Landlock alone (no hook, no seccomp, no network
namespace). Whatever the set, the attack must be refused or bounded, and nothing secret may come
back. The dir_fd escapes read files through the audit hook's blind spot: it resolves a relative
path against the cwd, the kernel against the directory fd.

Layer sets the host cannot build (no Landlock here, say) are skipped: there the child refuses to
run at all, which the tests of unavailability at the end check.
"""

from __future__ import annotations

import contextlib
import io
import secrets
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from annie_doubles import TOKEN, EngineDouble
from asgi_lifespan import LifespanManager

from annie_voice.app import create_app
from annie_voice.config import Settings
from annie_voice.tools import ToolConfig, make_tools, python_exec, tool_availability
from annie_voice.tools.base import ToolResult
from annie_voice.tools.python_exec import ExecutePythonTool, sandbox_support

ALL = frozenset[str]()
KERNEL_ONLY = frozenset({"audit_hook"})
LANDLOCK_ONLY = frozenset({"audit_hook", "seccomp", "netns"})
NO_BOUNDARY = frozenset({"landlock", "netns", "uid_drop"})
FILE_LAYERS = {"all layers": ALL, "kernel only": KERNEL_ONLY, "landlock only": LANDLOCK_ONLY}
PROCESS_LAYERS = {"all layers": ALL, "kernel only": KERNEL_ONLY}


def layer_params(sets: dict[str, frozenset[str]]) -> pytest.MarkDecorator:
    return pytest.mark.parametrize("layers", list(sets.values()), ids=list(sets))


@pytest.fixture
def scratch_root(tmp_path: Path) -> Path:
    return tmp_path / "scratch"


@pytest.fixture
def secret_file(tmp_path: Path) -> tuple[Path, str]:
    """A file outside the scratch directory that only its owner may read."""
    token = f"s3cret-{secrets.token_hex(8)}"
    outside = tmp_path / "outside"
    outside.mkdir()
    path = outside / "secret.txt"
    path.write_text(token)
    path.chmod(0o600)
    return path, token


@pytest.fixture
def sibling() -> Iterator[tuple[int, str]]:
    """Another process of this user with a secret in its environment (as the service holds its
    internal token): /proc/<pid>/environ shows the environment it was started with."""
    token = f"tok-{secrets.token_hex(8)}"
    proc = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(300)"],
        env={"ANNIE_VOICE_INTERNAL_TOKEN": token},
    )
    try:
        yield proc.pid, token
    finally:
        proc.kill()
        proc.wait()


async def run(
    scratch_root: Path, code: str, layers: frozenset[str] = ALL, **config: object
) -> ToolResult:
    support = sandbox_support(layers)
    if not support.available:
        pytest.skip(
            f"this host cannot build the sandbox without {sorted(layers)}: {support.reason}"
        )
    settings = {"python_scratch_root": scratch_root, "python_timeout_s": 20, **config}
    tool = ExecutePythonTool(ToolConfig(**settings), disabled_layers=layers)  # type: ignore[arg-type]
    result = await tool.run({"code": code})
    # the code ran, inside a boundary (not refused for want of one)
    assert "[sandbox: boundary=" in result.content and "boundary=none" not in result.content
    return result


def through_dir_fd(target: str) -> str:
    """Code reading `target` through a directory fd of the standard library, from a cwd deep
    inside the scratch directory: the hook sees scratch/<target> (allowed), the kernel walks
    up from the standard library to / and down to the target."""
    return (
        "import os, json\n"
        "fd = os.open(os.path.dirname(json.__file__), os.O_RDONLY)\n"
        "deep = '/'.join(['d'] * 64)\n"
        "os.makedirs(deep)\n"
        "os.chdir(deep)\n"
        f"f = os.open('../' * 64 + {target.lstrip('/')!r}, os.O_RDONLY, dir_fd=fd)\n"
        "print('LEAKED', os.read(f, 65536))\n"
    )


def landlock(layers: frozenset[str]) -> bool:
    """Whether the sandbox for `layers` rests on Landlock (with a uid drop instead, files that
    nobody may read stay readable, by design)."""
    return sandbox_support(layers).layers.get("boundary") == "landlock"


def no_fork(result: ToolResult) -> None:
    assert not result.ok, result.content
    assert "LEAKED" not in result.content
    # seccomp or the hook: not permitted; a uid drop without seccomp: RLIMIT_NPROC
    assert any(
        m in result.content
        for m in ("PermissionError", "Operation not permitted", "Resource temporarily")
    ), result.content


def refused(result: ToolResult, *secrets_: str) -> None:
    assert not result.ok, result.content
    assert "LEAKED" not in result.content
    for secret in secrets_:
        assert secret not in result.content
    # Landlock refuses a hard link out as a cross-device one (EXDEV)
    refusals = ("PermissionError", "Operation not permitted", "Invalid cross-device link")
    assert any(m in result.content for m in refusals), result.content


@layer_params(FILE_LAYERS)
async def test_a_dir_fd_relative_open_cannot_read_outside(
    scratch_root, secret_file, layers
) -> None:
    path, token = secret_file
    result = await run(scratch_root, through_dir_fd(str(path)), layers)
    refused(result, token)


@layer_params(FILE_LAYERS)
async def test_a_dir_fd_relative_open_cannot_read_another_process_environment(
    scratch_root, sibling, layers
) -> None:
    pid, token = sibling
    result = await run(scratch_root, through_dir_fd(f"/proc/{pid}/environ"), layers)
    refused(result, token)


@layer_params(FILE_LAYERS)
async def test_the_parents_environment_is_unreadable(scratch_root, layers) -> None:
    for code in (
        "import os\nprint('LEAKED', open(f'/proc/{os.getppid()}/environ', 'rb').read())",
        through_dir_fd("/proc/PPID/environ").replace("'proc/PPID", "f'proc/{os.getppid()}"),
    ):
        refused(await run(scratch_root, code, layers))


@layer_params(FILE_LAYERS)
async def test_its_own_environment_and_proc_are_unreadable(scratch_root, sibling, layers) -> None:
    pid, token = sibling
    targets = [f"/proc/{pid}/environ"]
    if landlock(layers):  # as nobody, its own /proc entries are its own to read
        targets += ["/proc/self/environ", "/proc/self/maps"]
    for target in targets:
        code = f"print('LEAKED', open({target!r}, 'rb').read())"
        refused(await run(scratch_root, code, layers), token)


@layer_params(FILE_LAYERS)
async def test_files_outside_scratch_are_unreadable(scratch_root, secret_file, layers) -> None:
    path, token = secret_file
    targets = [str(path)]
    if landlock(layers):  # world-readable files: only Landlock hides them
        targets += ["/etc/passwd", str(Path(sys.prefix).parent), "/"]
    for target in targets:
        code = (
            "import os\n"
            f"p = {target!r}\n"
            "print('LEAKED', os.listdir(p) if os.path.isdir(p) else open(p).read())"
        )
        refused(await run(scratch_root, code, layers), token)


@layer_params(FILE_LAYERS)
async def test_symlinks_and_hard_links_out_of_scratch_are_refused(
    scratch_root, secret_file, layers
) -> None:
    path, token = secret_file
    for code in (
        f"import os\nos.symlink({str(path)!r}, 'link')\nprint('LEAKED', open('link').read())",
        f"import os\nos.symlink('/', 'root')\nprint('LEAKED', open('root' + {str(path)!r}).read())",
        f"import os\nos.link({str(path)!r}, 'hard')\nprint('LEAKED', open('hard').read())",
    ):
        refused(await run(scratch_root, code, layers), token)


async def test_the_scratch_directory_starts_empty(scratch_root) -> None:
    result = await run(scratch_root, "import os\nprint(sorted(os.listdir('.')))")
    assert result.ok, result.content
    assert result.content.startswith("[]\n")


@layer_params(FILE_LAYERS)
async def test_no_tcp_connection_even_to_a_local_listener(scratch_root, layers) -> None:
    if layers == LANDLOCK_ONLY and "no tcp" not in str(sandbox_support(layers).layers):
        pytest.skip("this kernel's Landlock ABI (< 4) does not restrict TCP")
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    code = (
        "import socket\n"
        f"s = socket.create_connection(('127.0.0.1', {port}), timeout=5)\n"
        "print('LEAKED connected')"
    )
    try:
        result = await run(scratch_root, code, layers)
        # the kernel completes a handshake without accept(): anything queued came from the child
        listener.setblocking(False)
        with pytest.raises(BlockingIOError):
            listener.accept()
    finally:
        listener.close()
    assert not result.ok, result.content
    assert "LEAKED" not in result.content


@layer_params(FILE_LAYERS)
async def test_no_program_runs(scratch_root, layers) -> None:
    codes = [
        "import subprocess\nprint(subprocess.run(['id'], capture_output=True).stdout)",
        "import os\nos.execv('/bin/sh', ['sh', '-c', 'id'])",
    ]
    if layers != LANDLOCK_ONLY:  # as root, only seccomp and the hook stop a fork
        codes += ["import os\nprint('status', os.system('id'))"]
    for code in codes:
        result = await run(scratch_root, code, layers)
        assert "uid=" not in result.content, result.content


@layer_params(PROCESS_LAYERS)
async def test_fork_is_refused(scratch_root, layers) -> None:
    result = await run(
        scratch_root, "import os\npid = os.fork()\nprint('LEAKED forked', pid)", layers
    )
    no_fork(result)


@layer_params(PROCESS_LAYERS)
async def test_a_fork_bomb_is_refused_at_the_first_fork(scratch_root, layers) -> None:
    result = await run(scratch_root, "import os\nwhile True:\n    os.fork()", layers)
    no_fork(result)
    assert "timed out" not in result.content


@layer_params(PROCESS_LAYERS)
async def test_ctypes_cannot_reach_outside(scratch_root, secret_file, layers) -> None:
    path, token = secret_file
    code = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        f"fd = libc.open({str(path).encode()!r}, 0)\n"
        "buf = ctypes.create_string_buffer(256)\n"
        "if fd >= 0:\n"
        "    libc.read(fd, buf, 255)\n"
        "    print('LEAKED', buf.value)\n"
        "raise PermissionError(ctypes.get_errno(), 'open refused')\n"
    )
    refused(await run(scratch_root, code, layers), token)


@layer_params(PROCESS_LAYERS)
async def test_a_thread_bomb_is_bounded(scratch_root, layers) -> None:
    code = (
        "import threading, time\n"
        "for i in range(100_000):\n"
        "    threading.Thread(target=time.sleep, args=(2,), daemon=True).start()\n"
        "print('LEAKED all started')\n"
    )
    result = await run(scratch_root, code, layers)
    assert not result.ok and "LEAKED" not in result.content
    assert "can't start new thread" in result.content or "MemoryError" in result.content


@layer_params(PROCESS_LAYERS)
async def test_memory_is_bounded(scratch_root, layers) -> None:
    for code in ("x = bytearray(2 * 1024**3)", "x = []\nwhile True:\n    x.append(b' ' * 10**6)"):
        result = await run(scratch_root, code, layers)
        assert not result.ok
        assert "memory limit (256 MB) exceeded" in (result.error or ""), result.content


async def test_output_is_bounded(scratch_root) -> None:
    code = "import sys\nprint('a' * 5_000_000)\nsys.stderr.write('e' * 5_000_000)"
    result = await run(scratch_root, code, python_max_output_bytes=2_000)
    assert result.ok
    assert "a" * 2_001 not in result.content
    assert "e" * 3_001 not in result.content  # the tail of stderr is kept, up to 3,000 chars
    assert "[output cut at 2000 bytes]" in result.content
    assert len(result.content) < 8_000


async def test_file_size_is_bounded(scratch_root) -> None:
    code = "open('big', 'wb').write(b'x' * 64 * 1024 * 1024)\nprint('LEAKED wrote it')"
    result = await run(scratch_root, code)
    assert not result.ok and "LEAKED" not in result.content
    assert "File too large" in result.content


async def test_the_standard_library_works_inside(scratch_root) -> None:
    code = (
        "import json, math, datetime, decimal, statistics, collections, re, fractions, random\n"
        "import hashlib, zlib, csv, io, zoneinfo\n"
        "rows = list(csv.reader(io.StringIO('a,1\\nb,2')))\n"
        "print(hashlib.sha256(b'annie').hexdigest()[:8], zlib.crc32(b'annie'),\n"
        "      statistics.mean([1, 2, 3]), fractions.Fraction(1, 3) + 1,\n"
        "      decimal.Decimal('1.1') * 2,\n"
        "      json.dumps(rows), random.Random(1).randint(1, 6),\n"
        "      datetime.datetime(2024, 1, 1, tzinfo=zoneinfo.ZoneInfo('UTC')).isoformat())"
    )
    result = await run(scratch_root, code)
    assert result.ok, result.content
    here = io.StringIO()
    with contextlib.redirect_stdout(here):
        exec(code, {})  # the same code outside the sandbox: the expected output
    assert result.content.startswith(here.getvalue())


# --- without a kernel boundary: unavailable, and says why ---


async def test_without_a_kernel_boundary_the_child_refuses_to_run_code(scratch_root) -> None:
    tool = ExecutePythonTool(
        ToolConfig(python_scratch_root=scratch_root, python_timeout_s=20),
        disabled_layers=NO_BOUNDARY,
    )
    result = await tool.run({"code": "print('LEAKED it ran')"})
    assert not result.ok
    assert "LEAKED" not in result.content
    assert "execute_python is unavailable here (the code did not run)" in (result.error or "")
    assert "no kernel-enforced sandbox" in (result.error or "")
    assert "Landlock" in (result.error or "")


@pytest.fixture
def no_boundary(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real probe, run with the kernel boundary's layers switched off."""
    real = python_exec.sandbox_support
    monkeypatch.setattr(python_exec, "sandbox_support", lambda: real(NO_BOUNDARY))


def test_without_a_kernel_boundary_make_tools_leaves_execute_python_out(
    tmp_path, no_boundary
) -> None:
    config = ToolConfig(python_scratch_root=tmp_path)
    names = {tool.name for tool in make_tools(config)}
    assert "execute_python" not in names and "think" in names
    status = tool_availability(config)["execute_python"]
    assert status["available"] is False and status["boundary"] is None
    assert "no kernel-enforced sandbox" in str(status["reason"])
    assert tool_availability(ToolConfig(enabled=frozenset({"think"}))) == {}


@pytest.mark.parametrize("available", [True, False], ids=["sandbox", "no sandbox"])
async def test_api_status_says_whether_execute_python_runs_and_why_not(
    request, monkeypatch, available
) -> None:
    if not available:
        request.getfixturevalue("no_boundary")
    elif not sandbox_support().available:
        pytest.skip(f"this host cannot build the sandbox: {sandbox_support().reason}")
    settings = Settings(internal_token=TOKEN, events_enabled=False)
    app = create_app(settings, engine_transport=EngineDouble().transport())
    async with (
        LifespanManager(app),
        httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c,
    ):
        status = (await c.get("/api/status", headers={"X-Internal-Token": TOKEN})).json()
        offered = set(app.state.runtime.chat.tools)
    assert "backend" in status and "engine" in status  # the existing keys are still there
    python = status["tool_availability"]["execute_python"]
    assert python["available"] is available
    assert ("execute_python" in offered) is available
    if available:
        assert python["boundary"] and python["reason"] is None
    else:
        assert "no kernel-enforced sandbox" in python["reason"]


def test_the_probe_reports_the_boundary_it_built() -> None:
    support = sandbox_support()
    if not support.available:
        pytest.skip(f"this host cannot build the sandbox: {support.reason}")
    assert support.boundary and support.layers["boundary"] in ("landlock", "uid+netns")
    assert sandbox_support() is support  # cached
