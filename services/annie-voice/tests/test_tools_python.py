"""execute_python: results, limits, and the sandbox attacks it must stop."""

from __future__ import annotations

import socket
import threading
from pathlib import Path

import pytest

from annie_voice.tools import ToolConfig
from annie_voice.tools.python_exec import ExecutePythonTool, sandbox_support


@pytest.fixture(autouse=True)
def _needs_the_sandbox() -> None:
    """Where the host cannot build the kernel sandbox the child refuses to run anything (see
    test_sandbox_escapes.py for that case); these tests are about what runs inside it."""
    support = sandbox_support()
    if not support.available:
        pytest.skip(f"this host cannot build execute_python's sandbox: {support.reason}")


@pytest.fixture
def scratch_root(tmp_path: Path) -> Path:
    return tmp_path / "scratch"


def tool(scratch_root: Path, **config) -> ExecutePythonTool:
    return ExecutePythonTool(
        ToolConfig(python_scratch_root=scratch_root, **{"python_timeout_s": 3, **config})
    )


async def run(scratch_root: Path, code: str, **config):
    return await tool(scratch_root, **config).run({"code": code})


async def test_prints_the_result_and_reports_the_isolation(scratch_root) -> None:
    result = await run(scratch_root, "import math\nprint(math.factorial(10))")
    assert result.ok, result.content
    assert result.content.startswith("3628800\n")
    assert "[sandbox: boundary=" in result.content and "; network=" in result.content
    assert "boundary=none" not in result.content


async def test_an_infinite_loop_times_out(scratch_root) -> None:
    result = await run(scratch_root, "while True:\n    pass", python_timeout_s=1)
    assert not result.ok
    assert "timed out after 1 s" in (result.error or "")


async def test_a_memory_bomb_hits_the_memory_limit(scratch_root) -> None:
    result = await run(scratch_root, "x = bytearray(2 * 1024**3)")
    assert not result.ok
    assert "memory limit (256 MB) exceeded" in (result.error or "")


async def test_no_network_even_to_a_local_listener(scratch_root) -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    port = listener.getsockname()[1]
    accepted: list[object] = []

    def accept() -> None:
        try:
            accepted.append(listener.accept())
        except OSError:
            pass

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        code = f"import socket\nsocket.create_connection(('127.0.0.1', {port}), timeout=2)"
        result = await run(scratch_root, code)
    finally:
        listener.close()
        thread.join()
    assert not result.ok
    assert "PermissionError" in result.content
    assert accepted == []


@pytest.mark.parametrize(
    ("code", "refusal"),
    [
        ("print(open('/etc/passwd').read())", "reading /etc/passwd"),
        ("import os\nprint(os.listdir('/'))", "os.listdir outside"),
        ("open('../escape', 'w').write('x')", "writing"),
        ("import os\nos.open('/tmp/x-annie', os.O_WRONLY | os.O_CREAT)", "writing /tmp/x-annie"),
        ("import os\nos.symlink('/etc/passwd', 'p')", "os.symlink"),
        ("import os\nos.chdir('/')", "os.chdir outside"),
        ("import os\nos.fork()", "os.fork"),
        ("import os\nos.system('id')", "os.system"),
        ("import subprocess\nsubprocess.run(['sh'])", "importing _posixsubprocess"),
        ("import ctypes", "importing ctypes"),
        ("import os\nos.kill(1, 9)", "os.kill"),
        ("import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))",
         "resource.setrlimit"),
    ],
)  # fmt: skip
async def test_sandbox_escapes_are_refused(scratch_root, code, refusal) -> None:
    result = await run(scratch_root, code)
    assert not result.ok
    assert "sandbox:" in result.content and refusal in result.content
    assert "root:" not in result.content
    assert not (scratch_root / "escape").exists()


