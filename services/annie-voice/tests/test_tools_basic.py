"""think, render_table, render_chart, argument validation and make_tools."""

from __future__ import annotations

import json
import math
from typing import Any, ClassVar

import pytest
from pydantic import Field

from annie_voice.tools import ALL_TOOL_NAMES, ToolConfig, make_tools, python_exec
from annie_voice.tools.base import (
    MAX_CONTENT_CHARS,
    Tool,
    ToolArguments,
    ToolResult,
    llm_schema,
)
from annie_voice.tools.render import (
    MAX_CELL_CHARS,
    MAX_TABLE_ROWS,
    RenderChartTool,
    RenderTableTool,
)
from annie_voice.tools.think import ThinkTool


def test_make_tools_gives_every_enabled_tool_with_a_valid_spec(tmp_path) -> None:
    tools = make_tools(ToolConfig(python_scratch_root=tmp_path))
    # execute_python only where its kernel sandbox can be built (test_sandbox_escapes.py)
    expected = set(ALL_TOOL_NAMES)
    if not python_exec.sandbox_support().available:
        expected.discard("execute_python")
    assert {t.name for t in tools} == expected
    for tool in tools:
        spec = tool.spec()
        assert spec["type"] == "function"
        assert spec["function"]["name"] == tool.name
        assert tool.description
        assert tool.parameters["type"] == "object"
        assert tool.parameters["additionalProperties"] is False
        # generated from the tool's argument model, in the plain form every LLM API takes
        assert spec["function"]["parameters"] == llm_schema(tool.Arguments)
        flat = json.dumps(tool.parameters)
        assert "$ref" not in flat and "$defs" not in flat and "anyOf" not in flat
        assert '"title": "' not in flat.replace('"title": {', "")  # pydantic's titles dropped


def test_make_tools_honours_enabled_and_rejects_unknown_names() -> None:
    tools = make_tools(ToolConfig(enabled=frozenset({"think", "render_chart"})))
    assert [t.name for t in tools] == ["think", "render_chart"]
    with pytest.raises(ValueError, match="unknown tool names"):
        make_tools(ToolConfig(enabled=frozenset({"think", "rm_rf"})))


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (None, "arguments: Input should be a valid dictionary"),
        ({}, "thought: is required"),
        ({"thought": 3}, "thought: Input should be a valid string"),
        ({"thought": ""}, "thought: String should have at least 1 character"),
        ({"thought": "x" * 8_001}, "thought: String should have at most 8000 characters"),
        ({"thought": "x", "extra": 1}, "extra: is not an argument of this tool (its arguments: "),
    ],
)
async def test_bad_arguments_come_back_as_a_clear_error_result(args, problem) -> None:
    result = await ThinkTool().run(args)
    assert not result.ok
    assert problem in (result.error or "")
    assert result.content.startswith("Error: think: invalid arguments")


class _ProbeTool(Tool):
    """A tool that records whether its body ran."""

    name: ClassVar[str] = "probe"
    description: ClassVar[str] = "Records its calls."

    class Arguments(ToolArguments):
        query: str = Field(min_length=1, max_length=20)
        limit: int = Field(default=3, ge=1, le=10)
        ratio: float | None = None

    def __init__(self) -> None:
        self.ran: list[Any] = []

    async def _run(self, args: Arguments) -> ToolResult:
        self.ran.append(args)
        return ToolResult.success(f"{args.query} x{args.limit}")


@pytest.mark.parametrize(
    ("args", "field", "problem"),
    [
        ({"query": 5}, "query", "valid string"),  # the wrong type
        ({"query": "x", "limit": "5"}, "limit", "valid integer"),  # never coerced
        ({"query": "x", "limit": True}, "limit", "valid integer"),  # a bool is not a number
        ({"query": "x", "limit": 2.5}, "limit", "valid integer"),
        ({"limit": 2}, "query", "is required"),  # a missing required one
        ({"query": "x", "drop_table": 1}, "drop_table", "not an argument of this tool"),
        ({"query": "x" * 21}, "query", "at most 20 characters"),  # over-long
        ({"query": "x", "limit": 11}, "limit", "less than or equal to 10"),
        ({"query": "x", "ratio": "0.5"}, "ratio", "valid number"),
        ([], "arguments", "valid dictionary"),
    ],
)
async def test_arguments_outside_the_schema_are_refused_before_the_tool_runs(
    args, field, problem
) -> None:
    tool = _ProbeTool()
    result = await tool.run(args)
    assert not result.ok
    assert tool.ran == []  # `_run` never saw them
    assert f"probe: invalid arguments: {field}: " in (result.error or "")
    assert problem in (result.error or "")


async def test_valid_arguments_reach_the_tool_as_the_validated_model() -> None:
    tool = _ProbeTool()
    result = await tool.run({"query": "otters", "ratio": 1})
    assert result.ok and result.content == "otters x3"
    (args,) = tool.ran
    assert isinstance(args, _ProbeTool.Arguments)
    assert (args.query, args.limit, args.ratio) == ("otters", 3, 1)


