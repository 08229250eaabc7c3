"""Annie's page: a question typed into its chat box, in Debian's Chromium.

- Against the real stack: a context engine (real PostgreSQL) holding an ingested
  conversation, Annie (`annie_voice.app`, offline responder: no LLM) under uvicorn, the page
  loaded with `#token=` (no request carries it in its URL). A typed question streams an
  answer that says the remembered fact and names its source, and the page lists the memory
  it used (Annie's `memories` event); a follow-up goes to the same chat session.
- Against a scripted chat stream (`ChatStreamDouble`, serving Annie's real page): what the
  page does with each kind of frame — text arriving while the stream is still open (send
  disabled meanwhile), a list of memories used (untrusted text, shown as text), the design's
  `data: {"type": …}` frames, HTTP errors, a stream `error` event, a stream cut short, a
  network failure, and a refused token.

Helpers come from tests/voice_e2e.py and tests/test_voice_browser.py. Every wait polls the
page with a generous deadline; nothing sleeps. Screenshot: test-artifacts/voice/chat.png.
"""

from __future__ import annotations

import asyncio
import json
import shutil
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from chromium import CHROMIUM, LAUNCH_ARGS
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Route
from test_voice_browser import ARTIFACTS, _unavailable
from voice_e2e import (
    ANNIE_TOKEN,
    FACT,
    QUESTION,
    WAIT_MS,
    annie_app,
    free_port,
    memory_engine,
    served,
)

from annie_voice.voice.page import page_html

pytestmark = pytest.mark.timeout(600)

FOLLOW_UP = "When is Priya moving to Lisbon?"
# The offline responder says what it cannot do on a session's first answer only.
# Said only when nothing is found (what Annie cannot do without a model).
NOTHING_FOUND_ONLY = "answering from your memories only"

# The page's state for the tests: the form's data attributes and the last chat turn's parts.
TURN_JS = """() => {
    const turns = [...document.querySelectorAll(".line.chat")], t = turns[turns.length - 1];
    const form = document.getElementById("ask");
    return {
        answer: t ? t.children[1].textContent : null,
        notes: t ? [...t.querySelectorAll(".note")].map((n) => n.textContent) : [],
        memories: t ? [...t.querySelectorAll(".memories li")].map((li) =>
            ({speaker: li.children[0].textContent, date: li.children[1].textContent,
              text: li.children[2].textContent, markup: li.children[2].children.length})) : [],
        facts: t ? [...t.querySelectorAll(".facts li")].map((li) => li.textContent) : [],
        errors: [...document.querySelectorAll(".line.error")].map((e) => e.lastChild.textContent),
        session: form.dataset.session || null,
        state: form.dataset.state,
        sendDisabled: document.getElementById("send").disabled,
    };
}"""


def _need_browser() -> Any:
    async_api = pytest.importorskip("playwright.async_api")
    if not CHROMIUM.exists():
        _unavailable("Debian's chromium is not installed (deploy/apt-packages.txt)")
    return async_api


async def _turns(page: Any) -> int:
    return int(await page.get_attribute("#ask", "data-turns"))


async def _submit(page: Any, question: str, *, click: bool = False) -> int:
    """Type `question` and send it (Enter, or the Send button); the page's turn count before."""
    before = await _turns(page)
    await page.fill("#question", question)
    if click:
        await page.click("#send")
    else:
        await page.press("#question", "Enter")
    return before


async def _finished(page: Any, before: int) -> dict[str, Any]:
    """Wait until the turn sent after `before` turns is over; the page's state then."""
    await page.wait_for_function(
        """(n) => { const f = document.getElementById("ask");
                    return Number(f.dataset.turns) > n && f.dataset.state === "idle"; }""",
        arg=before,
        timeout=WAIT_MS,
        polling=100,
    )
    return await page.evaluate(TURN_JS)


async def _ask(page: Any, question: str, *, click: bool = False) -> dict[str, Any]:
    return await _finished(page, await _submit(page, question, click=click))


# --------------------------------------------------------------------------- the real stack


