"""What every tool shares: the result type, the config, the base class and argument checks.

A tool never raises to its caller (the chat loop): bad arguments, refusals and failures all come
back as a `ToolResult` with `ok=False` and an `error` the model can read and act on.

Each tool declares its arguments once, as a pydantic model (`Arguments`, a `ToolArguments`):
`run` validates the model's call with it before the tool does anything, and the JSON schema the
LLM is offered (`parameters`) is generated from the same model, so the two cannot drift apart.
"""

from __future__ import annotations

import tempfile
import unicodedata
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    ValidationError,
    ValidatorFunctionWrapHandler,
    WrapValidator,
)
from pydantic_core import PydanticCustomError

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
    # The URLs this result offered the model (web_search's results): the chat loop lets
    # fetch_webpage read them in this turn. Neither the model nor the page reads this field.
    links: tuple[str, ...] | None = None

    @classmethod
    def success(
        cls,
        content: str,
        data: dict[str, Any] | None = None,
        links: tuple[str, ...] | None = None,
    ) -> ToolResult:
        return cls(ok=True, content=truncate(content, MAX_CONTENT_CHARS), data=data, links=links)

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


class ToolArguments(BaseModel):
    """The base of every tool's argument model. The arguments are JSON the model wrote: an
    unknown field is refused (not ignored), and nothing is coerced ("5" is not 5, true is not
    1), so what runs is exactly what the schema offered allows."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class Tool(ABC):
    """One tool: `name`, `description`, `Arguments` (its pydantic argument model), `parameters`
    (the JSON schema of `Arguments`, derived when the class is defined) and `run(args)`."""

    name: ClassVar[str]
    description: ClassVar[str]
    Arguments: ClassVar[type[ToolArguments]]
    parameters: ClassVar[dict[str, Any]]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "Arguments" in cls.__dict__:
            cls.parameters = llm_schema(cls.Arguments)

    async def run(self, args: dict[str, Any]) -> ToolResult:
        try:
            checked = self.Arguments.model_validate(args)
        except ValidationError as exc:
            # `_run` never sees arguments outside the schema
            problem = describe_errors(exc, allowed=list(self.Arguments.model_fields))
            return ToolResult.failure(f"{self.name}: invalid arguments: {problem}")
        try:
            return await self._run(checked)
        except Exception as exc:  # the chat loop must never see a tool's exception
            log.exception("tool_failed", tool=self.name)
            return ToolResult.failure(f"{self.name} failed: {type(exc).__name__}")

    @abstractmethod
    async def _run(self, args: Any) -> ToolResult:
        """Run with `args`, an instance of the tool's `Arguments`, already validated."""

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


def llm_schema(model: type[BaseModel]) -> dict[str, Any]:
    """`model`'s JSON schema in the plain form tool calling accepts everywhere (OpenAI,
    Anthropic, llama.cpp grammars): nested models inlined (no `$defs`/`$ref`), pydantic's
    generated titles dropped, and an `anyOf` of bare types written as a `type` list. The
    constraints (lengths, bounds, enums, additionalProperties) are kept as generated."""
    schema = model.model_json_schema()
    defs: dict[str, Any] = schema.pop("$defs", {})

    def clean(node: Any, in_properties: bool = False) -> Any:
        if isinstance(node, list):
            return [clean(item) for item in node]
        if not isinstance(node, dict):
            return node
        if in_properties:  # keys here are field names (a field may be called "title")
            return {key: clean(value) for key, value in node.items()}
        ref = node.get("$ref")
        if isinstance(ref, str):
            return clean(defs[ref.removeprefix("#/$defs/")])
        out = {
            key: value if key in _VALUES else clean(value, in_properties=key == "properties")
            for key, value in node.items()
            if key != "title" or not isinstance(value, str)
        }
        merged = _as_type_list(out.get("anyOf"))
        if merged is not None:
            del out["anyOf"]
            out.update(merged)
        return out

    result: dict[str, Any] = clean(schema)
    return result


# Keywords whose value is data, not a schema: left as they are.
_VALUES = frozenset({"default", "enum", "const", "examples"})
# Keywords that constrain only values of their own type: `{"type": ["integer", "null"],
# "maximum": 10}` means what `anyOf: [{"type": "integer", "maximum": 10}, {"type": "null"}]` does.
_TYPE_SPECIFIC = frozenset(
    {"minLength", "maxLength", "pattern", "format", "minimum", "maximum", "exclusiveMinimum",
     "exclusiveMaximum", "multipleOf", "items", "minItems", "maxItems"}
)  # fmt: skip


def _as_type_list(options: Any) -> dict[str, Any] | None:
    """An `anyOf` of plain types (at most one of them constrained) as one `type` list."""
    if not isinstance(options, list) or not options:
        return None
    if not all(isinstance(o, dict) and isinstance(o.get("type"), str) for o in options):
        return None
    constrained = [o for o in options if set(o) != {"type"}]
    if len(constrained) > 1 or any(set(o) - {"type"} - _TYPE_SPECIFIC for o in constrained):
        return None
    types = [o["type"] for o in options]
    if "number" in types and "integer" in types:  # an integer is a number already
        types.remove("integer")
    return {
        **(constrained[0] if constrained else {}),
        "type": types if len(types) > 1 else types[0],
    }


def one_of(kinds: str) -> WrapValidator:
    """For a union of scalar types (`Annotated[str | float, one_of("a string or a number")]`):
    one error naming what is accepted, instead of pydantic's one error per member."""

    def check(value: Any, handler: ValidatorFunctionWrapHandler) -> Any:
        try:
            return handler(value)
        except ValidationError:
            raise PydanticCustomError(
                "union_type", "Input should be {kinds}", {"kinds": kinds}
            ) from None

    return WrapValidator(check)


def describe_errors(
    exc: ValidationError, *, allowed: list[str] | None = None, limit: int = 3
) -> str:
    """A readable summary naming each bad field (`rows[3][0]: Input should be a valid
    string`); `allowed`: the top-level argument names, listed when an unknown one is given."""
    parts: list[str] = []
    errors = exc.errors(include_url=False)
    for error in errors[:limit]:
        where = _location(error["loc"])
        message = str(error["msg"])
        if error["type"] == "extra_forbidden":
            message = "is not allowed here"
            if allowed is not None and len(error["loc"]) == 1:
                message = f"is not an argument of this tool (its arguments: {', '.join(allowed)})"
        elif error["type"] == "missing":
            message = "is required"
        parts.append(f"{where}: {message}")
    if len(errors) > limit:
        parts.append(f"and {len(errors) - limit} more")
    return "; ".join(parts)


def _location(loc: tuple[int | str, ...]) -> str:
    where = ""
    for part in loc:
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    return where or "arguments"


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
