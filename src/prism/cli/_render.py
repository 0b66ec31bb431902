"""Output of ``prism run``: JSON lines, plain text, or a live terminal view (``rich``).

* [`JsonRenderer`][prism.cli._render.JsonRenderer] — one ``event.to_dict()`` JSON object per line on stdout, then one
  ``{"type": "run_result", …}`` summary line ([`Renderer.result()`][prism.cli._render.Renderer.result]).
* [`PlainRenderer`][prism.cli._render.PlainRenderer] — for pipes and files: the assistant text streams to stdout; tool calls,
  results, validation notes and the usage summary go to stderr, one line each, so stdout holds only
  the answer. No terminal control codes.
* [`LiveRenderer`][prism.cli._render.LiveRenderer] — for terminals (extra ``prism-runtime[cli]``): the text streams as it
  arrives, tool calls and results are printed as they happen, a status line at the bottom shows the
  turn, tokens so far and elapsed time, and a usage summary closes the run.

Every renderer receives already-redacted events (the agent's secret redactor); text that
the command builds itself from exceptions is redacted by the caller.

Renderers write through [`PipeGuard`][prism.cli._render.PipeGuard] streams: when the reader of a pipe goes away
(``prism run … | head -1``) the first failed write marks the stream broken, tells the command
(which aborts the run) and every later write is dropped — no exception reaches the runtime's
``on_event`` handling.

The footer counts *completed* provider turns (``turn_finished`` events) over every leg the command
showed, and the status line numbers turns on across legs (a resumed leg after an approval starts
its own ``turn_started{1}``).
"""

from __future__ import annotations

import errno
import json
import time
from collections.abc import Callable
from typing import IO, Any, Protocol

from prism.types import TextContent, ToolCallContent, Usage

__all__ = [
    "JsonRenderer",
    "LiveRenderer",
    "PipeGuard",
    "PlainRenderer",
    "Renderer",
    "RunStats",
    "guard",
    "summarize",
]


def _is_closed_pipe(exc: BaseException) -> bool:
    if isinstance(exc, BrokenPipeError):
        return True
    return isinstance(exc, OSError) and exc.errno in (errno.EPIPE, errno.EINVAL)


class PipeGuard:
    """A text stream whose reader may go away (``prism … | head -1``).

    Forwards ``write``/``flush`` to ``stream``; the first ``BrokenPipeError`` (``EPIPE``; also
    ``EINVAL``, which Windows reports for a closed pipe) marks the guard [`broken`][prism.cli._render.PipeGuard.broken], calls the
    listeners registered with [`on_broken()`][prism.cli._render.PipeGuard.on_broken] once, and turns every later write into a no-op.
    Other attributes (``isatty``, ``fileno``, ``encoding``) are the stream's.

    Args:
        stream: The wrapped stream; ``None`` (a closed standard stream) discards everything.
    """

    def __init__(self, stream: IO[str] | None) -> None:
        self.stream = stream
        self.broken = False
        self._listeners: list[Callable[[], object]] = []

    def on_broken(self, listener: Callable[[], object]) -> None:
        """Call ``listener()`` when the stream breaks (at once when it already is broken)."""
        if self.broken:
            listener()
        else:
            self._listeners.append(listener)

    def _break(self) -> None:
        if self.broken:
            return
        self.broken = True
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener()

    def write(self, text: str) -> int:
        """Write ``text``; a closed pipe breaks the guard instead of raising."""
        stream = self.stream
        if self.broken or stream is None:
            return len(text)
        try:
            return stream.write(text)
        except (OSError, ValueError) as exc:
            if isinstance(exc, ValueError) or _is_closed_pipe(exc):  # ValueError: closed file
                self._break()
                return len(text)
            raise

    def flush(self) -> None:
        """Flush the stream; a closed pipe breaks the guard instead of raising."""
        stream = self.stream
        if self.broken or stream is None:
            return
        try:
            stream.flush()
        except (OSError, ValueError) as exc:
            if isinstance(exc, ValueError) or _is_closed_pipe(exc):
                self._break()
                return
            raise

    def isatty(self) -> bool:
        """Whether the stream is a terminal (``False`` when it has no ``isatty``)."""
        isatty = getattr(self.stream, "isatty", None)
        try:
            return bool(isatty and isatty())
        except (OSError, ValueError):
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


