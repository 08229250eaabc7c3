"""Across services: Annie SIGKILLed while clients chat with her, then started again. She holds
no store of her own (her sessions live in her process; memory is the context engine's), so
what must hold is that the kill costs nothing but the chats in flight: the engine stays
healthy and its stores unchanged (its drift check finds nothing), and the new process answers
from memory at once.

Annie is a real process (`python -m annie_voice`, no LLM configured: the offline memory
responder); the context engine runs in this process under uvicorn on a real PostgreSQL."""

from __future__ import annotations

import asyncio
import contextlib
import signal
import subprocess
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from pathlib import Path

import httpx
from annie_doubles import parse_sse
from engine_harness import (
    TOKEN,
    ServedEngine,
    engine_settings,
    eventually,
    free_port,
    serve_engine,
    write_conversation,
)
from service_process import healthy, spawn

ANNIE_TOKEN = "k" * 32
DAY = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
QUESTION = "Where is the spare key?"


def _spawn(root: Path, engine_url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    return spawn("annie_voice", "ANNIE_VOICE_", port, {
        "INTERNAL_TOKEN": ANNIE_TOKEN,
        "CONTEXT_ENGINE_URL": engine_url,
        "CONTEXT_ENGINE_TOKEN": TOKEN,
        "MODELS_DIR": str(root / "models"),
        "PYTHON_SCRATCH_ROOT": str(root / "scratch"),
    }, log)  # fmt: skip


class Chatters:
    """Clients asking Annie the question over and over, each chat in a session of its own;
    a chat the kill cut short (or refused while she was down) is counted, not retried."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.answers: list[str] = []
        self.cut = 0
        self.stop = asyncio.Event()

    def answered(self, n: int) -> Callable[[], Awaitable[bool | None]]:
        async def check() -> bool | None:
            return True if len(self.answers) >= n else None

        return check

    async def run(self) -> None:
        headers = {"X-Internal-Token": ANNIE_TOKEN}
        async with httpx.AsyncClient(timeout=30) as client:
            while not self.stop.is_set():
                try:
                    r = await client.post(
                        self.url + "/v1/chat", json={"message": QUESTION}, headers=headers
                    )
                except httpx.TransportError:
                    self.cut += 1
                    await asyncio.sleep(0.05)
                    continue
                assert r.status_code == 200, r.text
                events = parse_sse(r.text)
                if not events or events[-1][0] != "done":  # the stream was cut mid-answer
                    self.cut += 1
                    continue
                self.answers.append("".join(d.get("text", "") for e, d in events if e == "token"))


async def _check(engine: ServedEngine) -> dict:
    async with httpx.AsyncClient(base_url=engine.base_url, timeout=60) as client:
        r = await client.get("/v1/check", headers={"X-Internal-Token": TOKEN})
        assert r.status_code == 200, r.text
        health = await client.get("/health")
        assert health.status_code == 200 and health.json()["status"] == "ok", health.text
        return r.json()


async def test_annie_killed_mid_chat_comes_back_and_memory_is_untouched(
    tmp_path: Path, db_url: str
) -> None:
    settings = engine_settings(tmp_path / "engine", db_url)
    write_conversation(settings.transcripts_dir, "ak-1", DAY, [
        ("Asha", "The spare key is under the blue flowerpot by the door."),
        ("Ravi", "Good, I will use it when I water the plants on Friday."),
    ])  # fmt: skip
    # aclosing: a failed assertion stops the engine before the database fixture drops it.
    async with contextlib.aclosing(serve_engine(settings)) as engines:
        engine = await anext(engines)

        async def stored(engine: ServedEngine = engine) -> bool | None:
            found = await _check(engine)
            return True if found["counts"].get("vector_rows") == 2 else None

        await eventually(stored, "the conversation ingested and embedded", deadline_s=120)
        before = (await _check(engine))["counts"]

        port, log = free_port(), tmp_path / "annie.log"
        url = f"http://127.0.0.1:{port}"
        proc = _spawn(tmp_path, engine.base_url, port, log)
        try:
            await healthy(proc, url, log, "Annie")
            chatters = Chatters(url)
            tasks = [asyncio.create_task(chatters.run()) for _ in range(3)]
            await eventually(chatters.answered(6), "chats answered before the kill", 120)
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(30) == -signal.SIGKILL
            answered = len(chatters.answers)
            await asyncio.sleep(1.0)  # chats meet a closed port meanwhile

            proc = _spawn(tmp_path, engine.base_url, port, log)
            await healthy(proc, url, log, "Annie")
            await eventually(
                chatters.answered(answered + 6), "chats answered after the restart", 120
            )
            chatters.stop.set()
            await asyncio.gather(*tasks)
        finally:
            if proc.poll() is None:
                proc.terminate()
                proc.wait(30)

        assert chatters.cut >= 1  # the kill did cut chats short (or refuse them)
        # Every answer, before and after the kill, is from memory.
        assert all("flowerpot" in a.lower() for a in chatters.answers), chatters.answers[:3]
        after = await _check(engine)
        assert after["drift_total"] == 0, after["drift"]
        assert after["counts"] == before
