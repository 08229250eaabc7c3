"""Test doubles for Annie's tests (never used by the product; named as doubles):

- `EngineDouble`: the context engine's `/v1/context`, `/v1/events/emit` and `/health` behind
  an httpx MockTransport, with scripted memories and failure modes (down, slow, 401).
- `ScriptedChatLLMDouble`: an OpenAI-compatible server on a loopback port (real HTTP) that
  streams scripted chat completions — text chunks and tool calls — as the real `openai`
  client expects them; a scripted reply may be a function of the request (a model that reacts
  to what it was sent).
- `ScriptedClaudeDouble`: the same script streamed as Anthropic's Messages API does, for the
  real `anthropic` client.
- `EchoToolDouble`: a tool that echoes its arguments.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

TOKEN = "annie-test-token-0123456789"


def fact(
    text: str,
    subject: str,
    predicate: str,
    obj: str,
    *,
    since: datetime | str = "2026-05-08T13:56:00Z",
    replaced: list[tuple[str, str, str]] = (),  # type: ignore[assignment]
    sources: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> dict[str, Any]:
    """A fact as /v1/context's `facts` hold it; `replaced`: (fact, object, invalid_at)."""
    stamp = since.isoformat() if isinstance(since, datetime) else since
    return {
        "uuid": f"f-{abs(hash(text))}", "subject": subject, "predicate": predicate,
        "object": obj, "fact": text, "since": stamp, "valid_at": stamp, "invalid_at": None,
        "current": True,
        "replaced": [
            {"uuid": f"r-{i}", "fact": f, "predicate": predicate, "object": o,
             "valid_at": None, "invalid_at": until}
            for i, (f, o, until) in enumerate(replaced)
        ],
        "sources": [
            {"session_id": m["source_session"], "segment_id": m["segment_id"],
             "speaker": m["speaker"], "text": m["text"], "spoken_at": m["timestamp"]}
            for m in sources
        ],
    }  # fmt: skip


def memory(
    text: str,
    *,
    speaker: str = "Priya",
    when: datetime | str = "2026-05-08T13:56:00Z",
    tier: str = "L0",
    score: float = 0.5,
    session: str = "s1",
) -> dict[str, Any]:
    """One /v1/context result as the engine sends it: `spoken_at` ISO, the design's
    `timestamp` in epoch seconds, `entities` as "type:name" and `entity_refs` as objects."""
    stamp = when.isoformat() if isinstance(when, datetime) else when
    try:
        epoch: float | None = datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()
    except ValueError:
        epoch = None
    return {
        "text": text,
        "tier": tier,
        "source_session": session,
        "segment_id": "seg-1",
        "timestamp": epoch,
        "spoken_at": stamp,
        "relevance_score": score,
        "speaker": speaker,
        "entities": [],
        "entity_refs": [],
    }


@dataclass
class EngineDouble:
    memories: list[dict[str, Any]] = field(default_factory=list)
    mode: str = "ok"  # ok | down | slow | unauthorized | error
    token: str = TOKEN
    context_requests: list[httpx.Request] = field(default_factory=list)
    emitted: list[list[dict[str, Any]]] = field(default_factory=list)
    emit_mode: str = "ok"
    # GET /v1/forget: the requests (newest first) and how many are unfinished; None: the
    # route is missing (an engine older than it: 404)
    forgets: list[dict[str, Any]] | None = None
    unfinished: int = 0
    forget_mode: str = "ok"  # ok | down
    # GET /v1/context's knowledge: the facts and subjects every search answers with
    facts: list[dict[str, Any]] = field(default_factory=list)
    about: list[dict[str, Any]] = field(default_factory=list)
    statements: list[dict[str, Any]] = field(default_factory=list)
    # GET /v1/promises?status=open; None: the route is missing (404)
    promises: list[dict[str, Any]] | None = field(default_factory=list)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    async def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/health":
            if self.mode == "down":
                raise httpx.ConnectError("engine double is down", request=request)
            return httpx.Response(200, json={"status": "ok"})
        if request.headers.get("X-Internal-Token") != self.token:
            return httpx.Response(401, json={"detail": "invalid X-Internal-Token header"})
        if request.url.path == "/v1/events/emit":
            if self.emit_mode == "down":
                raise httpx.ConnectError("engine double is down", request=request)
            events = json.loads(request.content)["events"]
            self.emitted.append(events)
            return httpx.Response(
                200, json={"accepted": len(events), "rejected": [], "total": len(events)}
            )
        if request.url.path == "/v1/forget" and self.forgets is not None:
            if self.forget_mode == "down":
                raise httpx.ConnectError("engine double is down", request=request)
            limit = int(request.url.params.get("limit", 20))
            return httpx.Response(
                200, json={"requests": self.forgets[:limit], "unfinished": self.unfinished}
            )
        if request.url.path == "/v1/context":
            self.context_requests.append(request)
            if self.mode == "down":
                raise httpx.ConnectError("engine double is down", request=request)
            if self.mode == "slow":
                await asyncio.sleep(3600)
            if self.mode == "unauthorized":
                return httpx.Response(401, json={"detail": "invalid X-Internal-Token header"})
            if self.mode == "error":
                return httpx.Response(500, json={"detail": "boom"})
            tiers = request.url.params.get("tier")
            results = [m for m in self.memories if tiers is None or m["tier"] in tiers.split(",")]
            limit = int(request.url.params.get("limit", 5))
            return httpx.Response(
                200,
                json={"results": results[:limit], "facts": self.facts, "about": self.about,
                      "facts_status": "ok", "statements": self.statements},
            )  # fmt: skip
        if request.url.path == "/v1/promises" and self.promises is not None:
            if self.mode == "down":
                raise httpx.ConnectError("engine double is down", request=request)
            return httpx.Response(200, json={"promises": self.promises, "total": 0})
        return httpx.Response(404, json={"detail": "not found"})


