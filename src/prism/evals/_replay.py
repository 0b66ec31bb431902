"""Replay: an agent runs against the recording of a run instead of its model and tools.

[`replay_agent()`][prism.evals._replay.replay_agent] turns an agent into its replaying twin over a [`ReplaySession`][prism.evals._replay.ReplaySession] (one
per replayed run): the same configuration, with

* a [`ReplayProvider`][prism.evals._replay.ReplayProvider] as its provider, with the recorded provider's id and the original
  provider's defaults (each link of a fallback chain gets one, with the link's id, and an
  attempt is served only by the link that served it). Each request is matched with the
  next recorded attempt: by the canonical request hash ([`prism.request_hash`][prism.request_hash]), or by the
  conversation alone for a cassette captured without request rows. A match streams the recorded
  events back as they came — deltas, tool calls, the recorded usage and stop reason — or the
  recorded error of a failed attempt (a retry or a fallback then follows, as it did). The first
  mismatch stops the replay: the request is answered with a ``replay_mismatch`` error, and the
  session keeps one sentence naming the first differing field ([`prism.evals._diff`][prism.evals._diff]);
* each tool answered from the recording (``tools="recorded"``: the call's arguments must equal
  the recorded ones, and the recorded result is served) or run for real and checked
  (``tools="real"``: the result must equal the recorded one outside the cassette's ignore
  paths, and the recorded result is what the model reads, so the conversation stays the
  recorded one);
* each agent tool run as a replaying child agent over the cassette recorded for that call
  (``cassette.children[call_id]``); each handoff target replaying too.

[`no_network()`][prism.evals._replay.no_network] is the socket guard of replay mode: while it is active, a ``connect`` of any
socket that is not ``AF_UNIX`` raises [`NetworkRefusedError`][prism.evals._replay.NetworkRefusedError].
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Final

from prism._util import maybe_await
from prism.errors import PrismConfigError
from prism.evals._cassette import Cassette, RecordedAttempt
from prism.evals._diff import arguments_diff, head_diff, messages_diff, result_diff
from prism.evals._model import EvalScore
from prism.providers.chain import FallbackModel, FallbackProvider
from prism.providers.defaults import NO_DEFAULTS, ProviderDefaults, provider_defaults
from prism.request_hash import (
    REQUEST_HASH_VERSION,
    fingerprint_request,
    leading_system_count,
    message_json,
)
from prism.retry import is_transient_error
from prism.runtime import Agent
from prism.runtime.agents.agent_tool import DEFAULT_AGENT_TOOL_INPUT
from prism.runtime.durable import PendingDecision
from prism.runtime.run._delegation import child_agent
from prism.tools import ToolRegistry
from prism.types import (
    ErrorInfo,
    JsonValue,
    ProviderErrorEvent,
    ProviderEvent,
    ProviderRequest,
    RunResult,
    ToolDefinition,
    ToolExecutionContext,
    ToolResult,
)

__all__ = [
    "REPLAY_MISMATCH",
    "cassette_of",
    "NetworkRefusedError",
    "ReplayProvider",
    "ReplaySession",
    "no_network",
    "replay_agent",
]

REPLAY_MISMATCH: Final = "replay_mismatch"
"""``ErrorInfo.code`` of a request a replay could not match with its recording."""


class ReplaySession:
    """The state of one replayed run: its cassette, the next recorded attempt, the calls served,
    and the first mismatch (shared with the replays of its child runs).

    Args:
        cassette: The recording.
        parent: The session of the calling run, for a child run of an agent tool.
        label: How the run is named in mismatch messages (``"child run of call c1: "``).
    """

    __slots__ = ("_conversation", "_root", "cassette", "label", "mismatch", "next", "served")

    def __init__(
        self, cassette: Cassette, *, parent: ReplaySession | None = None, label: str = ""
    ) -> None:
        self.cassette = cassette
        self._root: ReplaySession = self if parent is None else parent._root
        self.label = label
        self.next = 0
        """Index of the next recorded attempt."""
        self.served = 0
        """Attempts served."""
        self.mismatch: str | None = None
        """The first mismatch (on the root session: the replayed run's or a child's)."""
        transcript = cassette.transcript
        skip = 0
        for message in transcript:
            if message.get("role") != "system":
                break
            skip += 1
        self._conversation = transcript[skip:]

    @property
    def failed(self) -> str | None:
        """The first mismatch of the run or of one of its child runs, else ``None``."""
        return self._root.mismatch

    def fail(self, reason: str) -> None:
        """Record a mismatch (only the first one is kept)."""
        root = self._root
        if root.mismatch is None:
            root.mismatch = f"{self.label}{reason}"

    def take(self, request: ProviderRequest, provider_id: str) -> RecordedAttempt | str:
        """The recorded attempt that answers ``request`` (and move on), or the mismatch."""
        if self.failed is not None:
            return "the replay stopped at an earlier mismatch"
        attempts = self.cassette.attempts
        if self.next >= len(attempts):
            turns = self.cassette.turns
            reason = (
                f"the run asked the model once more than recorded: the recording ends after "
                f"{turns} provider turn{'s' if turns != 1 else ''}"
            )
            self.fail(reason)
            return reason
        recorded = attempts[self.next]
        found = self._compare(recorded, request, provider_id)
        if found is not None:
            found = f"turn {recorded.turn}: {found}"
            self.fail(found)
            return found
        self.next += 1
        self.served += 1
        return recorded

    def _compare(
        self, recorded: RecordedAttempt, request: ProviderRequest, provider_id: str
    ) -> str | None:
        if recorded.provider_id and provider_id and recorded.provider_id != provider_id:
            return (
                f"the recorded attempt was served by provider `{recorded.provider_id}`, "
                f"this request went to `{provider_id}`"
            )
        messages = request.messages
        skip = leading_system_count(messages)
        if recorded.request_hash is None:  # messages only
            current = [message_json(m) for m in messages[skip:]]
            count = recorded.messages if recorded.messages is not None else len(current)
            return messages_diff(self._conversation[:count], current)
        fingerprint = fingerprint_request(request)
        if fingerprint.request_hash == recorded.request_hash:
            return None
        if fingerprint.head_hash != recorded.head_hash:
            head = self.cassette.heads.get(recorded.head_hash or "")
            if head is None:
                return "the request's head (system prompt, tools, options) changed"
            return head_diff(head, fingerprint.head) or (
                "the request's head changed in a part the recording does not show"
            )
        current = [message_json(m) for m in messages[skip:]]
        count = recorded.messages if recorded.messages is not None else len(current)
        return messages_diff(self._conversation[:count], current) or (
            "the request's messages differ from the recorded ones in a part the recording "
            "does not keep (a message the provider_request hook changed?)"
        )

    def resumption(self, pending: Sequence[PendingDecision]) -> dict[str, Any] | None:
        """How to resume a run that suspended on ``pending`` (its ``PendingDecision`` values)
        as the recorded run was: ``resume_agent_run`` keyword arguments (``decision=`` or
        ``decisions=``), or ``None`` when the recording has no decision for one of them (the
        recorded run ended waiting)."""
        recorded = {a.get("tool_call_id"): a for a in self.cassette.approvals}
        decisions: list[dict[str, Any]] = []
        for item in pending:
            found = recorded.get(item.tool_call_id)
            outcome = None if found is None else found.get("outcome")
            if outcome is None or outcome == "pending":
                return None
            if outcome in ("deny", "approve"):
                return {"decision": outcome}
            decision: dict[str, Any] = {"approval_id": item.approval_id, "outcome": outcome}
            for key in ("reason", "modified_arguments"):
                if found is not None and found.get(key) is not None:
                    decision[key] = found[key]
            decisions.append(decision)
        return {"decisions": decisions} if decisions else None

    def verdict(self, result: RunResult | None = None) -> EvalScore:
        """The ``"replay"`` score of the run: a fail naming the first mismatch, a fail when the
        run asked the model fewer times than recorded, else a pass."""
        failed = self.failed
        if failed is not None:
            return EvalScore.check("replay", False, failed)
        left = len(self.cassette.attempts) - self.next
        if left and (result is None or result.status != "suspended"):
            turns = self.cassette.turns
            return EvalScore.check(
                "replay",
                False,
                f"the run ended after {self.served} of the {len(self.cassette.attempts)} "
                f"recorded provider attempts ({turns} turns)",
            )
        return EvalScore.check(
            "replay", True, f"the run matched its recording ({self.served} provider attempts)"
        )


def _mismatch_error(reason: str) -> ErrorInfo:
    info = ErrorInfo(
        name="ReplayMismatch",
        code=REPLAY_MISMATCH,
        message=f"the request does not match the recording: {reason}",
    )
    if is_transient_error(info):  # never retried: the same request cannot match later
        info = dataclasses.replace(
            info, message="the request does not match the recording (see the replay score)"
        )
    return info


class ReplayProvider:
    """A provider that serves the recorded attempts of a [`ReplaySession`][prism.evals._replay.ReplaySession].

    Args:
        session: The replayed run.
        id: The provider id (the recorded provider's).
        defaults: The original provider's defaults (its tool-round policy shapes the requests).
    """

    __slots__ = ("defaults", "id", "session")

    def __init__(
        self, session: ReplaySession, *, id: str, defaults: ProviderDefaults = NO_DEFAULTS
    ) -> None:
        self.session = session
        self.id = id
        self.defaults = defaults

    def generate(self, request: ProviderRequest) -> AsyncIterator[ProviderEvent]:
        """Match ``request`` (when called) and stream the recorded attempt's events, or a
        ``replay_mismatch`` error event."""
        outcome = self.session.take(request, self.id)
        if isinstance(outcome, str):
            return _events((ProviderErrorEvent(error=_mismatch_error(outcome)),), request)
        return _events(outcome.events, request)


async def _events(
    events: tuple[ProviderEvent, ...], request: ProviderRequest
) -> AsyncIterator[ProviderEvent]:
    signal = request.signal
    for event in events:
        if signal is not None and signal.aborted:
            signal.throw_if_aborted()
        yield event


# --------------------------------------------------------------------------- tools


def _tool_error(call_id: str, name: str, reason: str) -> ToolResult:
    return ToolResult(
        tool_call_id=call_id,
        name=name,
        error=ErrorInfo(name="ReplayMismatch", code=REPLAY_MISMATCH, message=reason),
    )


def _replay_tool(
    tool: ToolDefinition, session: ReplaySession, memo: dict[int, Agent]
) -> ToolDefinition:
    name = tool.name
    cassette = session.cassette
    child = child_agent(tool)

    async def execute(arguments: dict[str, Any], context: ToolExecutionContext) -> Any:
        call_id = context.tool_call_id
        recorded = cassette.calls.get(call_id)
        if recorded is None:
            reason = f"tool `{name}` (call {call_id}) ran; in the recording it did not run"
            session.fail(reason)
            return _tool_error(call_id, name, reason)
        if recorded.name != name:
            reason = f"call {call_id} ran tool `{name}`; the recording ran `{recorded.name}`"
            session.fail(reason)
            return _tool_error(call_id, name, reason)
        diff = arguments_diff(name, call_id, recorded.arguments, arguments)
        if diff is not None:
            session.fail(diff)
            return _tool_error(call_id, name, diff)
        recorded_child = cassette.children.get(call_id)
        if child is not None and recorded_child is not None:
            sub = ReplaySession(
                recorded_child, parent=session, label=f"child run of call {call_id}: "
            )
            twin = replay_agent(child, sub, _memo=memo)
            plain = tool.parameters == DEFAULT_AGENT_TOOL_INPUT
            runner = twin.as_tool(
                name=name,
                description=tool.description,
                input=None if plain else tool.parameters,
            )
            result = await runner.execute(arguments, context)
            verdict = sub.verdict()
            if not verdict.passed:
                session.fail(verdict.reason)
            return result
        if cassette.tools == "real":
            real = await maybe_await(tool.execute(arguments, context))
            value: JsonValue = real.value if isinstance(real, ToolResult) else real
            expected = recorded.result.value
            diff = result_diff(name, call_id, expected, value, cassette.ignore_paths.get(name, ()))
            if diff is not None:
                session.fail(diff)
                return _tool_error(call_id, name, diff)
        return recorded.result

    return dataclasses.replace(tool, execute=execute)


# --------------------------------------------------------------------------- agents


def _provider(original: Any, session: ReplaySession) -> Any:
    first = session.cassette.attempts[0].provider_id if session.cassette.attempts else ""
    if isinstance(original, FallbackProvider):
        primary = ReplayProvider(
            session, id=str(original.id or first), defaults=provider_defaults(original.primary)
        )
        links = tuple(
            FallbackModel(
                provider=ReplayProvider(
                    session,
                    id=str(getattr(link.provider, "id", "") or ""),
                    defaults=provider_defaults(link.provider),
                ),
                model=link.model,
            )
            for link in original.fallbacks
        )
        return FallbackProvider(primary, links, original.policy)
    # the agent's provider when it served attempts (a handoff's agents each have theirs), else
    # the recorded one (a test double standing in for the recorded provider)
    own = str(getattr(original, "id", "") or "")
    recorded = {a.provider_id for a in session.cassette.attempts}
    provider_id = own if own in recorded or not first else first
    return ReplayProvider(session, id=provider_id, defaults=provider_defaults(original))


def replay_agent(
    agent: Agent, session: ReplaySession, *, _memo: dict[int, Agent] | None = None
) -> Agent:
    """The replaying twin of ``agent`` over ``session`` (see the module docstring): the same
    configuration with a [`ReplayProvider`][prism.evals._replay.ReplayProvider], replaying tools, replaying agent tools and
    handoff targets.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — ``agent`` is not an ``Agent``.
    """
    if not isinstance(agent, Agent):
        raise PrismConfigError(f"replay_agent: expected an Agent, got {type(agent).__name__}")
    memo = {} if _memo is None else _memo
    known = memo.get(id(agent))
    if known is not None:
        return known
    config = agent.config
    tools = ToolRegistry([_replay_tool(t, session, memo) for t in config.tools.list()])
    twin = Agent(
        dataclasses.replace(config, provider=_provider(config.provider, session), tools=tools)
    )
    memo[id(agent)] = twin
    loop = config.loop
    needs = getattr(loop, "needs", None)
    targets = getattr(needs, "handoffs", None)
    if targets:
        from prism.loops.handoff import handoff_loop

        replayed = [
            replay_agent(t, session, _memo=memo) if isinstance(t, Agent) else t for t in targets
        ]
        rebuilt = handoff_loop(*replayed, tool_concurrency=getattr(loop, "tool_concurrency", 1))
        twin.config = dataclasses.replace(twin.config, loop=rebuilt)
    return twin


# --------------------------------------------------------------------------- the socket guard


class NetworkRefusedError(ConnectionRefusedError):
    """A network connection refused by [`no_network()`][prism.evals._replay.no_network] (replay mode makes none)."""


_GUARD_LOCK: Final = threading.Lock()
_guard_depth = 0
_saved: dict[str, Any] = {}
_CONNECT: Final = socket.socket.connect
_CONNECT_EX: Final = socket.socket.connect_ex


def _refuse(sock: socket.socket, address: object) -> None:
    family = getattr(sock, "family", None)
    if family != getattr(socket, "AF_UNIX", object()):
        raise NetworkRefusedError(
            f"network connect to {address!r} refused: a replay makes no network calls"
        )


def _guarded_connect(self: socket.socket, address: Any) -> None:
    _refuse(self, address)
    _CONNECT(self, address)


def _guarded_connect_ex(self: socket.socket, address: Any) -> int:
    _refuse(self, address)
    result: int = _CONNECT_EX(self, address)
    return result


@contextlib.contextmanager
def no_network() -> Iterator[None]:
    """Refuse every ``connect``/``connect_ex`` of a socket that is not ``AF_UNIX`` while inside
    (process-wide, every thread; nests). Asyncio's connections go through them too.

    Raises:
        NetworkRefusedError: inside, from the refused ``connect`` (a ``ConnectionRefusedError``).
    """
    global _guard_depth
    with _GUARD_LOCK:
        if _guard_depth == 0:
            for name, guarded in (
                ("connect", _guarded_connect),
                ("connect_ex", _guarded_connect_ex),
            ):
                _saved[name] = getattr(socket.socket, name)
                _saved[f"own_{name}"] = name in vars(socket.socket)
                setattr(socket.socket, name, guarded)
        _guard_depth += 1
    try:
        yield
    finally:
        with _GUARD_LOCK:
            _guard_depth -= 1
            if _guard_depth == 0:
                for name in ("connect", "connect_ex"):
                    original = _saved.pop(name)
                    if _saved.pop(f"own_{name}"):
                        setattr(socket.socket, name, original)
                    else:
                        delattr(socket.socket, name)


def cassette_of(value: Mapping[str, Any] | None, label: str) -> Cassette:
    """The [`Cassette`][prism.evals._replay.Cassette] of a case's ``cassette`` mapping.

    Raises:
        PrismConfigError: ``ERR_PRISM_CONFIG`` — no cassette, not a valid one, or request hashes
            of another version of ``prism.request_hash`` than this one's.
    """
    if value is None:
        raise PrismConfigError(
            f"{label} has no cassette to replay: capture it from a stored run "
            "(prism eval capture RUN_ID --into DATASET)"
        )
    cassette = Cassette.from_json(value, f" of {label}")
    if cassette.matching == "requests" and cassette.hash_version != REQUEST_HASH_VERSION:
        raise PrismConfigError(
            f"the cassette of {label} holds request hashes of version {cassette.hash_version}; "
            f"this prism hashes requests with version {REQUEST_HASH_VERSION}: capture it again"
        )
    return cassette
