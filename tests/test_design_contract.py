"""The design's API reference as a contract test, against the real platform.

At collection, the design (`../shared/design/her-os-architecture.md`, beside the repository;
absent: every test here is skipped, saying so) is read: §6 "API Reference" gives the routes
(its tables and `### METHOD /path` headings) and, from its code blocks, each example: the
request line (method, path, query), its headers, its body (JSON, as text, or multipart
fields) and the answer (status, JSON, or the `data:` frames of a stream); §7 gives the event
schema; Layer 1 the JSONL payload. One test per route, in an order that lets each build on
the last; a route of the design without a test here fails, naming it, so a route added to the
design shows up as a failure of this suite, not as a silent gap.

Each example is sent verbatim to the three services running as real processes (the engine on
a fresh PostgreSQL database; Annie's Claude backend is a scripted double that answers as the
Messages API does, scripted from the design's own chat frames). The only additions are the
ones ADR 0020 records: the `X-Internal-Token` header where the design sends none (every `/v1`
route and Annie's voice routes require it), and the data a request needs (speech made by
espeak-ng, 16 kHz mono 16-bit as the design asks; the design's JSONL line, moved into the
design's own `hours_back` window; a session on the design's daily date). Each answer is held
to the design's status and to every field its example names, with the example's JSON type
(a number stays a number, an int an int, a list a list of the example item's shape; the
example's null says nothing of the type). Values are checked where the request fixes them.

Design example → test (`test_design_route[<id>]`; "table": a row of §6's route tables,
which gives no body, so the project's form is sent and 2xx with the described content asserted):

| design example | id | asserted beyond status and the example's fields |
|---|---|---|
| `GET /health` (table) | audio GET /health | ok/degraded only |
| `POST /v1/enroll` (table) | audio POST /v1/enroll | the example's speaker |
| `GET /v1/enrollment` (table) | audio GET /v1/enrollment | the style listed |
| `POST /v1/transcribe` | audio POST /v1/transcribe | 2 speakers; emotion fields |
| `GET /v1/session/{id}` (table) | audio GET /v1/session/{session_id} | `sweep` |
| `POST /v1/feedback` (table) | audio POST /v1/feedback | kept at the end |
| `POST /v1/sweep/{id}` (table) | audio POST /v1/sweep/{session_id} | the sweep done |
| `POST /v1/session/{id}/end` (table) | audio POST /v1/session/{session_id}/end | `segments` |
| `POST /v1/cleanup` (table) | audio POST /v1/cleanup | `removed` |
| `DELETE /v1/enrollment/{style}` | audio DELETE /v1/enrollment/{style} | then 404 |
| `DELETE /v1/enrollment` (table) | audio DELETE /v1/enrollment | none left |
| `GET /health` | engine GET /health | exactly `{"status": "ok"}` |
| `POST /v1/ingest/c9cf6c7f-…` | engine POST /v1/ingest/{session_id} | `status: "ingested"` |
| `GET /v1/context?query=coffee+shop…` | engine GET /v1/context | epoch, "type:name" |
| `GET /v1/entities?entity_type=person` | engine GET /v1/entities | the example's name |
| `GET /v1/daily?date=2026-03-04` | engine GET /v1/daily | the example's people |
| `GET /v1/stats` | engine GET /v1/stats | the three counts |
| `POST /v1/events/emit` (bare array) | engine POST /v1/events/emit | 1/0/1; §7's event |
| `GET /v1/events/stream?x_internal_token=` | engine GET /v1/events/stream | no `event:` |
| `GET /v1/events?creature=kraken&limit=50` | engine GET /v1/events | `start/end/source=db` |
| `GET /` (table) | annie GET / | the voice page (ADR 0020) |
| `GET /health` (table) | annie GET /health | ok/degraded only |
| `GET /api/status` (table) | annie GET /api/status | sessions, backends |
| `POST /v1/chat` (claude) | annie POST /v1/chat | frames by `data.type` |
| `GET /v1/chat/sessions` (table) | annie GET /v1/chat/sessions | the chat's session |
| `POST /start` (§8: per-session backend) | annie POST /start | `llm` kept |
| `POST /sessions/{id}/api/offer` (table) | annie POST /sessions/{id}/api/offer | SDP answer |
| `PATCH /sessions/{id}/api/offer` (table) | annie PATCH /sessions/{id}/api/offer | ok |
| `POST /api/offer` (table) | annie POST /api/offer | SDP answer |

The chat also runs every backend the design allows (`auto`, `claude`, `qwen3.5-9b`): each
answers with the design's frames, or (not configured here) is a 422 naming its settings.
`test_the_design_parses_into_the_routes_this_suite_tests` checks the parser found every
request block of §6 with its answer.

Held loosely on purpose: a transcribed segment's `emotion` may be null (the example sends
`ser_all_speakers: false`: no emotion for a voice nobody enrolled, so the speaker of the
design's example is enrolled first and its segments must carry the design's emotion object);
an entity's `properties` and an event's `data` are checked as objects only (their keys are
data: her-os keeps "wife" as a relation, not as `properties.relationship`).

Not covered: the keepalive comment every 15 s of the stream (a wait of 15 s), the design's
no-auth routes without the token (deliberately 401, ADR 0020; the per-service tests check
it), the voice pipeline's audio once a peer connects (tests/test_voice_browser.py).
"""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import numpy as np
import pytest
from design_shape import assert_shape as shape
from platform_harness import START_S, Service, platform, until
from service_process import tail

ROOT = Path(__file__).resolve().parents[1]
DESIGN = ROOT.parent / "shared" / "design" / "her-os-architecture.md"
TOKENS = {
    "engine": "contract-engine-" + "e" * 20,
    "audio": "contract-audio-" + "a" * 20,
    "annie": "contract-annie-" + "n" * 20,
}
WAIT_S = 180.0  # generous: a 2-core machine runs three services and their models

pytestmark = pytest.mark.timeout(900)


# ------------------------------------------------------------------ the design, parsed