class EchoToolDouble:
    name = "echo"
    description = "Echo the text back."
    parameters: dict[str, Any] = {  # noqa: RUF012
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    }

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    async def run(self, args: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(args)
        return {"echoed": args.get("text")}


class FailingToolDouble:
    name = "broken"
    description = "Always fails."
    parameters: dict[str, Any] = {"type": "object", "properties": {}}  # noqa: RUF012

    async def run(self, args: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("the broken tool double failed")


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-double",
        "object": "chat.completion.chunk",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


Reply = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


class ScriptedChatLLMDouble:
    """Each chat request takes the next scripted reply: `{"text": [chunks...]}` streams text,
    `{"tool_calls": [{"name", "arguments"}]}` streams tool calls (arguments split in two
    chunks, as real servers do), `{"status": 500}` answers an HTTP error; a function is
    called with the request's body and returns one of those."""

    def __init__(self, script: list[Reply]) -> None:
        self.script = list(script)
        self.requests: list[dict[str, Any]] = []
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    def frames(self, reply: dict[str, Any]) -> list[dict[str, Any]]:
        frames = [_chunk({"role": "assistant", "content": ""})]
        for text in reply.get("text", []):
            frames.append(_chunk({"content": text}))
        for i, call in enumerate(reply.get("tool_calls", [])):
            args = json.dumps(call["arguments"])
            half = len(args) // 2
            frames.append(
                _chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": f"call_{i}",
                                "type": "function",
                                "function": {"name": call["name"], "arguments": args[:half]},
                            }
                        ]
                    }
                )
            )
            frames.append(
                _chunk({"tool_calls": [{"index": i, "function": {"arguments": args[half:]}}]})
            )
        finish = "tool_calls" if reply.get("tool_calls") else "stop"
        frames.append(_chunk({}, finish))
        frames.append(
            {
                "id": "chatcmpl-double",
                "object": "chat.completion.chunk",
                "created": 0,
                "model": "scripted",
                "choices": [],
                "usage": {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18},
            }
        )
        return frames

    def stream(self, reply: dict[str, Any]) -> list[bytes]:
        """The response body's SSE frames, as the OpenAI API ends them."""
        out = [f"data: {json.dumps(frame)}\n\n".encode() for frame in self.frames(reply)]
        return [*out, b"data: [DONE]\n\n"]

    def start(self) -> None:
        double = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                double.requests.append(body)
                reply = double.script.pop(0) if double.script else {"text": ["(unscripted)"]}
                if callable(reply):
                    reply = reply(body)
                if "status" in reply:
                    data = json.dumps({"error": {"message": "scripted failure"}}).encode()
                    self.send_response(reply["status"])
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    return
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                for chunk in double.stream(reply):
                    self.wfile.write(chunk)
                    self.wfile.flush()
                self.close_connection = True

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()

    def __enter__(self) -> ScriptedChatLLMDouble:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class ScriptedClaudeDouble(ScriptedChatLLMDouble):
    """The same script, answered as Anthropic's Messages API streams (`event:` + `data:`
    frames: message_start, content blocks of text and tool_use with their deltas,
    message_delta with the usage, message_stop), for `ANNIE_VOICE_CLAUDE_BASE_URL`."""

    @property
    def url(self) -> str:
        assert self._httpd is not None
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"  # the SDK adds /v1/messages

    def frames(self, reply: dict[str, Any]) -> list[dict[str, Any]]:
        frames: list[dict[str, Any]] = [
            {"type": "message_start", "message": {
                "id": "msg_double", "type": "message", "role": "assistant", "content": [],
                "model": "scripted", "stop_reason": None, "stop_sequence": None,
                "usage": {"input_tokens": 11, "output_tokens": 1}}},
        ]  # fmt: skip
        index = 0
        if reply.get("text"):
            frames.append(
                {"type": "content_block_start", "index": index,
                 "content_block": {"type": "text", "text": ""}}
            )  # fmt: skip
            for text in reply["text"]:
                frames.append(
                    {"type": "content_block_delta", "index": index,
                     "delta": {"type": "text_delta", "text": text}}
                )  # fmt: skip
            frames.append({"type": "content_block_stop", "index": index})
            index += 1
        for i, call in enumerate(reply.get("tool_calls", [])):
            args = json.dumps(call["arguments"])
            half = len(args) // 2
            frames.append(
                {"type": "content_block_start", "index": index,
                 "content_block": {"type": "tool_use", "id": f"toolu_{i}", "name": call["name"],
                                   "input": {}}}
            )  # fmt: skip
            for part in (args[:half], args[half:]):
                frames.append(
                    {"type": "content_block_delta", "index": index,
                     "delta": {"type": "input_json_delta", "partial_json": part}}
                )  # fmt: skip
            frames.append({"type": "content_block_stop", "index": index})
            index += 1
        stop = "tool_use" if reply.get("tool_calls") else "end_turn"
        frames += [
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None},
             "usage": {"output_tokens": 7}},
            {"type": "message_stop"},
        ]  # fmt: skip
        return frames

    def stream(self, reply: dict[str, Any]) -> list[bytes]:
        return [
            f"event: {frame['type']}\ndata: {json.dumps(frame)}\n\n".encode()
            for frame in self.frames(reply)
        ]


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """`event:`/`data:` frames → [(event, data)], comments and pings skipped."""
    events = []
    for block in text.replace("\r\n", "\n").split("\n\n"):
        name, data = "message", []
        for line in block.split("\n"):
            if line.startswith("event:"):
                name = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].lstrip())
        if data and name != "ping":
            events.append((name, json.loads("\n".join(data))))
    return events
