"""think, render_table, render_chart, argument validation and make_tools."""

from __future__ import annotations

import math

import pytest

from annie_voice.tools import ALL_TOOL_NAMES, ToolConfig, make_tools
from annie_voice.tools.base import MAX_CONTENT_CHARS, ToolResult, validate
from annie_voice.tools.render import (
    MAX_CELL_CHARS,
    MAX_TABLE_ROWS,
    RenderChartTool,
    RenderTableTool,
)
from annie_voice.tools.think import ThinkTool


def test_make_tools_gives_every_enabled_tool_with_a_valid_spec(tmp_path) -> None:
    tools = make_tools(ToolConfig(python_scratch_root=tmp_path))
    assert {t.name for t in tools} == ALL_TOOL_NAMES
    for tool in tools:
        spec = tool.spec()
        assert spec["type"] == "function"
        assert spec["function"]["name"] == tool.name
        assert tool.description
        assert tool.parameters["type"] == "object"
        assert tool.parameters["additionalProperties"] is False


def test_make_tools_honours_enabled_and_rejects_unknown_names() -> None:
    tools = make_tools(ToolConfig(enabled=frozenset({"think", "render_chart"})))
    assert [t.name for t in tools] == ["think", "render_chart"]
    with pytest.raises(ValueError, match="unknown tool names"):
        make_tools(ToolConfig(enabled=frozenset({"think", "rm_rf"})))


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        (None, "arguments must be object"),
        ({}, "missing required 'thought'"),
        ({"thought": 3}, "arguments.thought must be string"),
        ({"thought": ""}, "at least 1 characters"),
        ({"thought": "x", "extra": 1}, "unknown 'extra'"),
    ],
)
async def test_bad_arguments_come_back_as_a_clear_error_result(args, problem) -> None:
    result = await ThinkTool().run(args)
    assert not result.ok
    assert problem in (result.error or "")
    assert result.content.startswith("Error: think: invalid arguments")


def test_validate_treats_bool_as_not_a_number() -> None:
    assert validate({"type": "integer"}, True, "x") == "x must be integer, got boolean"
    assert validate({"type": "number"}, 2, "x") is None


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
        ({"columns": ["a"], "rows": [[{"nested": 1}]]}, "must be string or number"),
        ({"columns": ["a"], "rows": [["x"]] * (MAX_TABLE_ROWS + 1)}, "at most 200 items"),
        ({"columns": [], "rows": []}, "at least 1 items"),
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
        ({"type": "radar", "labels": ["a"], "series": [{"name": "s", "values": [1]}]}, "one of"),
        ({"type": "bar", "labels": ["a", "b"], "series": [{"name": "s", "values": [1]}]},
         "has 1 values but there are 2 labels"),
        ({"type": "bar", "labels": ["a"], "series": [{"name": "s", "values": ["1"]}]},
         "must be number"),
        ({"type": "bar", "labels": ["a"], "series": [{"name": "s", "values": [math.inf]}]},
         "non-finite"),
        ({"type": "pie", "labels": ["a"],
          "series": [{"name": "s", "values": [1]}, {"name": "t", "values": [2]}]},
         "exactly one series"),
        ({"type": "pie", "labels": ["a"], "series": [{"name": "s", "values": [-1]}]},
         "must not be negative"),
        ({"type": "bar", "labels": ["a"] * 201, "series": [{"name": "s", "values": [1] * 201}]},
         "at most 200 items"),
    ],
)  # fmt: skip
async def test_render_chart_refuses_bad_charts(args, problem) -> None:
    result = await RenderChartTool().run(args)
    assert not result.ok
    assert problem in (result.error or "")