@dataclass
class Example:
    """One code block of §6: a request and the answer the design shows."""

    method: str
    target: str  # path and query, as written
    headers: dict[str, str]
    body: str | None = None  # a JSON body, as written
    form: dict[str, Any] = field(default_factory=dict)  # multipart fields
    files: dict[str, str] = field(default_factory=dict)  # multipart file field → description
    status: int | None = None
    response: Any = None  # the answer's JSON (`[...]` read as an empty list)
    frames: list[dict[str, Any]] = field(default_factory=list)  # a stream's `data:` frames
    comments: list[str] = field(default_factory=list)  # a stream's `:` lines
    alternatives: dict[str, set[Any]] = field(default_factory=dict)  # `<-- or "db"` notes

    @property
    def path(self) -> str:
        return urlsplit(self.target).path

    @property
    def query(self) -> dict[str, str]:
        return {k: v[0] for k, v in parse_qs(urlsplit(self.target).query).items()}


@dataclass
class Route:
    service: str  # "audio", "annie", "engine"
    method: str
    template: str  # the design's path ({session_id} as written)
    description: str
    index: int  # place in the document
    example: Example | None = None

    @property
    def key(self) -> str:
        return f"{self.method} {self.template}"

    @property
    def id(self) -> str:
        return f"{self.service} {self.key}"


@dataclass
class Design:
    routes: list[Route]
    event_schema: dict[str, Any]
    jsonl: dict[str, Any]
    text: str

    def route(self, service: str, key: str) -> Route:
        return next(r for r in self.routes if r.service == service and r.key == key)

    def example(self, service: str, key: str) -> Example:
        example = self.route(service, key).example
        assert example is not None, f"the design has no example for {service} {key}"
        return example


SERVICES = {"Audio Pipeline": "audio", "Annie Voice": "annie", "Context Engine": "engine"}
METHODS = "GET|POST|PUT|PATCH|DELETE"
SERVICE_HEADING = re.compile(r"^### (.+?) \(port \d+\)\s*$")
ROUTE_HEADING = re.compile(rf"^### ({METHODS}) (/\S*)\s*$")
TABLE_ROW = re.compile(rf"^\|\s*({METHODS})\s*\|\s*`([^`]+)`\s*\|(.*)\|\s*$")
REQUEST_LINE = re.compile(rf"^({METHODS}) (/\S*)\s*$")
HEADER_LINE = re.compile(r"^([A-Za-z][A-Za-z0-9-]*): (.+)$")
STATUS_LINE = re.compile(r"^(\d{3})(?: [A-Za-z ]+)?$")


def _section(lines: list[str], start: str, stop: str) -> list[str]:
    begin = next(i for i, line in enumerate(lines) if line.startswith(start))
    end = next(i for i in range(begin + 1, len(lines)) if lines[i].startswith(stop))
    return lines[begin:end]


def _json_block_after(lines: list[str], marker: str) -> dict[str, Any]:
    at = next(i for i, line in enumerate(lines) if line.startswith(marker))
    begin = next(i for i in range(at, len(lines)) if lines[i].startswith("```json")) + 1
    end = next(i for i in range(begin, len(lines)) if lines[i].startswith("```"))
    return json.loads("\n".join(lines[begin:end]))


def _loose_json(text: str) -> Any:
    """The design's JSON with its elisions: `[...]` is an empty list, `, ...}` ends the
    object."""
    text = re.sub(r"\[\s*\.\.\.\s*\]", "[]", text)
    text = re.sub(r",\s*\.\.\.\s*}", "}", text)
    return json.loads(text)


def _parse_example(block: list[str]) -> Example:
    method, target = REQUEST_LINE.match(block[0]).groups()  # type: ignore[union-attr]
    i, headers = 1, {}
    while i < len(block) and (m := HEADER_LINE.match(block[i])):
        headers[m.group(1)] = m.group(2)
        i += 1
    body: list[str] = []
    while i < len(block):
        line = block[i].strip()
        if STATUS_LINE.match(line) or line.startswith(("Response", "data:", ":")):
            break
        body.append(block[i])
        i += 1
    example = Example(method, target, headers)
    if headers.get("Content-Type", "").startswith("multipart/form-data"):
        for line in filter(str.strip, body):
            name, value = line.split(": ", 1)
            if value.startswith("<"):
                example.files[name] = value
            else:
                example.form[name] = json.loads(value)
    else:
        example.body = "\n".join(body).strip() or None
    answer: list[str] = []
    for line in block[i:]:
        text = line.split("<--")[0].rstrip()
        note = line.split("<--")[1] if "<--" in line else ""
        stripped = text.strip()
        if (m := STATUS_LINE.match(stripped)) and example.status is None and not answer:
            example.status = int(m.group(1))
        elif stripped.startswith("data:"):
            example.frames.append(_loose_json(stripped[5:]))
        elif stripped.startswith(":"):
            example.comments.append(stripped[1:].strip())
        elif not stripped.startswith("Response"):
            answer.append(text)
            if note and (m := re.search(r'"(\w+)":\s*("[^"]*"|[-\d.]+|true|false)', text)):
                others = {json.loads(f'"{x}"') for x in re.findall(r'"([^"]*)"', note)}
                example.alternatives[m.group(1)] = {json.loads(m.group(2)), *others}
    if "".join(answer).strip():
        example.response = _loose_json("\n".join(answer))
    return example


def _template_regex(template: str) -> re.Pattern[str]:
    parts = re.split(r"(\{[^}]+\})", template)
    return re.compile(
        "^" + "".join("[^/]+" if p.startswith("{") else re.escape(p) for p in parts) + "$"
    )


