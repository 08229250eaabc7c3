"""POST /v1/ingest/{session_id}: ingest a session's transcript file now."""

from __future__ import annotations

from dataclasses import asdict

from fastapi import APIRouter, HTTPException

from context_engine.routes.deps import IngestorDep, SessionIdPath
from context_engine.routes.schemas import IngestResponse

router = APIRouter(tags=["ingestion"])


@router.post(
    "/ingest/{session_id}",
    response_model=IngestResponse,
    summary="Ingest a session's JSONL file now (the watcher does this on its own)",
    responses={404: {"description": "no transcript file for this session"}},
)
async def ingest_session(ingestor: IngestorDep, session_id: SessionIdPath) -> IngestResponse:
    path = ingestor.path_for(session_id)
    if not path.is_file():
        raise HTTPException(status_code=404, detail=f"no transcript file for session {session_id}")
    result = await ingestor.ingest_file(path)
    if result.status == "missing":  # deleted between the check and the read
        raise HTTPException(status_code=404, detail=f"no transcript file for session {session_id}")
    fields = asdict(result)
    fields.pop("generation")
    return IngestResponse.model_validate(fields)
