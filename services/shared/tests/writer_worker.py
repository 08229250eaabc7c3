"""Run as a separate process by the writer tests: appends payloads to one session.

usage: writer_worker.py DIR SESSION WORKER_ID COUNT TEXT_BYTES [--forever]
"""

from __future__ import annotations

import sys
from datetime import UTC, datetime
from pathlib import Path

from her_os_shared.jsonl import append_records
from her_os_shared.transcript import Segment, TranscriptPayload


def main() -> None:
    directory, session, worker, count, text_bytes = sys.argv[1:6]
    forever = "--forever" in sys.argv
    text = "x" * int(text_bytes)
    i = 0
    print("ready", flush=True)  # imports done: the crash test starts its timer here
    while forever or i < int(count):
        payload = TranscriptPayload(
            session_id=session,
            device_id="dev",
            session_started_at=datetime.now(UTC),
            segments=[
                Segment(
                    segment_id=f"w{worker}_{i}",
                    speaker=f"w{worker}",
                    text=text,
                    start=float(i),
                    end=float(i) + 1,
                    stt_engine="test",
                )
            ],
        )
        append_records(Path(directory), session, [payload])
        i += 1
    print("done", flush=True)


if __name__ == "__main__":
    main()