# Attacks on the audit hook itself: each got a root shell or read /etc/passwd before the hook
# bound everything it uses at install time and refused these events and modules.
HOOK_ATTACKS = {
    "rebound module globals": (
        "import sys\nm = sys.modules['__main__']\nm._BLOCKED_IMPORTS = frozenset()\n"
        "m._BLOCKED_PREFIXES = ('zzz',)\nm._BLOCKED_EVENTS = frozenset()\n"
        "import os\nos.system('head -1 /etc/passwd')",
        "os.system",
    ),
    "rebound builtins": (
        "import builtins\nbuiltins.any = lambda *a: True\nprint(open('/etc/passwd').read())",
        "reading /etc/passwd",
    ),
    "rebound realpath internals": (
        "import os, posixpath\nposixpath.abspath = lambda p: os.getcwd() + '/x'\n"
        "posixpath._joinrealpath = lambda *a: (os.getcwd() + '/x', True)\n"
        "os.fspath = lambda p: 'x'\nprint(open('/etc/passwd').read())",
        "reading /etc/passwd",
    ),
    "hook found through gc": ("import gc\ngc.get_objects()", "gc.get_objects"),
    "subinterpreter without the hook": (
        "import _xxsubinterpreters as s\ns.run_string(s.create(), 'import os; os.system(\"id\")')",
        "importing _xxsubinterpreters",
    ),
    "memory poking C test module": ("import _testcapi", "importing _testcapi"),
    "forged bytecode": ("(lambda: 0).__code__.replace(co_consts=(1,))", "code.__new__"),
    "tracer rewriting frames": ("import sys\nsys.settrace(lambda *a: None)", "sys.settrace"),
}


@pytest.mark.parametrize(("code", "refusal"), HOOK_ATTACKS.values(), ids=list(HOOK_ATTACKS))
async def test_the_audit_hook_cannot_be_blinded_or_bypassed(scratch_root, code, refusal) -> None:
    result = await run(scratch_root, code)
    assert not result.ok
    assert f"sandbox: {refusal}" in result.content
    assert "root:" not in result.content and "uid=" not in result.content


async def test_the_standard_library_still_imports_and_reads(scratch_root) -> None:
    code = "import json, dataclasses, decimal, typing\nprint(len(open(json.__file__).read()) > 0)"
    result = await run(scratch_root, code)
    assert result.ok, result.content
    assert "True" in result.content


async def test_a_fork_bomb_is_stopped(scratch_root) -> None:
    code = "import os\nwhile True:\n    os.fork()"
    result = await run(scratch_root, code)
    assert not result.ok
    assert "sandbox: os.fork is not allowed" in result.content


async def test_files_inside_the_scratch_directory_are_allowed(scratch_root) -> None:
    code = (
        "import os, json\n"
        "os.mkdir('d')\n"
        "with open('d/data.json', 'w') as f:\n"
        "    json.dump({'a': 1}, f)\n"
        "print(json.load(open('d/data.json')), os.listdir('.'))"
    )
    result = await run(scratch_root, code)
    assert result.ok, result.content
    assert "{'a': 1} ['d']" in result.content


async def test_the_scratch_directory_is_removed_afterwards(scratch_root) -> None:
    await run(scratch_root, "open('left.txt', 'w').write('x')")
    await run(scratch_root, "while True:\n    pass", python_timeout_s=1)
    assert list(scratch_root.iterdir()) == []


async def test_output_is_cut_at_the_cap(scratch_root) -> None:
    result = await run(scratch_root, "print('a' * 100_000)", python_max_output_bytes=1_000)
    assert result.ok
    assert result.content.count("a" * 1_000) == 1
    assert "a" * 1_001 not in result.content
    assert "[output cut at 1000 bytes]" in result.content


async def test_errors_show_the_models_traceback(scratch_root) -> None:
    result = await run(scratch_root, "1 / 0")
    assert not result.ok
    assert "ZeroDivisionError: division by zero" in result.content
    assert "sandbox_child" not in result.content


async def test_the_environment_is_empty_and_stdin_closed(scratch_root, monkeypatch) -> None:
    monkeypatch.setenv("ANNIE_SECRET_TOKEN", "hunter2")
    result = await run(scratch_root, "import os, sys\nprint(dict(os.environ), sys.stdin.read())")
    assert result.ok, result.content
    assert "hunter2" not in result.content
