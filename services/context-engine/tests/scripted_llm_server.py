"""Test double: a scripted OpenAI-compatible LLM server (real HTTP on a loopback port).

Answers `POST /v1/chat/completions` and `POST /v1/embeddings` like Ollama or llama-server
would, so the real clients (openai SDK, graphiti's OpenAI-compatible client) are exercised over
HTTP. What it answers is scripted by the test:

- `server.reply(fn)`: `fn(request_json) -> str | dict | ScriptedError` gives the message
  content for each chat request (a dict is sent as JSON text); unscripted requests get the
  smallest instance valid against the request's JSON schema (`response_format`), so callers that
  make many structured calls (graphiti's add_episode) get well-formed, empty answers.
- `server.requests` records every request body, in order (`server.paths` the path of each).
- Embeddings are deterministic unit vectors from a hash of the text (`dim` wide), over
  `/v1/embeddings` and Ollama's native `POST /api/embed`.
- `POST /v1/messages` answers like Anthropic's Messages API (for the Claude fallback; point the
  anthropic SDK at `server.anthropic_url`), scripted by `server.reply_anthropic(fn)`: a str is a
  text block, a dict the input of the tool the request forces (`tool_choice`), unscripted
  requests get the smallest valid input of that tool.
- `ScriptedError(status)` answers with an HTTP error; `ScriptedHang()` holds the request
  unanswered until the server stops (or `server.release()`), for client timeouts that do not
  depend on how fast anything runs.

Never used by the product: it lives in tests/ and says so in its name.
"""

from __future__ import annotations

import hashlib
import json
import math
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class ScriptedError:
    """Answer with this HTTP status and body instead of a completion."""

    status: int
    body: str = '{"error": {"message": "scripted failure"}}'


@dataclass(frozen=True)
class ScriptedHang:
    """Hold the request without answering until the server is stopped or released (then
    answer 503), at most `max_s` seconds."""

    max_s: float = 60.0


Responder = Callable[
    [dict[str, Any]], "str | dict[str, Any] | list[Any] | ScriptedError | ScriptedHang | None"
]


def request_schema(request: dict[str, Any]) -> dict[str, Any] | None:
    """The JSON schema a chat request asks its answer to follow, if any."""
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("schema")
    return None


def schema_name(request: dict[str, Any]) -> str | None:
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return (fmt.get("json_schema") or {}).get("name")
    return None


def minimal_instance(schema: dict[str, Any], defs: dict[str, Any] | None = None) -> Any:
    """The smallest value valid against `schema` (required fields only, empty arrays)."""
    defs = defs if defs is not None else schema.get("$defs", schema.get("definitions", {}))
    if "$ref" in schema:
        return minimal_instance(defs[schema["$ref"].split("/")[-1]], defs)
    if "enum" in schema:
        return schema["enum"][0]
    if "const" in schema:
        return schema["const"]
    for key in ("anyOf", "oneOf"):
        if key in schema:
            options = schema[key]
            null = [o for o in options if o.get("type") == "null"]
            return None if null else minimal_instance(options[0], defs)
    if "allOf" in schema:
        return minimal_instance(schema["allOf"][0], defs)
    kind = schema.get("type", "object")
    if isinstance(kind, list):
        kind = "null" if "null" in kind else kind[0]
    if kind == "object":
        props = schema.get("properties", {})
        return {
            k: minimal_instance(props[k], defs) for k in schema.get("required", []) if k in props
        }
    if kind == "array":
        return [minimal_instance(schema["items"], defs) for _ in range(schema.get("minItems", 0))]
    if kind == "string":
        return ""
    if kind in ("number", "integer"):
        return schema.get("minimum", 0)
    if kind == "boolean":
        return False
    return None


def hash_embedding(text: str, dim: int) -> list[float]:
    """A deterministic unit vector: the same text always embeds to the same point."""
    raw = hashlib.sha256(text.encode()).digest()
    values = [((raw[i % len(raw)] + i * 31) % 255) / 127.0 - 1.0 for i in range(dim)]
    norm = math.sqrt(sum(v * v for v in values)) or 1.0
    return [v / norm for v in values]