async def test_a_typed_question_streams_an_answer_from_memory_in_chromium(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async_api = _need_browser()
    monkeypatch.setenv("ANNIE_VOICE_VOICE_PRELOAD", "false")  # typing needs no voice models
    async with (
        memory_engine(tmp_path) as engine_url,
        served(annie_app(engine_url, tmp_path), free_port()) as url,
        async_api.async_playwright() as p,
    ):
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = await browser.new_page()
            chat_requests: list[Any] = []
            page.on("request", lambda r: chat_requests.append(r) if "/v1/chat" in r.url else None)
            sent: list[str] = []
            page.on("request", lambda r: sent.append(r.url))
            await page.goto(f"{url}/#token={ANNIE_TOKEN}")  # a fragment: never sent
            assert ANNIE_TOKEN not in page.url  # taken into localStorage, dropped from the bar

            first = await _ask(page, QUESTION)
            assert first["errors"] == [], first
            assert FACT in first["answer"].lower(), first
            # The source: who said it and when (the conversation was ingested as yesterday's).
            assert "Yesterday, Priya said:" in first["answer"], first
            # The memory it used, listed below the answer from the `memories` event.
            assert any(FACT in m["text"].lower() for m in first["memories"]), first
            assert all(m["markup"] == 0 for m in first["memories"]), first
            assert any(n.startswith("memory: ok (") for n in first["notes"]), first
            session = first["session"]
            assert session, first

            second = await _ask(page, FOLLOW_UP)
            assert second["errors"] == [], second
            assert FACT in second["answer"].lower(), second
            assert NOTHING_FOUND_ONLY not in second["answer"], second
            assert second["session"] == session, second
            # not a new session: not briefed again
            assert not any(n.startswith("memory:") for n in second["notes"]), second
            await page.screenshot(path=str(tmp_path / "chat.png"))
        finally:
            await browser.close()

        async with httpx.AsyncClient(base_url=url, headers={"X-Internal-Token": ANNIE_TOKEN}) as c:
            held = (await c.get("/v1/chat/sessions")).json()
    assert held["total"] == 1, held
    assert held["sessions"][0]["id"] == session and held["sessions"][0]["turns"] == 2, held
    assert held["sessions"][0]["briefed"] is True, held

    assert len(chat_requests) == 2
    assert sent and not any(ANNIE_TOKEN in u for u in sent), sent  # the token in no URL
    for request in chat_requests:
        assert request.method == "POST" and ANNIE_TOKEN not in request.url
        assert request.headers.get("x-internal-token") == ANNIE_TOKEN
    assert "session_id" not in chat_requests[0].post_data_json
    assert chat_requests[1].post_data_json == {"message": FOLLOW_UP, "session_id": session}

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(tmp_path / "chat.png", ARTIFACTS / "chat.png")


# --------------------------------------------------------------------------- scripted streams

TOKEN = "chat-box-" + "t" * 23
SESSION = "chat-session-1"
HOSTILE = '<img src=x onerror="window.__pwned = 1">Priya is moving to Lisbon.'


def sse(event: str | None, data: dict[str, Any], end: str = "\r\n") -> str:
    """One frame: named (`event:`) as Annie sends them, or unnamed (the design's form)."""
    lines = ([f"event: {event}"] if event else []) + [f"data: {json.dumps(data)}"]
    return end.join(lines) + end + end


class ChatStreamDouble:
    """Annie's real page at `/` and a scripted `POST /v1/chat`: each request is recorded and
    answered with the next script, `(status, parts)`; a part is text sent as it is, or an
    `asyncio.Event` the stream waits on (so the test sees the page mid-stream)."""

    def __init__(self) -> None:
        self.scripts: list[tuple[int, list[str | asyncio.Event]]] = []
        self.requests: list[tuple[str, dict[str, str], dict[str, Any]]] = []

    def app(self) -> Starlette:
        async def page(request: Request) -> Response:
            return HTMLResponse(page_html())

        async def chat(request: Request) -> Response:
            self.requests.append((str(request.url), dict(request.headers), await request.json()))
            status, parts = self.scripts.pop(0)

            async def body() -> AsyncIterator[bytes]:
                for part in parts:
                    if isinstance(part, asyncio.Event):
                        await part.wait()
                    else:
                        yield part.encode()

            kind = "text/event-stream" if status == 200 else "application/json"
            return StreamingResponse(body(), status_code=status, media_type=kind)

        return Starlette(routes=[Route("/", page), Route("/v1/chat", chat, methods=["POST"])])


def _session(new: bool) -> dict[str, Any]:
    memory = {"status": "ok", "items": 2, "chars": 120, "reason": None, "elapsed_ms": 7}
    return {"session_id": SESSION, "new": new, "backend": "none", "tools": [],
            "memory": memory, "memory_reset": False}  # fmt: skip


async def test_the_chat_box_renders_each_kind_of_stream_in_chromium() -> None:
    async_api = _need_browser()
    double = ChatStreamDouble()
    gate = asyncio.Event()
    memories = [
        {"speaker": "Priya", "timestamp": "2026-05-08T13:56:00Z", "text": HOSTILE},
        {"speaker": "Arjun", "timestamp": 1778248560.0, "text": "We should have dinner."},
    ]
    double.scripts = [
        (200, [  # Annie's frames (CRLF), the answer cut by the gate, the memories it used
            sse("session", _session(new=True)),
            sse("token", {"text": "Priya is moving "}),
            gate,
            sse("token", {"text": "to Lisbon."}),
            sse("memories", {"memories": memories, "facts": [
                {"fact": "Priya lives in Lisbon", "since": "2026-05-08T13:56:00Z",
                 "replaced": [{"fact": "Priya lives in Pune <b>x</b>"}]}]}),
            ": ping\r\n\r\n",
            sse("done", {"session_id": SESSION, "text": "Priya is moving to Lisbon.", "turn": 1}),
        ]),
        (200, [  # the design's frames: no `event:`, the kind in `type`; LF line ends
            sse(None, {"type": "session", "session_id": SESSION}, end="\n"),
            sse(None, {"type": "token", "text": "In March."}, end="\n"),
            sse(None, {"type": "done"}, end="\n"),
        ]),
        (500, [json.dumps({"detail": "the engine exploded"})]),
        (200, [
            sse("session", _session(new=False)),
            sse("token", {"text": "Partial"}),
            sse("error", {"message": "the model went away", "kind": "llm"}),
        ]),
        (200, [sse("session", _session(new=False)), sse("token", {"text": "Cut"})]),
        (401, [json.dumps({"detail": "invalid X-Internal-Token header"})]),
    ]  # fmt: skip
    async with (
        served(double.app(), free_port()) as url,
        async_api.async_playwright() as p,
    ):
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=LAUNCH_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(f"{url}/?token={TOKEN}")

            # 1. Text shows while the stream is open; Send is disabled until it ends.
            before = await _submit(page, "Where is Priya moving?", click=True)
            await page.wait_for_function(
                """() => { const t = document.querySelector(".line.chat");
                           return t && t.children[1].textContent === "Priya is moving "; }""",
                timeout=WAIT_MS,
                polling=100,
            )
            mid = await page.evaluate(TURN_JS)
            assert mid["sendDisabled"] and mid["state"] == "streaming", mid
            gate.set()
            first = await _finished(page, before)
            assert first["answer"] == "Priya is moving to Lisbon." and not first["sendDisabled"]
            assert first["session"] == SESSION and first["errors"] == [], first
            assert "memory: ok (2 items, 7 ms)" in first["notes"], first
            # The memories used, below the answer: memory text is data, never markup.
            assert [m["speaker"] for m in first["memories"]] == ["Priya", "Arjun"], first
            assert first["memories"][0]["text"] == HOSTILE, first
            # The facts it stood on, with what each replaced (as text, never markup).
            assert len(first["facts"]) == 1, first
            assert "Priya lives in Lisbon" in first["facts"][0], first
            assert "(before: Priya lives in Pune <b>x</b>)" in first["facts"][0], first
            assert all(m["markup"] == 0 and m["date"] for m in first["memories"]), first
            assert "2026" in first["memories"][0]["date"], first
            assert await page.evaluate("window.__pwned") is None
            assert await page.locator("#transcript img").count() == 0

            # 2. A follow-up (Enter) carries the session; the design's frame form is read too.
            second = await _ask(page, "When?")
            assert second["answer"] == "In March." and second["errors"] == [], second

            # 3. An HTTP error, 4. a stream error event, 5. a stream cut short: said plainly.
            third = await _ask(page, "And then?")
            assert third["errors"] == ["chat: HTTP 500: the engine exploded"], third
            fourth = await _ask(page, "Again?")
            assert fourth["answer"] == "Partial", fourth
            assert fourth["errors"][-1] == "chat: the model went away", fourth
            fifth = await _ask(page, "Once more?")
            assert fifth["answer"] == "Cut", fifth
            assert "ended before it finished" in fifth["errors"][-1], fifth

            # 6. A refused token: said, and the page asks for the token.
            sixth = await _ask(page, "Token?")
            assert sixth["errors"][-1].endswith("HTTP 401: invalid X-Internal-Token header")
            assert await page.locator("#token-row").is_visible()

            # 7. The network fails: said, and the box is usable again.
            await page.route("**/v1/chat", lambda route: route.abort("connectionrefused"))
            seventh = await _ask(page, "Anyone there?")
            assert "could not reach Annie" in seventh["errors"][-1], seventh
            assert not seventh["sendDisabled"] and seventh["state"] == "idle", seventh
        finally:
            await browser.close()

    bodies = [body for _, _, body in double.requests]
    assert bodies[0] == {"message": "Where is Priya moving?"}
    assert bodies[1] == {"message": "When?", "session_id": SESSION}
    assert all(body.get("session_id") == SESSION for body in bodies[1:]), bodies
    for request_url, headers, _ in double.requests:
        assert TOKEN not in request_url and headers.get("x-internal-token") == TOKEN
