"""What every tool shares: the result type, the config, the base class and argument checks.

A tool never raises to its caller (the chat loop): bad arguments, refusals and failures all come
back as a `ToolResult` with `ok=False` and an `error` the model can read and act on.
"""

from __future__ import annotations

import tempfile
import unicodedata
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from her_os_shared.logging import get_logger

log = get_logger(__name__)

# What the model reads from one tool call; longer content is cut (the model's context is finite).
MAX_CONTENT_CHARS = 16_000

ALL_TOOL_NAMES: frozenset[str] = frozenset(
    {"think", "render_table", "render_chart", "fetch_webpage", "web_search", "execute_python"}
)


@dataclass(frozen=True)
class ToolResult:
    ok: bool
    content: str
    # Structured payload for the client page (tables, charts): the chat loop sends it over the
    # data channel whenever it is not None. The model never reads it; it reads `content`.
    data: dict[str, Any] | None = None
    error: str | None = None

    @classmethod
    def success(cls, content: str, data: dict[str, Any] | None = None) -> ToolResult:
        return cls(ok=True, content=truncate(content, MAX_CONTENT_CHARS), data=data)

    @classmethod
    def failure(cls, error: str) -> ToolResult:
        error = truncate(error, 8_000)
        return cls(ok=False, content=f"Error: {error}", error=error)


@dataclass(frozen=True)
class ToolConfig:
    """The tools' settings; the app maps its Settings (ANNIE_VOICE_*) onto this."""

    # SearXNG base URL (operator-configured, may be on the private network); None: no web_search.
    searxng_url: str | None = None
    search_max_results: int = 5
    search_timeout_s: float = 10.0
    fetch_max_bytes: int = 2 * 1024 * 1024
    fetch_timeout_s: float = 10.0
    fetch_max_redirects: int = 5
    fetch_max_chars: int = 12_000
    python_timeout_s: float = 10.0
    python_memory_bytes: int = 256 * 1024 * 1024
    python_max_output_bytes: int = 64 * 1024
    python_scratch_root: Path = field(
        default_factory=lambda: Path(tempfile.gettempdir()) / "annie-voice-python"
    )
    enabled: frozenset[str] = ALL_TOOL_NAMES


class Tool(ABC):
    """One tool: `name`, `description`, `parameters` (JSON schema) and `run(args)`."""

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[dict[str, Any]]

    async def run(self, args: dict[str, Any]) -> ToolResult:
        problem = validate(self.parameters, args, "arguments")
        if problem is not None:
            return ToolResult.failure(f"{self.name}: invalid arguments: {problem}")
        try:
            return await self._run(args)
        except Exception as exc:  # the chat loop must never see a tool's exception
            log.exception("tool_failed", tool=self.name)
            return ToolResult.failure(f"{self.name} failed: {type(exc).__name__}")

    @abstractmethod
    async def _run(self, args: dict[str, Any]) -> ToolResult: ...

    def spec(self) -> dict[str, Any]:
        """OpenAI-style function tool (Anthropic: name, description, input_schema=parameters)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": self.parameters,
            },
        }


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    marker = f"\n[... truncated, {len(text) - limit} more characters]"
    return text[: max(0, limit - len(marker))] + marker


# Characters that render as (or are read by a model as) `<` and `>`: fullwidth, small form,
# CJK and mathematical angle brackets, ornaments, Canadian syllabics.
ANGLE_LOOKALIKES = str.maketrans(
    dict.fromkeys("＜﹤〈〈⟨❮˂ᐸ", "<") | dict.fromkeys("＞﹥〉〉⟩❯˃ᐳ", ">")
)


def strip_invisible(text: str, keep: str = "\n\t") -> str:
    """Drop control, format (bidi overrides, zero-width), surrogate and private-use characters,
    except those in `keep`: untrusted text cannot hide a marker (`<\u200b<<`) or reorder what
    is shown (U+202E)."""
    return "".join(
        ch for ch in text if ch in keep or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co")
    )


_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
    "null": (type(None),),
}


def validate(schema: dict[str, Any], value: Any, where: str) -> str | None:
    """Check `value` against the JSON-schema subset the tools use; the first problem, or None.

    Supported: type (one or a list), enum, properties/required/additionalProperties,
    items/minItems/maxItems, minLength/maxLength, minimum/maximum.
    """
    types = schema.get("type")
    if types is not None:
        names = [types] if isinstance(types, str) else list(types)
        # bool is an int in Python; JSON does not agree.
        if not any(
            isinstance(value, _TYPES[t]) and not (isinstance(value, bool) and t != "boolean")
            for t in names
        ):
            return f"{where} must be {' or '.join(names)}, got {_json_type(value)}"
    if "enum" in schema and value not in schema["enum"]:
        return f"{where} must be one of {schema['enum']}, got {value!r}"
    if isinstance(value, str):
        if len(value) < schema.get("minLength", 0):
            return f"{where} must have at least {schema['minLength']} characters"
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            return f"{where} must have at most {schema['maxLength']} characters"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            return f"{where} must be >= {schema['minimum']}"
        if "maximum" in schema and value > schema["maximum"]:
            return f"{where} must be <= {schema['maximum']}"
    if isinstance(value, list):
        if len(value) < schema.get("minItems", 0):
            return f"{where} must have at least {schema['minItems']} items"
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            return f"{where} must have at most {schema['maxItems']} items"
        if "items" in schema:
            for i, item in enumerate(value):
                problem = validate(schema["items"], item, f"{where}[{i}]")
                if problem is not None:
                    return problem
    if isinstance(value, dict):
        props: dict[str, Any] = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                return f"{where} is missing required '{key}'"
        for key, item in value.items():
            if key in props:
                problem = validate(props[key], item, f"{where}.{key}")
                if problem is not None:
                    return problem
            elif schema.get("additionalProperties", True) is False:
                return f"{where} has unknown '{key}' (allowed: {', '.join(sorted(props))})"
    return None


def _json_type(value: Any) -> str:
    for name, types in _TYPES.items():
        if isinstance(value, types) and not (isinstance(value, bool) and name != "boolean"):
            return name
    return type(value).__name__
