"""The Aquarium in a real browser against the real context engine.

Debian's chromium (deploy/apt-packages.txt) driven by Playwright (executable_path: no
browser is ever downloaded); the dashboard built from dashboard/ and served the way `her-os
up` serves it (her_os.dashboard: Vite's preview server with its /v1 proxy); the engine is
`python -m context_engine` on a throwaway embedded PostgreSQL. Events go in through
POST /v1/events/emit and the tests read the page's data attributes (and, once, the canvas's
pixels). Every wait polls the page; nothing sleeps. Screenshots: test-artifacts/dashboard/.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

import asyncpg
import httpx
import pytest
from chromium import CHROMIUM, LAUNCH_ARGS
from service_process import stop

from her_os import dashboard
from her_os_shared.events import ObservabilityEvent

playwright_api = pytest.importorskip("playwright.sync_api")
expect = playwright_api.expect

ROOT = Path(__file__).resolve().parents[1]
ARTIFACTS = ROOT / "test-artifacts" / "dashboard"
TOKEN = "aquarium-" + "k" * 23
# Generous: a slow 2-core machine builds, starts and renders; waits end as soon as they can.
WAIT_MS = 45_000
START_S = 120.0

pytestmark = pytest.mark.timeout(300)


def _unavailable(reason: str) -> None:
    """Skip where the browser stack is missing on a developer's machine; in CI it is
    installed by the project's own files, so its absence is a failure."""
    if os.environ.get("CI"):
        pytest.fail(f"{reason} (scripts/bootstrap.sh installs it)")
    pytest.skip(reason)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, ready: Any, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + START_S
    while not ready():
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what} not ready after {START_S} s:\n{log.read_text()[-3000:]}")
        time.sleep(0.1)


# ---------------------------------------------------------------- the engine


class Engine:
    """`python -m context_engine` in a child process, on a port that survives a restart."""

    def __init__(self, database_url: str, workdir: Path) -> None:
        self.database_url = database_url
        self.workdir = workdir
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        self.starts = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _ready(self) -> bool:
        # The chronicler answers 503 until it has warmed its ring from PostgreSQL.
        with contextlib.suppress(httpx.HTTPError):
            r = httpx.get(
                f"{self.url}/v1/events", params={"limit": 1}, headers=self.headers, timeout=2
            )
            return r.status_code == 200
        return False

    @property
    def headers(self) -> dict[str, str]:
        return {"X-Internal-Token": TOKEN}

    def start(self) -> None:
        w = self.workdir
        env = {k: v for k, v in os.environ.items() if not k.startswith("CONTEXT_ENGINE_")}
        env.update(
            {
                "CONTEXT_ENGINE_HOST": "127.0.0.1",
                "CONTEXT_ENGINE_PORT": str(self.port),
                "CONTEXT_ENGINE_DATABASE_URL": self.database_url,
                "CONTEXT_ENGINE_INTERNAL_TOKEN": TOKEN,
                "CONTEXT_ENGINE_TRANSCRIPTS_DIR": str(w / "transcripts"),
                "CONTEXT_ENGINE_EVENTS_DIR": str(w / "events"),
                "CONTEXT_ENGINE_SEARCH_INDEX_DIR": str(w / "search-index"),
                "CONTEXT_ENGINE_VECTOR_DIR": str(w / "vectors"),
                "CONTEXT_ENGINE_LOG_FORMAT": "json",
            }
        )
        self.starts += 1
        log = w / f"engine-{self.starts}.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "context_engine"], env=env, stdout=out, stderr=out
            )
        _wait("the context engine", self._ready, self.proc, log)

    def stop(self) -> None:
        stop(self.proc, wait_s=20)

    def emit(self, *events: dict[str, Any]) -> None:
        r = httpx.post(
            f"{self.url}/v1/events/emit",
            json={"events": list(events)},
            headers=self.headers,
            timeout=10,
        )
        assert r.status_code == 200, r.text
        assert r.json()["accepted"] == len(events), r.json()

    def stored(self, since: datetime, until: datetime) -> list[dict[str, Any]]:
        r = httpx.get(
            f"{self.url}/v1/events",
            params={"since": since.isoformat(), "until": until.isoformat(), "limit": 1000},
            headers=self.headers,
            timeout=10,
        )
        assert r.status_code == 200, r.text
        return r.json()["events"]


def event(
    creature: str,
    event_type: str,
    *,
    at: datetime | None = None,
    data: dict[str, Any] | None = None,
    reasoning: str | None = None,
) -> dict[str, Any]:
    e = ObservabilityEvent.for_creature(
        creature, event_type, timestamp=at, data=data, reasoning=reasoning
    )
    return e.model_dump(mode="json")


