from __future__ import annotations

from annie_doubles import TOKEN, EngineDouble

from annie_voice.engine import EngineClient
from annie_voice.observe import Observer
from her_os_shared.creatures import CreatureName


def observer(double: EngineDouble, **kw) -> Observer:
    return Observer(EngineClient("http://engine", TOKEN, transport=double.transport()), **kw)


async def test_events_are_batched_to_the_engine_with_the_registry_fields() -> None:
    double = EngineDouble()
    obs = observer(double, batch_max=3)
    obs.emit(CreatureName.SPHINX, "complete", session_id="s1", data={"items": 2})
    obs.emit(CreatureName.LANTERNFISH, "start", session_id="s1")
    obs.emit(CreatureName.CHIMERA, "error", data={"tool": "web_search"})
    obs.emit(CreatureName.MERMAID, "start")
    obs.emit(CreatureName.NARWHAL, "start")  # the engine's creature: not Annie's to report
    sent = await obs.flush()
    batches = double.emitted
    assert [len(b) for b in batches] == [3, 1]
    first = batches[0][0]
    assert first["service"] == "annie-voice" and first["creature"] == "sphinx"
    assert first["process"] == "memory-loader" and first["zone"] == "thinking"
    assert type(first["creature"]) is str
    assert sent == 4 and obs.stats.sent == 4 and obs.stats.invalid == 1


async def test_a_full_queue_drops_and_counts_without_blocking() -> None:
    double = EngineDouble()
    obs = observer(double, queue_size=500)
    for _ in range(503):
        obs.emit(CreatureName.GRIFFIN, "start")
    assert obs.queue.qsize() == 500 and obs.stats.dropped_full == 3
    await obs.flush()
    assert sum(len(b) for b in double.emitted) == 500


async def test_engine_down_drops_the_batch_and_never_raises() -> None:
    double = EngineDouble(emit_mode="down")
    obs = observer(double)
    obs.emit(CreatureName.MERMAID, "start", session_id="s1")
    assert await obs.flush() == 0
    assert obs.stats.dropped_failed == 1


async def test_invalid_events_are_counted_not_raised() -> None:
    obs = observer(EngineDouble())
    obs.emit("no-such-creature", "start")
    obs.emit("otter", "start")  # a name retired by ADR 0021
    obs.emit(CreatureName.GRIFFIN, "start", session_id="bad id/..")
    assert obs.stats.invalid == 3 and obs.queue.empty()


async def test_start_and_stop_send_what_is_left() -> None:
    double = EngineDouble()
    obs = observer(double, flush_s=3600)
    obs.start()
    obs.emit(CreatureName.LUNA_MOTH, "complete", session_id="s1")
    await obs.stop()
    assert len(double.emitted) == 1
