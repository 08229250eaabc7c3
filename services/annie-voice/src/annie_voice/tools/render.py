"""`render_table` and `render_chart`: structured payloads the client page draws.

The model sends data; the tool validates and bounds it and returns it in `ToolResult.data`, which
the chat loop forwards over the data channel. The page renders the payload as text and shapes
(never as HTML), so cell strings need no escaping here; the limits keep one message small.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

from annie_voice.tools.base import Tool, ToolResult

MAX_TABLE_COLUMNS = 12
MAX_TABLE_ROWS = 200
MAX_CELL_CHARS = 500
MAX_TITLE_CHARS = 200
MAX_CHART_POINTS = 200
MAX_CHART_SERIES = 8
CHART_TYPES = ("bar", "line", "pie", "scatter")

_CELL: dict[str, Any] = {"type": ["string", "number", "boolean", "null"]}
_TITLE: dict[str, Any] = {"type": "string", "maxLength": MAX_TITLE_CHARS}


class RenderTableTool(Tool):
    name: ClassVar[str] = "render_table"
    description: ClassVar[str] = (
        "Show a table on the user's screen. Give column names and rows (each row a list of "
        "cells, one per column). Use for comparisons and lists with several attributes; "
        f"at most {MAX_TABLE_COLUMNS} columns and {MAX_TABLE_ROWS} rows."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "title": _TITLE,
            "columns": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_TABLE_COLUMNS,
                "items": {"type": "string", "minLength": 1, "maxLength": MAX_TITLE_CHARS},
            },
            "rows": {
                "type": "array",
                "maxItems": MAX_TABLE_ROWS,
                "items": {"type": "array", "maxItems": MAX_TABLE_COLUMNS, "items": _CELL},
            },
        },
        "required": ["columns", "rows"],
        "additionalProperties": False,
    }

    async def _run(self, args: dict[str, Any]) -> ToolResult:
        columns: list[str] = args["columns"]
        rows: list[list[Any]] = args["rows"]
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
        title = args.get("title") or ""
        data = {"kind": "table", "title": title, "columns": columns, "rows": rows}
        shown = f'table "{title}"' if title else "table"
        return ToolResult.success(
            f"Showed a {shown} with {len(rows)} rows and columns: {', '.join(columns)}.",
            data=data,
        )


class RenderChartTool(Tool):
    name: ClassVar[str] = "render_chart"
    description: ClassVar[str] = (
        "Show a chart on the user's screen. type is bar, line, pie or scatter; labels are the "
        "x-axis categories (pie: slice names); each series has a name and one number per label "
        "(scatter: labels are the x values as text, values the y values). A pie takes exactly "
        "one series."
    )
    parameters: ClassVar[dict[str, Any]] = {
        "type": "object",
        "properties": {
            "type": {"type": "string", "enum": list(CHART_TYPES)},
            "title": _TITLE,
            "x_label": _TITLE,
            "y_label": _TITLE,
            "labels": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_CHART_POINTS,
                "items": {"type": ["string", "number"]},
            },
            "series": {
                "type": "array",
                "minItems": 1,
                "maxItems": MAX_CHART_SERIES,
                "items": {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "maxLength": MAX_TITLE_CHARS},
                        "values": {
                            "type": "array",
                            "maxItems": MAX_CHART_POINTS,
                            "items": {"type": "number"},
                        },
                    },
                    "required": ["name", "values"],
                    "additionalProperties": False,
                },
            },
        },
        "required": ["type", "labels", "series"],
        "additionalProperties": False,
    }

    async def _run(self, args: dict[str, Any]) -> ToolResult:
        chart_type: str = args["type"]
        labels = [_label(x) for x in args["labels"]]
        series: list[dict[str, Any]] = args["series"]
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
        title = args.get("title") or ""
        data = {
            "kind": "chart",
            "type": chart_type,
            "title": title,
            "x_label": args.get("x_label") or "",
            "y_label": args.get("y_label") or "",
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