@pytest.fixture(scope="module")
def engine_database(postgres_server: tuple[str, str]) -> Iterator[str]:
    """A database of this module's own on the session's embedded PostgreSQL."""
    socket_dir, user = postgres_server
    name = f"aquarium_{uuid.uuid4().hex[:10]}"

    async def admin(sql: str) -> None:
        conn = await asyncpg.connect(host=socket_dir, user=user, database="postgres")
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    def run(sql: str) -> None:
        # In a thread of its own: Playwright's sync API keeps an event loop on this one.
        with ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, admin(sql)).result()

    run(f'CREATE DATABASE "{name}"')
    yield f"postgresql+asyncpg://{user}@/{name}?host={quote(socket_dir)}"
    run(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="module")
def engine(engine_database: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Engine]:
    e = Engine(engine_database, tmp_path_factory.mktemp("engine"))
    e.start()
    yield e
    e.stop()


# ---------------------------------------------------------------- the dashboard


@pytest.fixture(scope="module")
def built() -> dashboard.Server:
    """dashboard/ built (dist/) as `make up` builds it, and how to serve it."""
    project = dashboard.default_dir()
    vite = project / "node_modules" / "vite" / "bin" / "vite.js"
    node = shutil.which("node")
    if node is None or not vite.is_file():
        _unavailable("the dashboard's npm packages are not installed (bootstrap.sh --node)")
    assert node is not None
    done = subprocess.run(
        [node, str(vite), "build", str(project), "--logLevel", "warn"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return dashboard.locate(project)


class Aquarium:
    """The built dashboard served by Vite's preview server, proxying /v1 to `engine_url`."""

    def __init__(self, server: dashboard.Server, engine_url: str, workdir: Path) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        log = workdir / f"preview-{self.port}.log"
        with log.open("wb") as out:
            self.proc = subprocess.Popen(
                server.argv("127.0.0.1", self.port),
                env=dashboard.server_env(engine_url),
                stdout=out,
                stderr=out,
            )
        _wait("the dashboard", lambda: dashboard.probe(self.url + "/").healthy, self.proc, log)

    def stop(self) -> None:
        stop(self.proc, wait_s=20)


@pytest.fixture(scope="module")
def aquarium(
    built: dashboard.Server, engine: Engine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Aquarium]:
    a = Aquarium(built, engine.url, tmp_path_factory.mktemp("aquarium"))
    yield a
    a.stop()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    if not CHROMIUM.exists():
        _unavailable("Debian's chromium is not installed (deploy/apt-packages.txt)")
    with playwright_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    # UTC: the time machine's datetime-local inputs are filled with UTC times. Reduced
    # motion: creatures hold still (states and rings still show), so pixels are stable.
    context = browser.new_context(
        viewport={"width": 1400, "height": 860}, timezone_id="UTC", reduced_motion="reduce"
    )
    p = context.new_page()
    errors: list[str] = []
    p.on("pageerror", lambda exc: errors.append(str(exc)))
    yield p
    context.close()
    assert errors == [], f"the page threw: {errors}"


def shot(page: Any, name: str) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def creature(page: Any, name: str) -> Any:
    return page.locator(f'#creature-states [data-creature="{name}"]')


def open_live(page: Any, aquarium: Aquarium, query: str = f"?token={TOKEN}") -> None:
    page.goto(aquarium.url + "/" + query)
    expect(page.locator("#connection")).to_have_attribute(
        "data-connection", "live", timeout=WAIT_MS
    )


# Is the canvas red (the error colour, #ff3b3b) at the creature's body centre? Read in
# device pixels; polled by wait_for_function, so a frame drawn a moment later still counts.
RED_AT_BODY = """(name) => {
  const li = document.querySelector(`#creature-states [data-creature="${name}"]`);
  const canvas = document.querySelector('#aquarium');
  if (!li || !li.dataset.x || !canvas.clientWidth) return false;
  const dpr = canvas.width / canvas.clientWidth;
  const x = Math.round(Number(li.dataset.x) * dpr), y = Math.round(Number(li.dataset.y) * dpr);
  const [r, g, b] = canvas.getContext('2d').getImageData(x, y, 1, 1).data;
  return r > 200 && g < 110 && b < 110;
}"""


# ---------------------------------------------------------------- the tests

ASHA_MOVES_DOWN = {
    "id": 3,
    "name": "Asha",
    "type": "person",
    "from": "L1",
    "to": "L0",
    "reason": "not seen for 90 days",
}


def test_emitted_events_change_the_right_creatures_and_catch_up_does_not_animate(
    page: Any, aquarium: Aquarium, engine: Engine
) -> None:
    # An error from five minutes ago: the stream's catch-up brings it, the navigator lists
    # it, and it must not turn cerberus red now.
    old = event("cerberus", "error", at=datetime.now(UTC) - timedelta(minutes=5))
    engine.emit(old)
    open_live(page, aquarium)
    assert "token=" not in page.url  # the token left the address bar (it is stored)
    old_row = page.locator(f'#event-list [data-event-id="{old["event_id"]}"]')
    expect(old_row).to_have_attribute("data-animated", "false", timeout=WAIT_MS)
    expect(creature(page, "cerberus")).to_have_attribute("data-state", "idle")
    expect(creature(page, "hydra")).to_have_attribute("data-state", "idle")
    assert not page.evaluate(RED_AT_BODY, "hydra")

    engine.emit(event("siren", "start", data={"clip_s": 4.2}))
    expect(creature(page, "siren")).to_have_attribute("data-state", "active", timeout=WAIT_MS)
    failed = event(
        "hydra",
        "error",
        data={"error": "emotion model failed on segment 7"},
        reasoning="the browser test made it fail",
    )
    engine.emit(failed)
    expect(creature(page, "hydra")).to_have_attribute("data-state", "error", timeout=WAIT_MS)
    page.wait_for_function(RED_AT_BODY, arg="hydra", timeout=WAIT_MS)
    shot(page, "live-active-and-error")

    engine.emit(event("siren", "complete", data={"words": 31}))
    expect(creature(page, "siren")).to_have_attribute("data-state", "idle", timeout=WAIT_MS)
    expect(creature(page, "hydra")).to_have_attribute("data-state", "error")
    in_error = page.locator('#creature-states [data-state="error"]').evaluate_all(
        "els => els.map(e => e.dataset.creature)"
    )
    # basilisk records the engine's refused requests (another test sends a wrong token).
    assert [name for name in in_error if name != "basilisk"] == ["hydra"]

    # The memory zone: counts from /v1/tiers/stats through the proxy, and a live tier change.
    expect(page.locator("#memory-tiers")).to_have_attribute("data-loaded", "true")
    engine.emit(
        event("salmon", "metric", data={"run_id": 5, "changes": [ASHA_MOVES_DOWN]}),
    )
    moved = page.locator('#memory-moves [data-entity="Asha"]')
    expect(moved).to_have_attribute("data-animated", "true", timeout=WAIT_MS)
    expect(moved).to_have_attribute("data-from", "L1")
    expect(moved).to_have_attribute("data-to", "L0")

    # The navigator: fresh events animated, the details show data and reasoning.
    row = page.locator(f'#event-list [data-event-id="{failed["event_id"]}"]')
    expect(row).to_have_attribute("data-animated", "true")
    row.locator("button").click()
    details = page.locator("#details")
    expect(details).to_have_attribute("data-event-id", failed["event_id"])
    expect(details).to_contain_text("the browser test made it fail")
    expect(details).to_contain_text("emotion model failed on segment 7")
    expect(page.locator("#demo-banner")).to_be_hidden()
    shot(page, "live-details")


PRIYA_MOVES_UP = {
    "id": 7,
    "name": "Priya",
    "type": "person",
    "from": "L0",
    "to": "L1",
    "reason": "seen in 3 sessions",
}


def test_time_machine_replays_a_stored_range(page: Any, aquarium: Aquarium, engine: Engine) -> None:
    base = (datetime.now(UTC) - timedelta(hours=2)).replace(microsecond=0)
    story = [
        event("seahorse", "start", at=base),
        event("seahorse", "complete", at=base + timedelta(seconds=1)),
        event("kraken", "start", at=base + timedelta(seconds=2)),
        event(
            "salmon",
            "metric",
            at=base + timedelta(seconds=3),
            data={"run_id": 41, "changes": [PRIYA_MOVES_UP]},
        ),
        event("squid", "start", at=base + timedelta(seconds=4)),
        event("squid", "error", at=base + timedelta(seconds=5), reasoning="graph timed out"),
    ]
    engine.emit(*story)
    since, until = base - timedelta(seconds=2), base + timedelta(seconds=10)
    deadline = time.monotonic() + 30
    while len(engine.stored(since, until)) < len(story):  # written behind the ring
        assert time.monotonic() < deadline, "the engine did not store the range"
        time.sleep(0.2)

    open_live(page, aquarium)
    page.click("#timemachine-toggle")
    page.fill("#tm-since", since.strftime("%Y-%m-%dT%H:%M:%S"))
    page.fill("#tm-until", until.strftime("%Y-%m-%dT%H:%M:%S"))
    page.select_option("#tm-speed", "5")
    page.click("#tm-play")
    panel = page.locator("#timemachine")
    expect(page.locator("body")).to_have_attribute("data-mode", "replay")
    expect(page.locator("#connection")).to_have_attribute("data-connection", "replay")
    expect(panel).to_have_attribute("data-replay-state", "done", timeout=WAIT_MS)
    expect(panel).to_have_attribute("data-replay-total", str(len(story)))
    expect(panel).to_have_attribute("data-replay-played", str(len(story)))

    rows = page.locator("#event-list li")
    expect(rows).to_have_count(len(story))
    assert set(rows.evaluate_all("els => els.map(e => e.dataset.origin)")) == {"replay"}
    assert set(rows.evaluate_all("els => els.map(e => e.dataset.animated)")) == {"true"}
    # The states at the end of the range, on the replay's clock.
    expect(creature(page, "squid")).to_have_attribute("data-state", "error")
    expect(creature(page, "kraken")).to_have_attribute("data-state", "active")
    expect(creature(page, "seahorse")).to_have_attribute("data-state", "idle")
    move = page.locator('#memory-moves [data-entity="Priya"]')
    expect(move).to_have_attribute("data-from", "L0")
    expect(move).to_have_attribute("data-to", "L1")
    shot(page, "time-machine")

    page.click("#tm-live")
    expect(page.locator("#connection")).to_have_attribute(
        "data-connection", "live", timeout=WAIT_MS
    )
    expect(page.locator("body")).to_have_attribute("data-mode", "live")


def test_the_page_reconnects_after_the_engine_restarts(
    page: Any, aquarium: Aquarium, engine: Engine
) -> None:
    open_live(page, aquarium)
    engine.stop()
    away = (
        "['reconnecting', 'demo']"
        ".includes(document.querySelector('#connection').dataset.connection)"
    )
    page.wait_for_function(away, timeout=WAIT_MS)
    shot(page, "engine-down")
    engine.start()
    expect(page.locator("#connection")).to_have_attribute(
        "data-connection", "live", timeout=WAIT_MS
    )
    expect(page.locator("#demo-banner")).to_be_hidden()
    engine.emit(event("chimera", "start", data={"tool": "web_search"}))
    expect(creature(page, "chimera")).to_have_attribute("data-state", "active", timeout=WAIT_MS)
    shot(page, "reconnected")


def test_a_refused_token_asks_for_another(page: Any, aquarium: Aquarium) -> None:
    page.goto(aquarium.url + "/?token=wrong-token")
    expect(page.locator("#connection")).to_have_attribute(
        "data-connection", "unauthorized", timeout=WAIT_MS
    )
    expect(page.locator("#token-form")).to_be_visible()
    expect(page.locator("#demo-banner")).to_be_hidden()  # the engine is there: no demo
    page.fill("#token-input", TOKEN)
    page.click("#token-form button[type=submit]")
    expect(page.locator("#connection")).to_have_attribute(
        "data-connection", "live", timeout=WAIT_MS
    )
    page.reload()  # the token was remembered
    expect(page.locator("#connection")).to_have_attribute(
        "data-connection", "live", timeout=WAIT_MS
    )


def test_the_demo_takes_over_while_the_engine_is_unreachable(
    page: Any, built: dashboard.Server, tmp_path: Path
) -> None:
    nowhere = f"http://127.0.0.1:{_free_port()}"  # nothing listens there
    offline = Aquarium(built, nowhere, tmp_path)
    try:
        page.goto(offline.url + f"/?token={TOKEN}")
        expect(page.locator("#connection")).to_have_attribute(
            "data-connection", "demo", timeout=WAIT_MS
        )
        banner = page.locator("#demo-banner")
        expect(banner).to_be_visible()
        expect(banner).to_have_attribute("data-demo", "on")
        expect(banner).to_contain_text("DEMO")
        demo_rows = page.locator('#event-list li[data-origin="demo"]')
        expect(demo_rows.first).to_be_attached(timeout=WAIT_MS)
        page.wait_for_selector(
            '#creature-states [data-state="active"]', state="attached", timeout=WAIT_MS
        )
        assert page.locator('#event-list li:not([data-origin="demo"])').count() == 0
        shot(page, "demo")
    finally:
        offline.stop()