class ScriptedLLMServer:
    def __init__(self, *, model: str = "scripted-test-model", dim: int = 384) -> None:
        self.model = model
        self.dim = dim
        self.requests: list[dict[str, Any]] = []
        self.paths: list[str] = []
        self._responder: Responder | None = None
        self._anthropic_responder: Responder | None = None
        self._released = threading.Event()
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        """Base URL, OpenAI style: http://127.0.0.1:PORT/v1"""
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}/v1"

    @property
    def anthropic_url(self) -> str:
        """Base URL for the anthropic SDK (it appends /v1/messages): http://127.0.0.1:PORT"""
        return self.url.removesuffix("/v1")

    def reply(self, responder: Responder | None) -> None:
        self._responder = responder

    def reply_anthropic(self, responder: Responder | None) -> None:
        self._anthropic_responder = responder

    def release(self) -> None:
        """Let every held (`ScriptedHang`) request go (answered 503)."""
        self._released.set()

    def chat_requests(self) -> list[dict[str, Any]]:
        """Bodies of the OpenAI-style chat completion requests, in order."""
        with self._lock:
            return [
                r
                for r, p in zip(self.requests, self.paths, strict=True)
                if "messages" in r and not p.endswith("/messages")
            ]

    def anthropic_requests(self) -> list[dict[str, Any]]:
        """Bodies of the Anthropic Messages API requests, in order."""
        with self._lock:
            return [
                r for r, p in zip(self.requests, self.paths, strict=True) if p.endswith("/messages")
            ]

    # --- answering ---

    def _hang(self, hang: ScriptedHang) -> tuple[int, dict[str, Any]]:
        self._released.wait(hang.max_s)
        return 503, {"error": {"message": "scripted hang released"}}

    def _chat(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        content: Any = None
        if self._responder is not None:
            content = self._responder(request)
        if isinstance(content, ScriptedHang):
            return self._hang(content)
        if isinstance(content, ScriptedError):
            return content.status, json.loads(content.body)
        if content is None:
            schema = request_schema(request)
            content = minimal_instance(schema) if schema else ""
        if not isinstance(content, str):
            content = json.dumps(content)
        return 200, {
            "id": f"chatcmpl-{len(self.requests)}",
            "object": "chat.completion",
            "created": 0,
            "model": request.get("model", self.model),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        }

    def _ollama_embed(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        """Ollama's native batched endpoint: {"model", "input": str | [str]} → {"embeddings"}."""
        inputs = request.get("input", [])
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        if not request.get("model"):
            return 400, {"error": "model is required"}
        return 200, {
            "model": request["model"],
            "embeddings": [hash_embedding(str(t), self.dim) for t in texts],
            "total_duration": 1000,
            "prompt_eval_count": len(texts),
        }

    def _embeddings(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        inputs = request.get("input", [])
        texts = [inputs] if isinstance(inputs, str) else list(inputs)
        dim = int(request.get("dimensions") or self.dim)
        return 200, {
            "object": "list",
            "model": request.get("model", self.model),
            "data": [
                {"object": "embedding", "index": i, "embedding": hash_embedding(str(t), dim)}
                for i, t in enumerate(texts)
            ],
            "usage": {"prompt_tokens": 1, "total_tokens": 1},
        }

    def _anthropic(self, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        content: Any = None
        if self._anthropic_responder is not None:
            content = self._anthropic_responder(request)
        if isinstance(content, ScriptedHang):
            return self._hang(content)
        if isinstance(content, ScriptedError):
            return content.status, json.loads(content.body)
        choice = request.get("tool_choice") or {}
        tools = {t.get("name"): t for t in request.get("tools") or []}
        forced = tools.get(choice.get("name")) if choice.get("type") == "tool" else None
        if content is None:
            content = minimal_instance(forced["input_schema"]) if forced else ""
        if forced is not None and isinstance(content, dict):
            block: dict[str, Any] = {
                "type": "tool_use",
                "id": f"toolu_{len(self.requests)}",
                "name": forced["name"],
                "input": content,
            }
            stop = "tool_use"
        else:
            text = content if isinstance(content, str) else json.dumps(content)
            block, stop = {"type": "text", "text": text}, "end_turn"
        return 200, {
            "id": f"msg_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": request.get("model", self.model),
            "content": [block],
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 1},
        }

    def handle(self, path: str, request: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        path = path.split("?", 1)[0]
        with self._lock:
            self.requests.append(request)
            self.paths.append(path)
        if path.endswith("/v1/messages"):
            return self._anthropic(request)
        if path.endswith("/chat/completions"):
            return self._chat(request)
        if path.endswith("/embeddings"):
            return self._embeddings(request)
        if path.endswith("/api/embed"):
            return self._ollama_embed(request)
        return 404, {"error": {"message": f"no route {path}"}}

    # --- lifecycle ---

    def start(self) -> None:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                try:
                    request = json.loads(self.rfile.read(length) or b"{}")
                except json.JSONDecodeError:
                    status, body = 400, {"error": {"message": "bad json"}}
                else:
                    status, body = server.handle(self.path, request)
                data = json.dumps(body).encode()
                try:
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (a timeout test): nothing to answer

            def do_GET(self) -> None:
                data = json.dumps({"object": "list", "data": [{"id": server.model}]}).encode()
                self.send_response(200 if self.path.endswith("/models") else 404)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:  # quiet
                pass

        self._released = threading.Event()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        threading.Thread(
            target=self._httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()

    def stop(self) -> None:
        self._released.set()  # held requests answer, so their threads end
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


@contextmanager
def scripted_llm_server(**kwargs: Any) -> Iterator[ScriptedLLMServer]:
    server = ScriptedLLMServer(**kwargs)
    server.start()
    try:
        yield server
    finally:
        server.stop()