def parse_design(text: str) -> Design:
    lines = text.splitlines()
    api = _section(lines, "## 6. API Reference", "## 7.")
    routes: list[Route] = []
    examples: list[tuple[str, Example, str]] = []
    service, heading, block = "", "", None
    for line in api:
        if block is not None:
            if line.startswith("```"):
                if block and REQUEST_LINE.match(block[0]):
                    examples.append((service, _parse_example(block), heading))
                block = None
            else:
                block.append(line)
        elif line.startswith("```"):
            block = []
        elif m := SERVICE_HEADING.match(line):
            service = SERVICES[m.group(1)]
        elif m := ROUTE_HEADING.match(line):
            heading = line
            if not any(r.service == service and r.key == " ".join(m.groups()) for r in routes):
                routes.append(Route(service, m.group(1), m.group(2), "", len(routes)))
        elif line.startswith("### "):
            heading = line
        elif m := TABLE_ROW.match(line):
            description = m.group(3).split("|")[-1].strip()
            routes.append(Route(service, m.group(1), m.group(2), description, len(routes)))
    for service, example, heading in examples:
        found = [
            r
            for r in routes
            if r.service == service
            and r.method == example.method
            and _template_regex(r.template).match(example.path)
        ]
        if not found:  # an example of a route no table or heading lists
            found = [Route(service, example.method, example.path, heading, len(routes))]
            routes.append(found[0])
        found[0].example = example
    return Design(
        routes=routes,
        event_schema=_json_block_after(lines, "### Event Schema"),
        jsonl=_json_block_after(lines, "**JSONL payload structure:**"),
        text=text,
    )


def _load_design() -> tuple[Design | None, str | None]:
    """The parsed design, or None (absent); a document the parser cannot read is an error of
    this suite's tests (reported by each), not of the collection."""
    if not DESIGN.is_file():
        return None, None
    try:
        return parse_design(DESIGN.read_text(encoding="utf-8")), None
    except (StopIteration, ValueError, KeyError, AttributeError) as exc:
        return None, f"{DESIGN} could not be read as §6/§7 are written: {exc!r}"


DESIGN_DOC, DESIGN_ERROR = _load_design()
NO_DESIGN = f"the design is not at {DESIGN} (a checkout beside ../shared)"


# ------------------------------------------------------------------ the answers, checked


# Objects whose keys are data, not fields: an entity's `properties` (the design's example:
# Priya's `relationship`), an event's `data`.
FREE_FORM = frozenset({"properties", "data"})


def assert_shape(
    design: Any, ours: Any, where: str = "answer", nullable: frozenset[str] = frozenset()
) -> None:
    shape(design, ours, where, nullable, FREE_FORM)


def json_of(r: httpx.Response, status: int | None = 200) -> Any:
    if status is not None:
        assert r.status_code == status, f"{r.request.method} {r.request.url.path}: {r.text}"
    return r.json()


def sse_frames(text: str) -> list[dict[str, Any]]:
    """A stream's frames: {"event": the `event:` line or None, "data": its JSON, "id": …}."""
    frames = []
    for chunk in text.replace("\r\n", "\n").split("\n\n"):
        frame: dict[str, Any] = {"event": None, "data": None, "comments": []}
        data: list[str] = []
        for line in chunk.split("\n"):
            if line.startswith(":"):
                frame["comments"].append(line[1:].strip())
            elif ":" in line:
                name, _, value = line.partition(":")
                value = value[1:] if value.startswith(" ") else value
                if name == "data":
                    data.append(value)
                else:
                    frame[name] = value
        if data:
            frame["data"] = json.loads("\n".join(data))
        if data or frame["comments"] or frame["event"]:
            frames.append(frame)
    return frames


def design_reader(text: str) -> list[dict[str, Any]]:
    """What the design's client reads of a stream: the JSON of every `data:` line."""
    return [f["data"] for f in sse_frames(text) if f["data"] is not None]


# ------------------------------------------------------------------ the platform


class _Always(list):  # a double's script that never runs out
    def pop(self, index: int = -1) -> Any:
        return self[0]


def claude_script(design: Design) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """Claude's replies made from the design's chat frames: the tokens before its
    `tool_use`, that tool call (name and input); after the tool's result, the rest."""
    frames = design.example("annie", "POST /v1/chat").frames
    cut = next((i for i, f in enumerate(frames) if f["type"] == "tool_use"), len(frames))
    before = [f["text"] for f in frames[:cut] if f["type"] == "token"]
    after = [f["text"] for f in frames[cut:] if f["type"] == "token"] or ["."]
    calls = [
        {"name": f["name"], "arguments": f["input"]} for f in frames if f["type"] == "tool_use"
    ]

    def reply(body: dict[str, Any]) -> dict[str, Any]:
        last = (body.get("messages") or [{}])[-1].get("content")
        answered = isinstance(last, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in last
        )
        return {"text": after} if answered else {"text": before, "tool_calls": calls}

    return reply


@dataclass
class World:
    design: Design
    services: dict[str, Service]
    root: Path
    state: dict[str, Any] = field(default_factory=dict)

    def client(self, service: str, timeout: float = 120) -> httpx.Client:
        return httpx.Client(base_url=self.services[service].url, timeout=timeout)

    def headers(self, service: str, **extra: str) -> dict[str, str]:
        return {"X-Internal-Token": TOKENS[service], **extra}

    def prepare(self, service: str, example: Example) -> tuple[str, dict[str, str]]:
        """The example's target and headers with `<token>` filled in, and the token header
        added where the design sends no token (ADR 0020)."""
        target = example.target.replace("<token>", TOKENS[service])
        headers = {k: v.replace("<token>", TOKENS[service]) for k, v in example.headers.items()}
        if example.files:
            headers.pop("Content-Type", None)  # httpx writes it, with the boundary
        carries = "X-Internal-Token" in headers or "x_internal_token=" in example.target
        if not carries:
            headers["X-Internal-Token"] = TOKENS[service]
        return target, headers

    def send(
        self,
        service: str,
        example: Example,
        nullable: frozenset[str] = frozenset(),
        **files: tuple[str, bytes, str],
    ) -> Any:
        """The example as written (plus the token); its answer checked against the design's
        status and fields; the answer's JSON."""
        target, headers = self.prepare(service, example)
        with self.client(service) as c:
            r = c.request(
                example.method,
                target,
                headers=headers,
                content=None if example.body is None else example.body.encode(),
                data={k: _form_value(v) for k, v in example.form.items()} or None,
                files=files or None,
            )
        assert r.status_code == (example.status or 200), f"{example.target}: {r.text}"
        body = r.json()
        assert_shape(example.response, body, nullable=nullable)
        return body


def _form_value(value: Any) -> str:
    return json.dumps(value) if isinstance(value, bool) else str(value)