def guard(stream: IO[str] | PipeGuard | None) -> PipeGuard:
    """``stream`` itself when it is a [`PipeGuard`][prism.cli._render.PipeGuard], else a new guard around it."""
    return stream if isinstance(stream, PipeGuard) else PipeGuard(stream)


_PREVIEW_CHARS = 200


def _preview(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= _PREVIEW_CHARS else text[: _PREVIEW_CHARS - 1] + "…"


def _call_text(call: ToolCallContent) -> str:
    return f"{call.name}({_preview(call.arguments)})"


class RunStats:
    """Counters shown in the status line and the final summary, over every leg shown."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.started = clock()
        self.turn = 0
        """The turn being worked on, numbered on across legs (status line)."""
        self.turns = 0
        """Completed provider turns (``turn_finished`` events) of every leg (summary)."""
        self._offset = 0
        self.tokens = 0
        self.streamed = 0
        self.tool_calls = 0
        self.usage: Usage | None = None

    @property
    def elapsed_s(self) -> float:
        """Seconds since the run started."""
        return self._clock() - self.started

    def observe(self, event: Any) -> None:
        """Update the counters from one event."""
        kind = event.type
        if kind == "turn_started":
            self.turn = self._offset + event.turn
        elif kind == "turn_finished":
            self.turns += 1
        elif kind == "message_delta":
            self.streamed += 1
        elif kind == "provider_turn_finished":
            if event.usage is not None:
                self.tokens += _total(event.usage)
            else:
                self.tokens += self.streamed
            self.streamed = 0
        elif kind == "tool_execution_started":
            self.tool_calls += 1
        elif kind == "agent_started":
            # a new leg numbers its turns from 1 again: continue after the completed ones
            self._offset = self.turns
        elif kind == "agent_finished":
            self.usage = event.usage

    def status(self) -> str:
        """``turn 2 · 864 tokens · 3.4 s``.

        Tokens are the reported usage of finished provider turns plus one per fragment streamed
        in the current turn (a turn without reported usage keeps its fragment count).
        """
        tokens = self.tokens + self.streamed
        return f"turn {max(self.turn, 1)} · {tokens} tokens · {self.elapsed_s:.1f} s"


def _total(usage: Usage) -> int:
    if usage.total_tokens is not None:
        return usage.total_tokens
    return (usage.input_tokens or 0) + (usage.output_tokens or 0)


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'' if count == 1 else 's'}"


def summarize(stats: RunStats, usage: Usage | None) -> str:
    """Final usage line, e.g. ``usage: 838 in + 26 out = 864 tokens · 2 turns · 1 tool call · 3.4 s``.

    Args:
        stats: The run's counters (``turns``: completed provider turns).
        usage: The run total over every leg shown; ``None`` when the provider reported none.
    """
    parts = [_plural(stats.turns, "turn")]
    if stats.tool_calls:
        parts.append(_plural(stats.tool_calls, "tool call"))
    parts.append(f"{stats.elapsed_s:.1f} s")
    if usage is None:
        head = "usage: not reported by the provider"
    else:
        head = (
            f"usage: {usage.input_tokens or 0} in + {usage.output_tokens or 0} out"
            f" = {_total(usage)} tokens"
        )
        if usage.cost is not None:
            head += f" · {usage.cost:.6g} {usage.currency or ''}".rstrip()
    return " · ".join([head, *parts])


class Renderer(Protocol):
    """What ``prism run`` drives: events in order, then the outcome."""

    stats: RunStats

    def __enter__(self) -> Renderer: ...

    def __exit__(self, *exc: object) -> None: ...

    def event(self, event: Any) -> None:
        """Show one (redacted) agent event."""
        ...

    def succeeded(self, usage: Usage | None, artifact: Any = None) -> None:
        """The run succeeded; ``usage`` is the total of every leg shown; ``artifact`` is the
        accepted artifact of a gvr run, else ``None``."""
        ...

    def failed(self, message: str, usage: Usage | None = None) -> None:
        """The run failed or was aborted; ``message`` is already redacted; ``usage`` is the
        total of every leg shown."""
        ...

    def result(self, summary: dict[str, Any]) -> None:
        """The run's outcome as data (``{"type": "run_result", …}``); only ``--json`` prints
        it."""
        ...

    def notice(self, text: str) -> None:
        """Show one line about the run (session id, how to resume it); never on stdout's
        answer or event stream."""
        ...

    def pause(self) -> None:
        """Stop drawing (a question is about to be asked on the terminal)."""
        ...

    def unpause(self) -> None:
        """Draw again after [`pause()`][prism.cli._render.Renderer.pause]."""
        ...


# --------------------------------------------------------------------------- JSON lines


class JsonRenderer:
    """``--json``: every event as one JSON line (``event.to_dict()``) on ``out``."""

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        self._out = out
        self._err = err
        self.stats = RunStats()

    def __enter__(self) -> JsonRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._out.flush()

    def event(self, event: Any) -> None:
        self.stats.observe(event)
        self._out.write(json.dumps(event.to_dict(), ensure_ascii=False) + "\n")
        self._out.flush()

    def succeeded(self, usage: Usage | None, artifact: Any = None) -> None:
        pass

    def failed(self, message: str, usage: Usage | None = None) -> None:
        # the run's terminal `error` event is already on stdout; keep a human line on stderr
        self._err.write(f"prism: {message}\n")
        self._err.flush()

    def result(self, summary: dict[str, Any]) -> None:
        self._out.write(json.dumps(summary, ensure_ascii=False) + "\n")
        self._out.flush()

    def notice(self, text: str) -> None:
        self._err.write(f"prism: {text}\n")
        self._err.flush()

    def pause(self) -> None:
        self._out.flush()

    def unpause(self) -> None:
        pass


# --------------------------------------------------------------------------- shared text logic


class _TextRenderer:
    """Turns events into the assistant text stream and one-line notes."""

    def __init__(self) -> None:
        self.stats = RunStats()
        self._in_text = False

    # subclasses implement these two
    def _text(self, text: str) -> None:
        raise NotImplementedError

    def _note(self, text: str, style: str = "") -> None:
        raise NotImplementedError

    def _end_text(self) -> None:
        if self._in_text:
            self._in_text = False
            self._text("\n")

    def event(self, event: Any) -> None:
        self.stats.observe(event)
        kind = event.type
        if kind == "message_delta":
            content = event.content
            if isinstance(content, TextContent) and content.text:
                self._in_text = True
                self._text(content.text)
        elif kind == "message_finished":
            self._end_text()
        elif kind == "tool_execution_started":
            self._end_text()
            self._note(f"⚙ {_call_text(event.call)}", "cyan")
        elif kind == "tool_execution_finished":
            result = event.result
            if result.error is not None:
                self._note(f"✗ {result.name}: {result.error.message}", "red")
            else:
                shown = result.value if result.value is not None else "(no output)"
                self._note(f"→ {result.name}: {_preview(shown)}", "green")
        elif kind == "tool_execution_error":
            self._note(f"✗ {event.call.name}: {event.error.message}", "red")
        elif kind == "tool_execution_blocked":
            self._note(f"⊘ {event.name} blocked ({event.reason}): {event.error.message}", "yellow")
        elif kind == "retry_scheduled":
            self._end_text()
            self._note(
                f"↻ retrying in {event.delay_ms / 1000:.1f} s after: {event.error.message}",
                "yellow",
            )
        elif kind == "artifact_validation_finished":
            self._end_text()
            if event.result.ok:
                self._note(f"✓ attempt {event.attempt}: valid", "green")
            else:
                errors = (
                    "; ".join(f"{e.path or '/'}: {e.message}" for e in event.result.errors)
                    or "invalid"
                )
                self._note(f"✗ attempt {event.attempt}: {_preview(errors)}", "yellow")
        elif kind == "artifact_revision_started":
            self._note(f"↻ asking for revision {event.attempt}", "yellow")
        elif kind == "run_limit_exceeded":
            self._end_text()
            breach = event.breach
            self._note(
                f"limit {breach.limit} exceeded ({breach.observed} > {breach.maximum})", "red"
            )

    def succeeded(self, usage: Usage | None, artifact: Any = None) -> None:
        self._end_text()
        if artifact is not None:
            self._note("artifact: " + json.dumps(artifact, ensure_ascii=False), "bold")
        self._note(summarize(self.stats, usage), "dim")

    def failed(self, message: str, usage: Usage | None = None) -> None:
        self._end_text()
        self._note(f"error: {message}", "bold red")
        self._note(summarize(self.stats, usage), "dim")

    def result(self, summary: dict[str, Any]) -> None:
        pass

    def notice(self, text: str) -> None:
        self._end_text()
        self._note(text, "yellow")

    def pause(self) -> None:
        self._end_text()

    def unpause(self) -> None:
        pass


# --------------------------------------------------------------------------- plain


class PlainRenderer(_TextRenderer):
    """Pipes and files: text to ``out`` as it arrives; notes and summary to ``err``."""

    def __init__(self, out: IO[str], err: IO[str]) -> None:
        super().__init__()
        self._out = out
        self._err = err

    def __enter__(self) -> PlainRenderer:
        return self

    def __exit__(self, *exc: object) -> None:
        self._end_text()
        self._out.flush()
        self._err.flush()

    def _text(self, text: str) -> None:
        self._out.write(text)
        self._out.flush()

    def _note(self, text: str, style: str = "") -> None:
        self._err.write(text + "\n")
        self._err.flush()


# --------------------------------------------------------------------------- live terminal


def _import_rich() -> Any:
    try:
        import rich.console
        import rich.live
        import rich.text
    except ImportError as exc:
        raise ImportError(
            "the prism command's terminal view needs rich: pip install 'prism-runtime[cli]'"
        ) from exc
    return rich


class LiveRenderer(_TextRenderer):
    """Terminals: streamed text, tool lines, a live status line and a usage summary (``rich``).

    Complete lines of assistant text are printed above the live region; the line being written
    stays in the region with the status line below it, so partial text shows as it arrives.

    Args:
        console: The ``rich`` console to draw on (default: a new one on ``file``).
        file: The stream of the default console (default ``sys.stdout``).
        refresh_per_second: Status line redraws per second.

    Raises:
        ImportError: ``rich`` is not installed (the message names ``prism-runtime[cli]``).
    """

    def __init__(
        self, console: Any = None, *, file: Any = None, refresh_per_second: float = 8.0
    ) -> None:
        super().__init__()
        rich = _import_rich()
        self._rich = rich
        if console is None:
            console = rich.console.Console(file=file, highlight=False)
        self._console = console
        self._pending = ""
        self._live = rich.live.Live(
            get_renderable=self._renderable,
            console=self._console,
            refresh_per_second=refresh_per_second,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=False,
        )

    def __enter__(self) -> LiveRenderer:
        self._live.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._flush_pending()
        self._live.stop()

    def pause(self) -> None:
        self._end_text()
        self._flush_pending()
        self._live.stop()

    def unpause(self) -> None:
        self._live.start()

    def _renderable(self) -> Any:
        text = self._rich.text
        status = text.Text(self.stats.status(), style="dim")
        if self._pending:
            return self._rich.console.Group(text.Text(self._pending), status)
        return status

    def _flush_pending(self) -> None:
        text, self._pending = self._pending, ""
        if text:
            # the live region caches its last render: refresh it without the text, then print
            self._live.refresh()
            self._console.print(self._rich.text.Text(text))

    def _text(self, text: str) -> None:
        pending = self._pending + text
        if "\n" in pending:
            *lines, self._pending = pending.split("\n")
            self._live.refresh()
            for line in lines:
                self._console.print(self._rich.text.Text(line))
        else:
            self._pending = pending
            self._live.refresh()

    def _end_text(self) -> None:
        if self._in_text:
            self._in_text = False
            self._flush_pending()

    def _note(self, text: str, style: str = "") -> None:
        self._console.print(self._rich.text.Text(text, style=style or ""))
        self._live.refresh()
