"""The drift check (check.py): GET /v1/check reports, POST /v1/check/repair repairs."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from context_engine.routes.deps import CheckerDep
from her_os_shared.ids import ID_PATTERN

router = APIRouter(tags=["check"])

CheckId = Annotated[
    str | None,
    Query(
        pattern=ID_PATTERN,
        max_length=128,
        description="names the check in its progress events (sea-cucumber); default: a new id",
    ),
]


class DriftKind(BaseModel):
    count: int
    sessions: int
    sample: list[str] = Field(description="up to 20 ids: session_id/segment_id or session_id")


class CheckReport(BaseModel):
    check_id: str
    drift_total: int
    repairable: int
    drift: dict[str, DriftKind]
    counts: dict[str, int]
    skipped: dict[str, str] = Field(description="stores not checked, and why")
    pending: dict[str, int] = Field(description="sessions with a job queued or running, by task")
    forgetting: int = Field(description="sessions of forget requests not done yet")
    seconds: float


class RepairReport(BaseModel):
    before: CheckReport
    repaired: dict[str, Any]
    after: CheckReport


@router.get(
    "/check",
    response_model=CheckReport,
    summary="Drift between the JSONL files, PostgreSQL, the vectors and the graph episodes",
)
async def check(checker: CheckerDep, check_id: CheckId = None) -> CheckReport:
    report = await checker.check(check_id)
    return CheckReport.model_validate(report.view())


@router.post(
    "/check/repair",
    response_model=RepairReport,
    summary="Repair the drift (re-ingest, re-embed, re-sync the graph), then check again",
)
async def repair(checker: CheckerDep, check_id: CheckId = None) -> RepairReport:
    return RepairReport.model_validate(await checker.repair(check_id))
