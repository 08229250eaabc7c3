"""POST /v1/memories: a memory added as text, written as a transcript session (memories.py
does the work) and ingested like POST /v1/ingest/{session_id}; with an `Idempotency-Key`,
written once however often it is retried (her_os_shared.idempotency)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from fastapi import APIRouter, BackgroundTasks, Response
from fastapi.exceptions import RequestValidationError

from context_engine.ingest.memories import InvalidMemoryError, default_speaker, write_memory
from context_engine.ingest.transcripts import Ingestor
from context_engine.routes.deps import IdempotencyDep, IngestorDep, SettingsDep
from context_engine.routes.schemas import AddMemory, MemoryAdded
from her_os_shared.idempotency import Answer, IdempotencyKeyHeader, fingerprint
from her_os_shared.logging import get_logger

log = get_logger(__name__)

router = APIRouter(tags=["ingestion"])


async def _ingest(ingestor: Ingestor, path: Path) -> None:
    try:
        await ingestor.ingest_file(path)
    except Exception as exc:  # the file is written: the watcher ingests it anyway
        log.warning("memory.ingest_failed", path=path.name, error=repr(exc)[:300])


# Keys of this route are its own (the engine has one caller identity: its token).
SCOPE = "POST /v1/memories"


@router.post(
    "/memories",
    status_code=201,
    response_model=MemoryAdded,
    summary="Add a memory as text: a transcript session, ingested like speech",
    responses={
        409: {"description": "the Idempotency-Key was used for another request, or its first "
              "request is still running (Retry-After); nothing written"},
        422: {"description": "invalid input or Idempotency-Key (`loc` names it); nothing written"},
    },
)  # fmt: skip
async def add_memory(
    ingestor: IngestorDep,
    settings: SettingsDep,
    idempotency: IdempotencyDep,
    body: AddMemory,
    background: BackgroundTasks,
    key: IdempotencyKeyHeader = None,
) -> Response:
    async def write() -> Answer:
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
        added = MemoryAdded(
            session_id=written.session_id,
            segment_ids=written.segment_ids,
            spoken_at=written.spoken_at,
            ingest="queued",
        )
        return Answer(201, added.model_dump_json().encode())

    # The body as validated (defaults filled in) is what a repeat is compared by: leaving
    # out `source` and sending its default are the same request.
    request = fingerprint(body.model_dump(mode="json"))
    return await idempotency.respond(SCOPE, key, request, write)
