"""Runs one frame processor in a real Pipecat pipeline until the frame a test waits for arrives.

Not pipecat.tests.utils.run_test: that gives the pipeline 1 s to start (our STT and TTS load
their models at start: seconds on a loaded 2-core machine, and then run_test raised while its
pipeline ran on, so the test hung) and ends the pipeline as soon as the frames are queued. Here
every wait is on an event (the pipeline started, the awaited frame reached the end, the
pipeline finished), each with a generous limit that only a real hang reaches.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from pipecat.frames.frames import EndFrame, ErrorFrame, Frame, StartFrame
from pipecat.pipeline.pipeline import Pipeline
from pipecat.pipeline.worker import PipelineWorker
from pipecat.processors.frame_processor import FrameDirection, FrameProcessor
from pipecat.workers.runner import WorkerRunner

# Far above any honest duration here (a model load and a transcription under full load).
WAIT_S = 300.0


class _Recorder(FrameProcessor):
    """Records the frames passing it in one direction and signals the first awaited one."""

    def __init__(self, direction: FrameDirection, until: Callable[[Frame], bool]) -> None:
        super().__init__(enable_direct_mode=True)
        self.direction = direction
        self.until = until
        self.frames: list[Frame] = []
        self.arrived = asyncio.Event()

    async def process_frame(self, frame: Frame, direction: FrameDirection) -> None:
        await super().process_frame(frame, direction)
        if direction == self.direction and not isinstance(frame, (StartFrame, EndFrame)):
            self.frames.append(frame)
            if self.until(frame):
                self.arrived.set()
        await self.push_frame(frame, direction)


@dataclass
class Run:
    down: list[Frame] = field(default_factory=list)
    up: list[Frame] = field(default_factory=list)


async def _wait_for(what: str, event: asyncio.Event, run: asyncio.Task[None], seen: Run) -> None:
    waiter = asyncio.ensure_future(event.wait())
    try:
        done, _ = await asyncio.wait({waiter, run}, timeout=WAIT_S, return_when="FIRST_COMPLETED")
    finally:
        waiter.cancel()
    if waiter in done:
        return
    shown = [f for f in seen.up + seen.down if isinstance(f, ErrorFrame)]
    state = "the pipeline ended" if run in done else f"{WAIT_S:.0f} s passed"
    raise AssertionError(f"{state} before {what}; errors: {shown}")


async def run_until(
    processor: FrameProcessor,
    frames: Sequence[Frame],
    until: Callable[[Frame], bool],
) -> Run:
    """Start `processor` in a pipeline, queue `frames` once it has started, wait until a
    downstream frame satisfies `until`, then end the pipeline (EndFrame: each processor
    finishes its queued work) and return every frame it sent down and up."""
    return await run_stages(processor, [(frames, until)])


Stage = tuple[Sequence[Frame], Callable[[Frame], bool]]


async def run_stages(processor: FrameProcessor, stages: Sequence[Stage]) -> Run:
    """`run_until` in stages: each stage's frames are queued only once the previous stage's
    awaited frame arrived (a system frame queued with data frames overtakes them)."""
    current: list[Callable[[Frame], bool]] = [stages[0][1]]
    head = _Recorder(FrameDirection.UPSTREAM, lambda _f: False)
    tail = _Recorder(FrameDirection.DOWNSTREAM, lambda f: current[0](f))
    worker = PipelineWorker(
        Pipeline([head, processor, tail]), cancel_on_idle_timeout=False, enable_rtvi=False
    )
    started = asyncio.Event()

    @worker.event_handler("on_pipeline_started")
    async def _started(_worker: PipelineWorker, _frame: StartFrame) -> None:
        started.set()

    result = Run(down=tail.frames, up=head.frames)
    runner = WorkerRunner(handle_sigint=False)
    await runner.add_workers(worker)
    run = asyncio.create_task(runner.run())
    try:
        await _wait_for("the pipeline started", started, run, result)
        for number, (frames, until) in enumerate(stages, 1):
            if number > 1:  # the first stage's frame may arrive before anything is queued
                current[0] = until
                tail.arrived.clear()
            for frame in frames:
                await worker.queue_frame(frame)
            await _wait_for(f"stage {number}'s awaited frame arrived", tail.arrived, run, result)
        await worker.queue_frame(EndFrame())
        await asyncio.wait_for(asyncio.shield(run), WAIT_S)
    finally:
        if not run.done():
            await worker.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(run, 30)
    return result
