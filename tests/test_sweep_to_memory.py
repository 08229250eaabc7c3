"""Across services: the audio pipeline's sweep, read by the context engine, replaces the
fast-path segments it overlaps, while the segment the user corrected (pinned) stays.
Real models on synthesised speech, real PostgreSQL, one shared transcripts directory."""

from __future__ import annotations

from pathlib import Path

import pytest
from api_harness import AUTH, eventually, make_settings, payloads, post, serving
from engine_harness import TOKEN as ENGINE_TOKEN
from engine_harness import ingest, start_engine
from speech_synth import VOICE_A, VOICE_B, conversation, have_espeak, to_wav_bytes

from audio_pipeline.audio import SAMPLE_RATE, decode_audio
from context_engine.config import Settings as EngineSettings

pytestmark = pytest.mark.skipif(not have_espeak(), reason="espeak-ng is not installed")


async def test_sweep_segments_replace_fast_path_ones_in_memory_and_pinned_ones_stay(
    tmp_path: Path, db_url: str
) -> None:
    samples, rate, _ = conversation(
        [
            (VOICE_A, "Remember to call the plumber about the kitchen sink."),
            (VOICE_B, "I will call him tomorrow morning before work."),
            (VOICE_A, "Also the dentist moved our appointment to Friday afternoon."),
        ]
    )
    talk = decode_audio(to_wav_bytes(samples, rate), max_seconds=120).samples
    audio_settings = make_settings(tmp_path)
    cut = int(len(talk) * 0.5)
    async with serving(audio_settings) as audio:
        for part in (talk[:cut], talk[cut:]):
            r = await post(audio, to_wav_bytes(part, SAMPLE_RATE), session_id="walk-1")
            assert r.status_code == 200, r.text
        fast = [s for p in payloads(audio_settings, "walk-1") for s in p.segments]
        pinned_id = fast[0].segment_id
        r = await audio.post(
            "/v1/feedback",
            json={"session_id": "walk-1", "segment_id": pinned_id, "speaker": "Asha"},
            headers=AUTH,
        )
        assert r.status_code == 200, r.text
        assert (await audio.post("/v1/sweep/walk-1", headers=AUTH)).status_code == 202

        async def swept() -> dict | None:
            s = (await audio.get("/v1/session/walk-1", headers=AUTH)).json()["sweep"]
            return s if s["state"] in ("done", "failed") else None

        assert (await eventually(swept, "the sweep"))["state"] == "done"

    engine_settings = EngineSettings(
        internal_token=ENGINE_TOKEN,
        database_url=db_url,
        transcripts_dir=audio_settings.transcripts_dir,
        events_dir=tmp_path / "engine-events",
        search_index_dir=tmp_path / "search-index",
        vector_dir=tmp_path / "vectors",
    )
    async for engine in start_engine(engine_settings):
        await ingest(engine, "walk-1")
        r = await engine.get("/v1/sessions/walk-1", include_replaced="true")
        assert r.status_code == 200, r.text
        rows = {s["segment_id"]: s for s in r.json()["segments"]}
        sweep_rows = [s for s in rows.values() if s["is_sweep"]]
        assert sweep_rows and all(s["replaced_by"] is None for s in sweep_rows)
        pinned = rows[pinned_id]
        assert (pinned["pinned"], pinned["speaker"], pinned["replaced_by"]) == (True, "Asha", None)
        replaced = [s for s in rows.values() if not s["is_sweep"] and s["replaced_by"]]
        assert replaced, "the sweep replaced no fast-path segment"
        assert {s["replaced_by"] for s in replaced} <= {s["segment_id"] for s in sweep_rows}
        # What retrieval sees: sweep segments and the pinned one, no replaced fast-path text.
        visible = (await engine.get("/v1/sessions/walk-1")).json()["segments"]
        assert pinned_id in {s["segment_id"] for s in visible}
        assert not {s["segment_id"] for s in replaced} & {s["segment_id"] for s in visible}
        text = " ".join(s["text"] for s in visible).lower()
        assert all(w in text for w in ("plumber", "tomorrow", "dentist"))
