"""`render_table` and `render_chart`: structured payloads the client page draws.

The model sends data; the tool validates and bounds it and returns it in `ToolResult.data`, which
the chat loop forwards over the data channel. The page renders the payload as text and shapes
(never as HTML), so cell strings need no escaping here; the limits keep one message small.
"""

from __future__ import annotations

import math
from typing import Annotated, ClassVar, Literal, get_args

from pydantic import Field

from annie_voice.tools.base import Tool, ToolArguments, ToolResult, one_of

MAX_TABLE_COLUMNS = 12
MAX_TABLE_ROWS = 200
MAX_CELL_CHARS = 500
MAX_TITLE_CHARS = 200
MAX_CHART_POINTS = 200
MAX_CHART_SERIES = 8
ChartType = Literal["bar", "line", "pie", "scatter"]
CHART_TYPES: tuple[str, ...] = get_args(ChartType)

# A table cell is any JSON scalar; its length is checked by the tool (a readable error).
Cell = Annotated[str | int | float | bool | None, one_of("a string, number, boolean or null")]
Title = Annotated[str, Field(max_length=MAX_TITLE_CHARS)]
Label = Annotated[str | int | float, one_of("a string or a number")]
Number = Annotated[int | float, one_of("a number")]  # ints stay ints in the page's payload


class RenderTableTool(Tool):
    name: ClassVar[str] = "render_table"
    description: ClassVar[str] = (
        "Show a table on the user's screen. Give column names and rows (each row a list of "
        "cells, one per column). Use for comparisons and lists with several attributes; "
        f"at most {MAX_TABLE_COLUMNS} columns and {MAX_TABLE_ROWS} rows."
    )

    class Arguments(ToolArguments):
        title: Title = ""
        columns: list[Annotated[str, Field(min_length=1, max_length=MAX_TITLE_CHARS)]] = Field(
            min_length=1, max_length=MAX_TABLE_COLUMNS
        )
        rows: list[Annotated[list[Cell], Field(max_length=MAX_TABLE_COLUMNS)]] = Field(
            max_length=MAX_TABLE_ROWS
        )

    async def _run(self, args: Arguments) -> ToolResult:
        columns = list(args.columns)
        rows = [list(row) for row in args.rows]
        for i, row in enumerate(rows):
            if len(row) != len(columns):
                return ToolResult.failure(
                    f"render_table: row {i} has {len(row)} cells but there are "
                    f"{len(columns)} columns"
                )
            for j, cell in enumerate(row):
                if isinstance(cell, float) and not math.isfinite(cell):
                    return ToolResult.failure(f"render_table: rows[{i}][{j}] is not finite")
                if isinstance(cell, str) and len(cell) > MAX_CELL_CHARS:
                    return ToolResult.failure(
                        f"render_table: rows[{i}][{j}] is longer than {MAX_CELL_CHARS} characters"
                    )
        title = args.title
        data = {"kind": "table", "title": title, "columns": columns, "rows": rows}
        shown = f'table "{title}"' if title else "table"
        return ToolResult.success(
            f"Showed a {shown} with {len(rows)} rows and columns: {', '.join(columns)}.",
            data=data,
        )


class Series(ToolArguments):
    """One series of a chart: a name and one number per label."""

    name: Title
    values: list[Number] = Field(max_length=MAX_CHART_POINTS)


class RenderChartTool(Tool):
    name: ClassVar[str] = "render_chart"
    description: ClassVar[str] = (
        "Show a chart on the user's screen. type is bar, line, pie or scatter; labels are the "
        "x-axis categories (pie: slice names); each series has a name and one number per label "
        "(scatter: labels are the x values as text, values the y values). A pie takes exactly "
        "one series."
    )

    class Arguments(ToolArguments):
        type: ChartType
        title: Title = ""
        x_label: Title = ""
        y_label: Title = ""
        labels: list[Label] = Field(min_length=1, max_length=MAX_CHART_POINTS)
        series: list[Series] = Field(min_length=1, max_length=MAX_CHART_SERIES)

    async def _run(self, args: Arguments) -> ToolResult:
        chart_type = args.type
        labels = [_label(x) for x in args.labels]
        series = [{"name": s.name, "values": list(s.values)} for s in args.series]
        if any(len(label) > MAX_TITLE_CHARS for label in labels):
            return ToolResult.failure(
                f"render_chart: labels must be at most {MAX_TITLE_CHARS} characters"
            )
        for i, s in enumerate(series):
            if len(s["values"]) != len(labels):
                return ToolResult.failure(
                    f"render_chart: series {i} ('{s['name']}') has {len(s['values'])} values "
                    f"but there are {len(labels)} labels"
                )
            if not all(math.isfinite(v) for v in s["values"]):
                return ToolResult.failure(f"render_chart: series {i} has a non-finite value")
        if chart_type == "pie":
            if len(series) != 1:
                return ToolResult.failure("render_chart: a pie chart takes exactly one series")
            if any(v < 0 for v in series[0]["values"]):
                return ToolResult.failure("render_chart: pie values must not be negative")
        title = args.title
        data = {
            "kind": "chart",
            "type": chart_type,
            "title": title,
            "x_label": args.x_label,
            "y_label": args.y_label,
            "labels": labels,
            "series": [{"name": s["name"], "values": s["values"]} for s in series],
        }
        names = ", ".join(s["name"] for s in series)
        shown = f' "{title}"' if title else ""
        return ToolResult.success(
            f"Showed a {chart_type} chart{shown} with {len(labels)} points and series: {names}.",
            data=data,
        )


def _label(value: str | float) -> str:
    # Numeric labels (years, scatter x values) come through as text: one type for the page.
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