def test_the_schema_the_llm_sees_is_generated_from_the_model_with_its_constraints() -> None:
    assert _ProbeTool.parameters == {
        "type": "object",
        "properties": {
            "query": {"type": "string", "minLength": 1, "maxLength": 20},
            "limit": {"type": "integer", "minimum": 1, "maximum": 10, "default": 3},
            "ratio": {"type": ["number", "null"], "default": None},
        },
        "required": ["query"],
        "additionalProperties": False,
    }
    chart = RenderChartTool.parameters
    assert chart["properties"]["type"]["enum"] == ["bar", "line", "pie", "scatter"]
    series = chart["properties"]["series"]
    assert (series["minItems"], series["maxItems"]) == (1, 8)
    # a nested model is inlined, not a $ref
    assert series["items"]["required"] == ["name", "values"]
    assert series["items"]["additionalProperties"] is False
    assert chart["properties"]["labels"]["items"] == {"type": ["string", "number"]}
    assert RenderTableTool.parameters["properties"]["rows"]["items"]["items"] == {
        "type": ["string", "number", "boolean", "null"]
    }


async def test_think_returns_the_note_and_nothing_for_the_page() -> None:
    result = await ThinkTool().run({"thought": "check the date first"})
    assert result.ok
    assert "check the date first" in result.content
    assert result.data is None


def test_success_content_is_bounded() -> None:
    result = ToolResult.success("x" * (MAX_CONTENT_CHARS * 2))
    assert len(result.content) == MAX_CONTENT_CHARS
    assert "truncated" in result.content


async def test_render_table_returns_the_table_for_the_page() -> None:
    result = await RenderTableTool().run(
        {"title": "Fruit", "columns": ["name", "kcal"], "rows": [["apple", 52], ["kiwi", 61.0]]}
    )
    assert result.ok
    assert result.data == {
        "kind": "table",
        "title": "Fruit",
        "columns": ["name", "kcal"],
        "rows": [["apple", 52], ["kiwi", 61.0]],
    }
    assert "2 rows" in result.content and "name, kcal" in result.content


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"columns": ["a", "b"], "rows": [["x"]]}, "row 0 has 1 cells but there are 2 columns"),
        ({"columns": ["a"], "rows": [["x" * (MAX_CELL_CHARS + 1)]]}, "longer than"),
        ({"columns": ["a"], "rows": [[math.nan]]}, "not finite"),
        (
            {"columns": ["a"], "rows": [[{"nested": 1}]]},
            "rows[0][0]: Input should be a string, number, boolean or null",
        ),
        (
            {"columns": ["a"], "rows": [["x"]] * (MAX_TABLE_ROWS + 1)},
            "rows: List should have at most 200 items",
        ),
        ({"columns": [], "rows": []}, "columns: List should have at least 1 item"),
        ({"columns": ["a"]}, "rows: is required"),
    ],
)
async def test_render_table_refuses_bad_tables(args, problem) -> None:
    result = await RenderTableTool().run(args)
    assert not result.ok
    assert problem in (result.error or "")
    assert result.data is None


async def test_render_chart_returns_the_chart_for_the_page() -> None:
    result = await RenderChartTool().run(
        {
            "type": "line",
            "title": "Steps",
            "labels": [2023, "2024"],
            "series": [{"name": "me", "values": [1.5, 2]}, {"name": "you", "values": [3, 4]}],
        }
    )
    assert result.ok
    assert result.data is not None
    assert result.data["kind"] == "chart"
    assert result.data["type"] == "line"
    assert result.data["labels"] == ["2023", "2024"]
    assert result.data["series"][1] == {"name": "you", "values": [3, 4]}
    assert "line chart" in result.content and "me, you" in result.content


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"type": "radar", "labels": ["a"], "series": [{"name": "s", "values": [1]}]},
         "type: Input should be 'bar', 'line', 'pie' or 'scatter'"),
        ({"type": "bar", "labels": ["a", "b"], "series": [{"name": "s", "values": [1]}]},
         "has 1 values but there are 2 labels"),
        ({"type": "bar", "labels": ["a"], "series": [{"name": "s", "values": ["1"]}]},
         "series[0].values[0]: Input should be a number"),
        ({"type": "bar", "labels": ["a"], "series": [{"name": "s", "values": [1], "color": 1}]},
         "series[0].color: is not allowed here"),
        ({"type": "bar", "labels": [None], "series": [{"name": "s", "values": [1]}]},
         "labels[0]: Input should be a string or a number"),
        ({"type": "bar", "labels": ["a"], "series": [{"name": "s", "values": [math.inf]}]},
         "non-finite"),
        ({"type": "pie", "labels": ["a"],
          "series": [{"name": "s", "values": [1]}, {"name": "t", "values": [2]}]},
         "exactly one series"),
        ({"type": "pie", "labels": ["a"], "series": [{"name": "s", "values": [-1]}]},
         "must not be negative"),
        ({"type": "bar", "labels": ["a"] * 201, "series": [{"name": "s", "values": [1] * 201}]},
         "labels: List should have at most 200 items"),
    ],
)  # fmt: skip
async def test_render_chart_refuses_bad_charts(args, problem) -> None:
    result = await RenderChartTool().run(args)
    assert not result.ok
    assert problem in (result.error or "")
