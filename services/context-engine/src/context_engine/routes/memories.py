"""POST /v1/memories: a memory added as text, written as a transcript session (memories.py
does the work) and ingested like POST /v1/ingest/{session_id}."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fastapi import APIRouter, BackgroundTasks
from fastapi.exceptions import RequestValidationError

from context_engine.ingest.memories import InvalidMemoryError, default_speaker, write_memory
from context_engine.ingest.transcripts import Ingestor
from context_engine.routes.deps import IngestorDep, SettingsDep
from context_engine.routes.schemas import AddMemory, MemoryAdded
from her_os_shared.logging import get_logger

log = get_logger(__name__)

router = APIRouter(tags=["ingestion"])


async def _ingest(ingestor: Ingestor, path: Path) -> None:
    try:
        await ingestor.ingest_file(path)
    except Exception as exc:  # the file is written: the watcher ingests it anyway
        log.warning("memory.ingest_failed", path=path.name, error=repr(exc)[:300])


@router.post(
    "/memories",
    status_code=201,
    response_model=MemoryAdded,
    summary="Add a memory as text: a transcript session, ingested like speech",
    responses={422: {"description": "invalid input (`loc` names the field); nothing written"}},
)
async def add_memory(
    ingestor: IngestorDep, settings: SettingsDep, body: AddMemory, background: BackgroundTasks
) -> MemoryAdded:
    try:
        written = await asyncio.to_thread(
            write_memory,
            settings.transcripts_dir,
            text=body.text,
            speaker=body.speaker or default_speaker(settings.owner_name),
            at=body.at,
            session_id=body.session_id,
            device_id=body.source,
        )
    except InvalidMemoryError as exc:
        # FastAPI's own validation-error shape, as every other 422 of the engine.
        raise RequestValidationError(
            [{"type": "value_error", "loc": ("body", exc.field), "msg": str(exc)}]
        ) from None
    # After the response: the memory is durable in its file already.
    background.add_task(_ingest, ingestor, written.path)
    return MemoryAdded(
        session_id=written.session_id,
        segment_ids=written.segment_ids,
        spoken_at=written.spoken_at,
        ingest="queued",
    )