@pytest.fixture(scope="module")
def world(
    postgres_server: tuple[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    if DESIGN_ERROR is not None:
        pytest.fail(DESIGN_ERROR)
    if DESIGN_DOC is None:
        pytest.skip(NO_DESIGN)
    from annie_doubles import ScriptedClaudeDouble

    root = tmp_path_factory.mktemp("design-contract")
    with ScriptedClaudeDouble([]) as claude:
        claude.script = _Always([claude_script(DESIGN_DOC)])
        extra = {
            "engine": {
                # Ingestion when a test asks for it (the design's POST /v1/ingest answers
                # "ingested" for a file not yet read): the watcher and the rescan wait.
                "WATCH_DEBOUNCE_S": "120",
                "WATCH_MAX_DELAY_S": "240",
                "RECONCILE_INTERVAL_S": "3600",
                # §7's example event is from 2026-03-04: older than the 7-day retention.
                "EVENTS_RETENTION_DAYS": "36500",
            },
            "audio": {"SWEEP_IDLE_S": "3600"},  # the sweep when the test asks for it
            "annie": {"CLAUDE_API_KEY": "sk-contract-test", "CLAUDE_BASE_URL": claude.url},
        }
        with platform(postgres_server, root, TOKENS, extra=extra) as services:
            w = World(DESIGN_DOC, services, root)
            with w.client("engine") as c:
                until(
                    "the engine's events",
                    lambda: c.get("/v1/events", headers=w.headers("engine")).status_code == 200,
                    START_S,
                    services["engine"].log,
                )
            yield w
            for s in services.values():
                assert s.proc.poll() is None, f"{s.name} exited:\n{tail(s.log)}"


# ------------------------------------------------------------------ data the requests need


RATE = 16_000  # the design's WAV: 16 kHz mono 16-bit


def wav16k(turns: list[tuple[str, str]]) -> bytes:
    from speech_synth import conversation, to_wav_bytes

    samples, rate, _ = conversation(turns)
    n = int(len(samples) * RATE / rate)
    resampled = np.interp(np.arange(n) * rate / RATE, np.arange(len(samples)), samples)
    return to_wav_bytes(resampled.astype(np.float32), RATE)


def needs_espeak() -> None:
    from speech_synth import have_espeak

    if not have_espeak():
        pytest.skip("espeak-ng is not installed (scripts/bootstrap.sh installs it)")


def transcribe_example(w: World) -> Example:
    return w.design.example("audio", "POST /v1/transcribe")


def speaker_of_example(w: World) -> str:
    return transcribe_example(w).response["segments"][0]["speaker"]


def spoken_clip(w: World) -> bytes:
    """Two voices: the first says the design's segment (and more), the second answers."""
    from speech_synth import VOICE_A, VOICE_B

    if "clip" not in w.state:
        said = transcribe_example(w).response["segments"][0]["text"]
        w.state["clip"] = wav16k(
            [
                (VOICE_A, f"{said} from the plumber about the kitchen sink."),
                (VOICE_B, "Sure, I will call him tomorrow morning before work."),
            ]
        )
    return w.state["clip"]


def write_jsonl(w: World, payload: dict[str, Any]) -> Path:
    folder = w.root / "transcripts"
    folder.mkdir(exist_ok=True)
    path = folder / f"{payload['session_id']}.jsonl"
    tmp = folder / f".{payload['session_id']}.jsonl.tmp"
    tmp.write_text(json.dumps(payload) + "\n")
    tmp.rename(path)
    return path


def design_session(w: World) -> dict[str, Any]:
    """Layer 1's JSONL example, started two hours ago (inside the design's `hours_back`)."""
    return {**w.design.jsonl, "session_started_at": time.time() - 2 * 3600}


def daily_date(w: World) -> str:
    return w.design.example("engine", "GET /v1/daily").query["date"]


def seed_memory(w: World) -> None:
    """Beside the design's session: another recent one about the coffee shop and a person,
    and one on the design's daily date with the people its example names."""
    if w.state.get("seeded"):
        return
    seg = w.design.jsonl["segments"][0]
    speaker = seg["speaker"]
    daily = w.design.example("engine", "GET /v1/daily")
    people = daily.response["people"]
    day = datetime.fromisoformat(daily_date(w)).replace(hour=10, tzinfo=UTC)
    sessions = [
        {
            **w.design.jsonl,
            "session_id": "contract-recent",
            "session_started_at": time.time() - 3 * 3600,
            "segments": [
                {**seg, "segment_id": "seg-001-0.00-4.00", "end": 4.0,
                 "text": f"My wife {people[0]} loves the coffee shop on 5th street."},
            ],
        },
        {
            **w.design.jsonl,
            "session_id": "contract-day",
            "session_started_at": day.timestamp(),
            "segments": [
                {**seg, "segment_id": "seg-001-0.00-4.00", "end": 4.0,
                 "text": f"I spoke with my wife {people[0]} about the trip to Goa."},
                {**seg, "segment_id": "seg-002-5.00-9.00", "start": 5.0, "end": 9.0,
                 "text": f"Later my colleague {people[-1]} called me about the plumber."},
            ],
        },
    ]  # fmt: skip
    with w.client("engine") as c:
        for payload in sessions:
            write_jsonl(w, payload)
            r = c.post(f"/v1/ingest/{payload['session_id']}", headers=w.headers("engine"))
            assert r.status_code == 200, r.text
    assert speaker
    w.state["seeded"] = True


def memory_settled(w: World) -> dict[str, Any]:
    """Every session ingested, ended and extracted (the design's and the seeded ones)."""
    seed_memory(w)
    if not w.state.get("design_ingested"):
        write_jsonl(w, design_session(w))
        with w.client("engine") as c:
            sid = w.design.jsonl["session_id"]
            assert c.post(f"/v1/ingest/{sid}", headers=w.headers("engine")).status_code == 200
        w.state["design_ingested"] = True
    found: dict[str, Any] = {}
    with w.client("engine") as c:

        def settled() -> bool:
            stats = c.get("/v1/stats", headers=w.headers("engine")).json()
            jobs = stats["jobs"]
            found.update(stats)
            return (
                stats["sessions"]["ended"] >= 3
                and jobs["todo"] == jobs["doing"] == 0
                and stats["entities_count"] > 0
            )

        until("the sessions to be ended and extracted", settled, WAIT_S, w.services["engine"].log)
    return found


# ------------------------------------------------------------------ the tests, by route


def audio_health(w: World, route: Route) -> None:
    with w.client("audio") as c:
        body = json_of(c.get("/health"))
    assert body["status"] in ("ok", "degraded")


def audio_ready(w: World) -> None:
    with w.client("audio") as c:
        until(
            "the audio pipeline's models",
            lambda: c.get("/v1/status", headers=w.headers("audio")).json()["ready"],
            WAIT_S,
            w.services["audio"].log,
        )


def audio_enroll(w: World, route: Route) -> None:
    needs_espeak()
    from speech_synth import VOICE_A

    audio_ready(w)
    said = transcribe_example(w).response["segments"][0]["text"]
    clip = wav16k(
        [
            (VOICE_A, f"{said}. I read my mail every morning before breakfast."),
            (VOICE_A, "Then I walk to the coffee shop and call my wife."),
        ]
    )
    person = speaker_of_example(w)
    with w.client("audio") as c:
        r = c.post(
            "/v1/enroll",
            data={"person": person},
            files={"file": ("me.wav", clip, "audio/wav")},
            headers=w.headers("audio"),
        )
    body = json_of(r)
    assert body["person"] == person and body["style_id"]
    w.state["style"] = body["style_id"]


def audio_enrollment(w: World, route: Route) -> None:
    with w.client("audio") as c:
        body = json_of(c.get("/v1/enrollment", headers=w.headers("audio")))
    if "style" in w.state:
        (person,) = [p for p in body["persons"] if p["person"] == speaker_of_example(w)]
        assert w.state["style"] in [s["id"] for s in person["styles"]]


def audio_transcribe(w: World, route: Route) -> None:
    needs_espeak()
    audio_ready(w)
    example = route.example
    assert example is not None
    (field_name,) = example.files  # the WAV's field: `audio`
    design = example.response
    # `ser_all_speakers: false`: no emotion for a voice nobody enrolled (and none for a
    # segment too short to judge): null there, the design's object where there is one.
    clip = {field_name: ("clip.wav", spoken_clip(w), "audio/wav")}
    body = w.send("audio", example, frozenset({"emotion"}), **clip)
    assert body["session_id"] == example.form["session_id"]
    assert body["sweep_active"] is False and body["segments"], body
    # Every segment has every field of the design's; the design's two voices are found.
    for segment in body["segments"]:
        assert set(design["segments"][0]) <= set(segment), segment
    assert body["speakers_detected"] == 2, body
    said = design["segments"][0]["text"].lower().rstrip(".")
    assert said.split()[-1] in " ".join(s["text"].lower() for s in body["segments"])
    # The enrolled voice is named; emotion (ser_all_speakers: false) only for it, with the
    # design's emotion fields.
    if "style" in w.state:
        mine = [s for s in body["segments"] if s["speaker"] == speaker_of_example(w)]
        assert mine, body["segments"]
        felt = [s for s in mine if s["emotion"] is not None]
        assert felt, mine
        for s in felt:
            assert_shape(design["segments"][0]["emotion"], s["emotion"], "segment.emotion")
        others = [s for s in body["segments"] if s["speaker"] != speaker_of_example(w)]
        assert all(s["emotion"] is None for s in others), others
    w.state["transcribed"] = body


def transcribed(w: World) -> dict[str, Any]:
    if "transcribed" not in w.state:
        audio_transcribe(w, w.design.route("audio", "POST /v1/transcribe"))
    return w.state["transcribed"]


def audio_session(w: World, route: Route) -> None:
    sid = transcribed(w)["session_id"]
    with w.client("audio") as c:
        body = json_of(c.get(f"/v1/session/{sid}", headers=w.headers("audio")))
    assert body["session_id"] == sid and "sweep" in body
    assert body["segments_count"] >= len(transcribed(w)["segments"])


def audio_feedback(w: World, route: Route) -> None:
    answer = transcribed(w)
    segment = answer["segments"][-1]
    body = {"session_id": answer["session_id"], "segment_id": segment["segment_id"],
            "speaker": "Arun"}  # fmt: skip
    with w.client("audio") as c:
        json_of(c.post("/v1/feedback", json=body, headers=w.headers("audio")))
    w.state["corrected"] = segment["segment_id"]


def audio_sweep(w: World, route: Route) -> None:
    sid = transcribed(w)["session_id"]
    with w.client("audio") as c:
        r = c.post(f"/v1/sweep/{sid}", headers=w.headers("audio"))
        assert r.status_code in (200, 202), r.text

        def done() -> bool:
            s = c.get(f"/v1/session/{sid}", headers=w.headers("audio")).json()["sweep"]
            w.state["sweep"] = s
            return s is not None and s["state"] in ("done", "failed")

        until("the sweep", done, WAIT_S, w.services["audio"].log)
    assert w.state["sweep"]["state"] == "done", w.state["sweep"]


def audio_end(w: World, route: Route) -> None:
    answer = transcribed(w)
    sid = answer["session_id"]
    with w.client("audio") as c:
        body = json_of(c.post(f"/v1/session/{sid}/end", headers=w.headers("audio")))
    # "End session, return all accumulated segments": the list, in the design's segment form.
    segments = body["segments"]
    assert isinstance(segments, list) and segments, body
    design_segment = transcribe_example(w).response["segments"][0]
    for s in segments:
        assert set(design_segment) <= set(s), s
    if "corrected" in w.state:
        fixed = [s for s in segments if s["segment_id"] == w.state["corrected"]]
        assert fixed and fixed[0]["speaker"] == "Arun", segments


def audio_cleanup(w: World, route: Route) -> None:
    with w.client("audio") as c:
        body = json_of(c.post("/v1/cleanup", headers=w.headers("audio")))
    assert isinstance(body["removed"], list)  # the sessions removed


def audio_delete_style(w: World, route: Route) -> None:
    if "style" not in w.state:
        audio_enroll(w, w.design.route("audio", "POST /v1/enroll"))
    with w.client("audio") as c:
        style = w.state["style"]
        body = json_of(c.delete(f"/v1/enrollment/{style}", headers=w.headers("audio")))
        assert body["deleted"] == style
        r = c.delete(f"/v1/enrollment/{style}", headers=w.headers("audio"))
        assert r.status_code == 404, r.text


def audio_delete_all(w: World, route: Route) -> None:
    with w.client("audio") as c:
        json_of(c.delete("/v1/enrollment", headers=w.headers("audio")))
        after = json_of(c.get("/v1/enrollment", headers=w.headers("audio")))
    assert after["persons"] == []


def engine_health(w: World, route: Route) -> None:
    example = route.example
    assert example is not None
    with w.client("engine") as c:
        r = c.get(example.target)  # the design's request: no token
    assert r.status_code == example.status, r.text
    assert r.json() == example.response  # "no metadata exposed": exactly the example


def engine_ingest(w: World, route: Route) -> None:
    example = route.example
    assert example is not None
    session_id = example.path.rsplit("/", 1)[1]
    assert session_id == w.design.jsonl["session_id"], "the example ingests Layer 1's session"
    seed_memory(w)
    write_jsonl(w, design_session(w))
    body = w.send("engine", example)
    assert body["session_id"] == session_id
    assert body["status"] == example.response["status"]  # "ingested"
    assert body["segments_count"] == len(w.design.jsonl["segments"])
    w.state["design_ingested"] = True


def engine_context(w: World, route: Route) -> None:
    example = route.example
    assert example is not None
    memory_settled(w)
    body = w.send("engine", example)
    assert body["query"] == example.query["query"] == example.response["query"]
    results = body["results"]
    assert results and body["total"] == len(results) <= int(example.query["limit"])
    design_text = w.design.jsonl["segments"][0]["text"]
    hit = next(r for r in results if r["text"] == design_text)
    assert hit["source_session"] == w.design.jsonl["session_id"]
    assert hit["speaker"] == w.design.jsonl["segments"][0]["speaker"]
    started = time.time() - 2 * 3600
    assert abs(hit["timestamp"] - started) < 3600  # epoch seconds, as the design's
    names = [e for r in results for e in r["entities"]]
    assert names, results  # the seeded session names a person
    assert all(re.fullmatch(r"[a-z_]+:.+", e) for e in names), names


def engine_entities(w: World, route: Route) -> None:
    example = route.example
    assert example is not None
    memory_settled(w)
    body = w.send("engine", example)
    kind = example.query["entity_type"]
    assert body["entities"] and body["total"] >= len(body["entities"])
    assert {e["entity_type"] for e in body["entities"]} == {kind}
    names = {e["name"] for e in body["entities"]}
    assert example.response["entities"][0]["name"] in names, names


def engine_daily(w: World, route: Route) -> None:
    example = route.example
    assert example is not None
    memory_settled(w)
    body = w.send("engine", example)
    assert body["date"] == example.query["date"]
    assert body["summary"].strip() and body["sessions_count"] == 1, body
    assert set(example.response["people"]) <= set(body["people"]), body["people"]


def engine_stats(w: World, route: Route) -> None:
    example = route.example
    assert example is not None
    settled = memory_settled(w)
    body = w.send("engine", example)
    assert body["sessions_count"] >= 3 and body["segments_count"] >= 4
    assert body["entities_count"] >= settled["entities_count"] > 0


def engine_emit(w: World, route: Route) -> None:
    example = route.example
    assert example is not None and example.body is not None
    sent = json.loads(example.body)
    body = w.send("engine", example)  # the bare array, byte for byte
    assert body["accepted"] == len(sent) == example.response["accepted"]
    assert body["rejected"] == example.response["rejected"] == 0
    assert body["total"] == example.response["total"]
    # §7's event, its UUID id and all, as a bare array too.
    with w.client("engine") as c:
        r = c.post("/v1/events/emit", json=[w.design.event_schema], headers=w.headers("engine"))
    assert json_of(r)["accepted"] == 1 and r.json()["rejected"] == 0, r.text
    w.state["emitted"] = True


def emitted(w: World) -> None:
    if not w.state.get("emitted"):
        engine_emit(w, w.design.route("engine", "POST /v1/events/emit"))


def engine_stream(w: World, route: Route) -> None:
    """The design's client: EventSource on the URL with the token in its query, reading
    every frame with `onmessage` (frames that carry no `event:` line)."""
    example = route.example
    assert example is not None
    emitted(w)
    target, headers = w.prepare("engine", example)
    assert "X-Internal-Token" not in headers  # the token rides in the query, as written
    live = {**json.loads(w.design.example("engine", "POST /v1/events/emit").body or "[]")[0],
            "event_id": str(uuid.uuid4())}  # fmt: skip
    text = ""
    timeout = httpx.Timeout(60, read=60)
    with httpx.Client(base_url=w.services["engine"].url, timeout=timeout) as c:
        with c.stream("GET", target, headers=headers) as r:
            assert r.status_code == (example.status or 200)
            assert r.headers["content-type"].startswith("text/event-stream")
            chunks = r.iter_text()
            text += next(chunks)  # the subscription holds from here: a live event follows
            posted = c.post("/v1/events/emit", json=[live], headers=w.headers("engine"))
            assert json_of(posted)["accepted"] == 1
            want = live["event_id"].replace("-", "")
            deadline = time.monotonic() + WAIT_S
            while f'"event_id":"{want}"' not in text.replace(" ", ""):
                assert time.monotonic() < deadline, text[-2000:]
                text += next(chunks)
    frames = sse_frames(text[: text.rindex("\n\n") + 2])
    data = [f for f in frames if f["data"] is not None]
    assert data, frames
    assert all(f["event"] is None for f in data), [f["event"] for f in data]
    for f in data:
        for design in example.frames:
            assert_shape(design, f["data"], "frame")
    catchup = [f for f in data if f["data"].get("catchup")]
    assert catchup and len(catchup) <= 50, len(catchup)  # "the last 50 events"
    (got,) = [f for f in data if f["data"]["event_id"] == want]
    assert got["data"]["creature"] == live["creature"]


def engine_events(w: World, route: Route) -> None:
    example = route.example
    assert example is not None
    emitted(w)
    body = w.send("engine", example)
    allowed = example.alternatives.get("source", {example.response["source"]})
    assert body["source"] in allowed, (body["source"], allowed)
    creature = example.query["creature"]
    assert body["events"] and {e["creature"] for e in body["events"]} == {creature}
    assert body["total"] == len(body["events"]) <= int(example.query["limit"])
    # "falls back to PostgreSQL for time-range queries": §7's event by its time, from "db".
    schema = w.design.event_schema
    at = datetime.fromisoformat(schema["timestamp"].replace("Z", "+00:00"))
    iso = "%Y-%m-%dT%H:%M:%SZ"
    start, end = (
        (at - timedelta(minutes=30)).strftime(iso),
        (at + timedelta(minutes=30)).strftime(iso),
    )
    want = schema["event_id"].replace("-", "")  # answered as 32 hex digits (ADR 0020)
    db: dict[str, Any] = {}
    with w.client("engine") as c:

        def stored() -> bool:  # written to PostgreSQL a moment after it was accepted
            r = c.get(f"/v1/events?start={start}&end={end}&source=db", headers=w.headers("engine"))
            db.update(json_of(r))
            return any(e["event_id"] == want for e in db["events"])

        until("§7's event in PostgreSQL", stored, WAIT_S, w.services["engine"].log)
    assert db["source"] == "db" and "db" in allowed
    assert db["total"] == len(db["events"]) >= 1
    (event,) = [e for e in db["events"] if e["event_id"] == want]
    assert_shape(schema, event, "event")
    for key in ("creature", "event_type", "service", "process", "zone", "session_id", "data"):
        assert event[key] == schema[key], key
    assert datetime.fromisoformat(event["timestamp"].replace("Z", "+00:00")) == at


def annie_page(w: World, route: Route) -> None:
    with w.client("annie") as c:
        r = c.get("/")  # served, not redirected (ADR 0020): the voice client either way
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")


def annie_health(w: World, route: Route) -> None:
    with w.client("annie") as c:
        body = json_of(c.get("/health"))
    assert body["status"] in ("ok", "degraded")


def annie_status(w: World, route: Route) -> None:
    with w.client("annie") as c:
        body = json_of(c.get("/api/status", headers=w.headers("annie")))
    # "Active sessions and LLM backends"
    assert isinstance(body["sessions"], int) and isinstance(body["voice"]["sessions"], int)
    assert "claude" in body["backends"]


def chat(w: World, body: dict[str, Any] | str) -> httpx.Response:
    content = body if isinstance(body, str) else json.dumps(body)
    with w.client("annie", timeout=180) as c:
        return c.post(
            "/v1/chat",
            content=content.encode(),
            headers=w.headers("annie", **{"Content-Type": "application/json"}),
        )


def annie_chat(w: World, route: Route) -> None:
    example = route.example
    assert example is not None and example.body is not None
    target, headers = w.prepare("annie", example)
    with w.client("annie", timeout=180) as c:
        r = c.post(target, content=example.body.encode(), headers=headers)
    assert r.status_code == (example.status or 200), r.text
    assert r.headers["content-type"].startswith("text/event-stream")
    frames = design_reader(r.text)
    assert frames[0]["type"] == "session" and frames[-1]["type"] == "done", frames
    for design in example.frames:
        ours = [f for f in frames if f.get("type") == design["type"]]
        assert ours, f"no {design['type']!r} frame: {frames}"
        for f in ours:
            assert_shape(design, f, f"frame {design['type']}")
    order = [f["type"] for f in frames]
    design_order = [f["type"] for f in example.frames]
    firsts = [order.index(t) for t in dict.fromkeys(design_order)]
    assert firsts == sorted(firsts), order
    # Claude (the double) said the design's words and called its tool with its input.
    words = "".join(f["text"] for f in example.frames if f["type"] == "token")
    assert "".join(f["text"] for f in frames if f["type"] == "token").startswith(words)
    for tool in (f for f in example.frames if f["type"] == "tool_use"):
        used = [f for f in frames if f["type"] == "tool_use"]
        assert any(f["name"] == tool["name"] and f["input"] == tool["input"] for f in used)
    w.state["chat_session"] = frames[0]["session_id"]

    # "Allowed backends: `auto`, `claude`, `qwen3.5-9b`": each answers, or (not configured
    # here) is refused naming the settings that enable it, never another backend.
    allowed = re.search(r"Allowed backends:\s+(.+?)\.\s", w.design.text)
    assert allowed, "the design lists its chat backends"
    request = json.loads(example.body)
    for name in re.findall(r"`([^`]+)`", allowed.group(1)):
        r = chat(w, {**request, "llm_backend": name})
        if r.status_code == 422:
            assert "is not configured" in r.json()["detail"] and name != "auto", r.text
            continue
        assert r.status_code == 200, (name, r.text)
        frames = design_reader(r.text)
        assert frames[0]["type"] == "session" and frames[-1]["type"] == "done", (name, frames)
        assert frames[0]["session_id"] and "token" in [f["type"] for f in frames], frames


def annie_sessions(w: World, route: Route) -> None:
    with w.client("annie") as c:
        body = json_of(c.get("/v1/chat/sessions", headers=w.headers("annie")))
    assert isinstance(body["sessions"], list)
    if "chat_session" in w.state:
        # the design names no field here; the project lists each session's `id`
        assert w.state["chat_session"] in [s["id"] for s in body["sessions"]]


def voice_ready(w: World) -> None:
    with w.client("annie") as c:
        until(
            "Annie's voice models",
            lambda: c.get("/api/status", headers=w.headers("annie")).json()["voice"]["ready"],
            WAIT_S,
            w.services["annie"].log,
        )


def annie_start(w: World, route: Route) -> None:
    voice_ready(w)
    # §8: "Backend is configurable per-session via the /start endpoint".
    backend = re.search(r"^\| `([^`]+)` \| Anthropic API", w.design.text, re.M)
    assert backend, "§8 names the Claude backend"
    with w.client("annie") as c:
        r = c.post("/start", json={"llm_backend": backend.group(1)}, headers=w.headers("annie"))
    body = json_of(r)
    assert body["session_id"] and body["llm"] == backend.group(1) and body["connected"] is False
    w.state["voice_session"] = body["session_id"]


async def _offer_sdp() -> str:
    """A browser's offer: audio both ways and a data channel (aiortc, as the page does)."""
    from aiortc import RTCPeerConnection

    pc = RTCPeerConnection()
    try:
        pc.addTransceiver("audio", direction="sendrecv")
        pc.createDataChannel("chat")
        await pc.setLocalDescription(await pc.createOffer())
        return pc.localDescription.sdp
    finally:
        await pc.close()


def offer(w: World, path: str) -> dict[str, Any]:
    sdp = asyncio.run(_offer_sdp())
    with w.client("annie") as c:
        r = c.post(path, json={"sdp": sdp, "type": "offer"}, headers=w.headers("annie"))
    body = json_of(r)
    assert body["type"] == "answer" and body["sdp"].startswith("v=0") and body["pc_id"], body
    return body


def annie_offer(w: World, route: Route) -> None:
    if "voice_session" not in w.state:
        annie_start(w, w.design.route("annie", "POST /start"))
    sid = w.state["voice_session"]
    w.state["answer"] = offer(w, f"/sessions/{sid}/api/offer")


def annie_trickle(w: World, route: Route) -> None:
    if "answer" not in w.state:
        annie_offer(w, w.design.route("annie", "POST /sessions/{id}/api/offer"))
    sid, pc_id = w.state["voice_session"], w.state["answer"]["pc_id"]
    candidate = {"candidate": "candidate:1 1 udp 2130706431 127.0.0.1 9 typ host",
                 "sdp_mid": "0", "sdp_mline_index": 0}  # fmt: skip
    with w.client("annie") as c:
        r = c.patch(
            f"/sessions/{sid}/api/offer",
            json={"pc_id": pc_id, "candidates": [candidate]},
            headers=w.headers("annie"),
        )
    assert json_of(r) == {"status": "ok"}


def annie_offer_direct(w: World, route: Route) -> None:
    voice_ready(w)
    offer(w, "/api/offer")


# The design's routes, each with its test, in the order they run (each may build on the
# ones before: the enrolled voice is named in the transcript the session's end returns).
TESTS: dict[str, Callable[[World, Route], None]] = {
    "audio GET /health": audio_health,
    "audio POST /v1/enroll": audio_enroll,
    "audio GET /v1/enrollment": audio_enrollment,
    "audio POST /v1/transcribe": audio_transcribe,
    "audio GET /v1/session/{session_id}": audio_session,
    "audio POST /v1/feedback": audio_feedback,
    "audio POST /v1/sweep/{session_id}": audio_sweep,
    "audio POST /v1/session/{session_id}/end": audio_end,
    "audio POST /v1/cleanup": audio_cleanup,
    "audio DELETE /v1/enrollment/{style}": audio_delete_style,
    "audio DELETE /v1/enrollment": audio_delete_all,
    "engine GET /health": engine_health,
    "engine POST /v1/ingest/{session_id}": engine_ingest,
    "engine GET /v1/context": engine_context,
    "engine GET /v1/entities": engine_entities,
    "engine GET /v1/daily": engine_daily,
    "engine GET /v1/stats": engine_stats,
    "engine POST /v1/events/emit": engine_emit,
    "engine GET /v1/events/stream": engine_stream,
    "engine GET /v1/events": engine_events,
    "annie GET /": annie_page,
    "annie GET /health": annie_health,
    "annie GET /api/status": annie_status,
    "annie POST /v1/chat": annie_chat,
    "annie GET /v1/chat/sessions": annie_sessions,
    "annie POST /start": annie_start,
    "annie POST /sessions/{id}/api/offer": annie_offer,
    "annie PATCH /sessions/{id}/api/offer": annie_trickle,
    "annie POST /api/offer": annie_offer_direct,
}
ORDER = list(TESTS)


def _params() -> list[Any]:
    if DESIGN_ERROR is not None:
        return [pytest.param(None, id="unreadable-design")]  # the fixture fails, saying why
    if DESIGN_DOC is None:
        return [pytest.param(None, marks=pytest.mark.skip(reason=NO_DESIGN), id="no-design")]
    routes = sorted(
        DESIGN_DOC.routes,
        key=lambda r: (ORDER.index(r.id) if r.id in ORDER else len(ORDER), r.index),
    )
    return [pytest.param(r, id=r.id) for r in routes]


@pytest.mark.platform
@pytest.mark.parametrize("route", _params())
def test_design_route(world: World, route: Route) -> None:
    test = TESTS.get(route.id)
    assert test is not None, (
        f"the design's API reference names {route.id} ({route.description}); "
        "tests/test_design_contract.py has no test for it"
    )
    test(world, route)


def test_the_design_parses_into_the_routes_this_suite_tests() -> None:
    """The parser read the document: every request example of §6 found (with its answer),
    and no test here for a route the design no longer names."""
    if DESIGN_ERROR is not None:
        pytest.fail(DESIGN_ERROR)
    if DESIGN_DOC is None:
        pytest.skip(NO_DESIGN)
    text = DESIGN_DOC.text
    api = text[text.index("## 6. API Reference") : text.index("## 7. Observability")]
    blocks = re.findall(rf"```\n({METHODS}) ", api)
    with_example = [r for r in DESIGN_DOC.routes if r.example is not None]
    assert len(with_example) == len(blocks) >= 11
    for r in with_example:
        assert r.example is not None
        assert r.example.response is not None or r.example.frames, r.id
    ids = {r.id for r in DESIGN_DOC.routes}
    assert set(TESTS) <= ids, f"tests for routes the design does not name: {set(TESTS) - ids}"
    assert DESIGN_DOC.event_schema["event_id"] and DESIGN_DOC.jsonl["segments"]
