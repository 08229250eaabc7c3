from __future__ import annotations

from annie_doubles import TOKEN, EngineDouble

from annie_voice.engine import EngineClient
from annie_voice.observe import Observer


def observer(double: EngineDouble, **kw) -> Observer:
    return Observer(EngineClient("http://engine", TOKEN, transport=double.transport()), **kw)


async def test_events_are_batched_to_the_engine_with_the_registry_fields() -> None:
    double = EngineDouble()
    obs = observer(double, batch_max=3)
    obs.emit("selkie", "complete", session_id="s1", data={"items": 2})
    obs.emit("lanternfish", "start", session_id="s1")
    obs.emit("otter", "error", data={"tool": "web_search"})
    obs.emit("mermaid", "start")
    obs.emit("narwhal", "start")  # the engine's creature: not Annie's to report
    sent = await obs.flush()
    batches = double.emitted
    assert [len(b) for b in batches] == [3, 1]
    first = batches[0][0]
    assert first["service"] == "annie-voice" and first["creature"] == "selkie"
    assert first["process"] == "memory_briefing" and first["zone"] == "acting"
    assert sent == 4 and obs.stats.sent == 4 and obs.stats.invalid == 1


async def test_a_full_queue_drops_and_counts_without_blocking() -> None:
    double = EngineDouble()
    obs = observer(double, queue_size=500)
    for _ in range(503):
        obs.emit("otter", "start")
    assert obs.queue.qsize() == 500 and obs.stats.dropped_full == 3
    await obs.flush()
    assert sum(len(b) for b in double.emitted) == 500


async def test_engine_down_drops_the_batch_and_never_raises() -> None:
    double = EngineDouble(emit_mode="down")
    obs = observer(double)
    obs.emit("mermaid", "start", session_id="s1")
    assert await obs.flush() == 0
    assert obs.stats.dropped_failed == 1


async def test_invalid_events_are_counted_not_raised() -> None:
    obs = observer(EngineDouble())
    obs.emit("no-such-creature", "start")
    obs.emit("otter", "start", session_id="bad id/..")
    assert obs.stats.invalid == 2 and obs.queue.empty()


async def test_start_and_stop_send_what_is_left() -> None:
    double = EngineDouble()
    obs = observer(double, flush_s=3600)
    obs.start()
    obs.emit("mermaid", "complete", session_id="s1")
    await obs.stop()
    assert len(double.emitted) == 1
