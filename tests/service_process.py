"""A service as a real process for the cross-service crash tests: started with its settings
in the environment (`python -m <package>`, output to a log), waited for until `/health`
answers, SIGKILLed by the test and started again."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import httpx
from engine_harness import eventually


def spawn(
    package: str, prefix: str, port: int, settings: dict[str, str], log: Path
) -> subprocess.Popen[bytes]:
    """`python -m package` on 127.0.0.1:`port`, with `settings` as `{prefix}{KEY}` variables
    (the caller's own variables of that prefix dropped), appending its output to `log`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(prefix)}
    own = {"HOST": "127.0.0.1", "PORT": str(port), **settings}
    env.update({prefix + key: value for key, value in own.items()})
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", package], env=env, stdout=out, stderr=out)


def stop(proc: subprocess.Popen[bytes] | None, wait_s: float = 30) -> None:
    """SIGTERM, then SIGKILL if it has not exited within `wait_s`; a finished process is left."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(wait_s)


def tail(log: Path) -> str:
    return log.read_text(errors="replace")[-3000:]


async def healthy(proc: subprocess.Popen[bytes], url: str, log: Path, what: str) -> None:
    """Until `GET {url}/health` answers 200; fails with the log's tail if the process exits."""
    async with httpx.AsyncClient(timeout=2) as client:

        async def up() -> bool | None:
            assert proc.poll() is None, tail(log)
            with contextlib.suppress(httpx.HTTPError):
                if (await client.get(url + "/health")).status_code == 200:
                    return True
            return None

        await eventually(up, f"{what} to answer", deadline_s=300)
