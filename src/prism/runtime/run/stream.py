"""Streaming one run: its events as an async iterator.

``session.stream(input, ...)`` returns a [`RunStream`][prism.runtime.run.stream.RunStream]: it subscribes first, then starts the
run as a task on first use, and yields that run's events.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Coroutine
from types import TracebackType
from typing import Any, Protocol, Unpack

from prism.abort import AbortController, AbortSignal
from prism.errors import AbortError
from prism.events import AgentEvent, AgentStartedEvent
from prism.runtime.run._observers import EventSubscription
from prism.runtime.run.options import RunOptionKeywords
from prism.types import AgentInput, RunResult

__all__ = ["RunStream"]


class RunFunction(Protocol):
    """``session.run`` as the stream calls it."""

    def __call__(
        self, input: AgentInput, /, **options: Unpack[RunOptionKeywords]
    ) -> Coroutine[Any, Any, RunResult]:
        """Start one run."""
        ...


class RunStream:
    """The events of one run, as an async iterator and async context manager.

    Yields every event until the run's ``agent_started``, then only that run's events; after the
    last event it re-raises the run's exception, if any. [`result`][prism.runtime.run.stream.RunStream.result] is set once the run
    returned a result. Leaving early (``aclose()``, ``async with`` exit, or finalisation after a
    ``break``) aborts the run with ``AbortError("stream consumer closed")``.
    """

    def __init__(
        self,
        run: RunFunction,
        subscription: EventSubscription,
        input: AgentInput,
        run_options: RunOptionKeywords,
    ) -> None:
        self._run = run
        self._input = input
        self._options: RunOptionKeywords = {**run_options}
        self._sub = subscription
        self._controller = AbortController()
        self._task: asyncio.Task[RunResult] | None = None
        self._run_id: str | None = None
        self._result: RunResult | None = None
        self._finished = False

    @property
    def result(self) -> RunResult | None:
        """The run's result once it returned one (succeeded/suspended), else ``None``."""
        return self._result

    def _start(self) -> asyncio.Task[RunResult]:
        task = self._task
        if task is None:
            options = self._options
            external = options.get("signal")
            signal = self._controller.signal
            if external is not None:
                signal = AbortSignal.any(external, signal)
            options["signal"] = signal
            task = asyncio.get_running_loop().create_task(self._run(self._input, **options))
            sub = self._sub
            task.add_done_callback(lambda _t: sub.close())
            self._task = task
        return task

    def __aiter__(self) -> AsyncIterator[AgentEvent]:
        return self

    async def __anext__(self) -> AgentEvent:
        task = self._start()
        sub = self._sub
        while True:
            try:
                event = await sub.__anext__()
            except StopAsyncIteration:
                await self._finish(task)
                raise
            run_id = self._run_id
            if run_id is None:
                if type(event) is AgentStartedEvent:
                    self._run_id = event.run_id
                return event
            if getattr(event, "run_id", None) == run_id:
                return event

    async def _finish(self, task: asyncio.Task[RunResult]) -> None:
        if self._finished:
            return
        self._finished = True
        self._result = await task

    async def aclose(self) -> None:
        """Stop consuming: abort the run if still running and wait for it."""
        task = self._task
        self._finished = True
        await self._sub.aclose()
        if task is None:
            return
        if not task.done():
            self._controller.abort(AbortError("stream consumer closed"))
        try:
            result = await task
        except Exception:
            return
        self._result = result

    async def __aenter__(self) -> RunStream:
        self._start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def __del__(self) -> None:
        task = self._task
        if task is None:
            return
        if task.done():
            _retrieve_exception(task)
        else:
            self._controller.abort(AbortError("stream consumer closed"))
            # the aborted run's exception is suppressed — retrieved when it ends, so
            # asyncio does not log "Task exception was never retrieved"
            task.add_done_callback(_retrieve_exception)


def _retrieve_exception(task: asyncio.Task[Any]) -> None:
    """Mark a finished task's exception as retrieved (suppressed, not logged)."""
    if not task.cancelled():
        task.exception()
