"""The state of a session that its runs change: the leaf, the busy flag, the steer queue.

[`SessionState`][prism.runtime.run.state.SessionState] is one object per [`AgentSession`][prism.runtime.run.session.AgentSession]. The session
reads it to answer ``leaf_id``/``is_running`` and fills the steer queue; a run leg is handed the
same object and is the only thing that changes it while the leg runs (it moves the leaf with
every append, marks itself active and inactive, drains the steer queue). Durable resume and
denial change it through the same methods. Nothing else reaches into the session.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Protocol

from prism.checkpoints import SessionAppend
from prism.events import AgentEvent
from prism.redaction import SecretRedactor, redact_agent_event
from prism.runtime.run._branch_cache import MIN_ENTRIES, BranchCache
from prism.runtime.run._kept_branches import KeptBranches
from prism.runtime.run._observers import OnEvent, SessionObservers
from prism.store import SessionEntry, SessionStore, read_branch, walk_branch
from prism.types import Message, TextContent

__all__ = ["MAX_STEER_BYTES", "MAX_STEER_MESSAGES", "ActiveRun", "SessionState"]

MAX_STEER_MESSAGES: Final = 8
"""Most pending steered messages."""
MAX_STEER_BYTES: Final = 65_536
"""Most pending steered text, in UTF-8 bytes of text parts."""


class ActiveRun(Protocol):
    """What the session needs of its active run leg: steering and ``abort()`` reach it here."""

    @property
    def run_id(self) -> str:
        """The run id."""
        ...

    @property
    def redactor(self) -> SecretRedactor | None:
        """The run's redactor (steered messages are redacted with it)."""
        ...

    def emit(self, event: AgentEvent, /) -> None:
        """Emit one event of the run."""
        ...

    def abort(self, reason: object) -> None:
        """Abort the run with ``reason``."""
        ...

    def soft_interrupt(self) -> bool:
        """Interrupt the streaming provider attempt; ``False`` when the leg has none yet."""
        ...


def text_bytes(messages: list[Message]) -> int:
    """UTF-8 bytes of the text parts of ``messages`` (the steer-queue size)."""
    total = 0
    for message in messages:
        for part in message.content:
            if type(part) is TextContent:
                total += len(part.text.encode())
    return total


class SessionState:
    """The mutable state a session shares with its run legs.

    Args:
        session_id: The session id.
        store: The session's store.
        metadata: The session metadata.
        leaf_id: Entry the next append attaches to (``None``: look it up on first use).
        on_event: The session's ``on_event`` callback.
        kept: The agent's branches kept between session objects (``None``: none).
    """

    __slots__ = (
        "active",
        "branch",
        "busy",
        "fork_next",
        "held",
        "kept",
        "leaf_id",
        "leaf_resolved",
        "metadata",
        "observers",
        "session_id",
        "soft_pending",
        "steer_bytes",
        "steer_queue",
        "store",
    )

    def __init__(
        self,
        *,
        session_id: str,
        store: SessionStore,
        metadata: Mapping[str, Any],
        leaf_id: str | None,
        on_event: OnEvent | None,
        kept: KeptBranches | None = None,
    ) -> None:
        self.session_id = session_id
        self.store = store
        self.metadata = metadata
        self.observers = SessionObservers(on_event)
        """Subscriptions and ``on_event`` of the session."""
        self.leaf_id: str | None = leaf_id
        """Id of the entry the next append attaches to."""
        self.leaf_resolved = leaf_id is not None
        """Whether [`leaf_id`][prism.runtime.run.state.SessionState.leaf_id] is known (else it is the last stored entry, looked up once)."""
        self.fork_next = leaf_id is not None
        """The next append starts a sibling branch (after ``checkout``)."""
        self.held: list[SessionAppend] | None = None
        """Appends held for the next envelope write of the active durable leg (see
        [`hold_appends()`][prism.runtime.run.state.SessionState.hold_appends]); ``None``: every append goes to the store at once."""
        self.busy = False
        """A run (or a manual compaction) is active."""
        self.active: ActiveRun | None = None
        """The active run leg."""
        self.steer_queue: tuple[Message, ...] = ()
        """Steered messages waiting for the next turn (replaced as a whole when it changes)."""
        self.steer_bytes = 0
        """UTF-8 bytes of text in [`steer_queue`][prism.runtime.run.state.SessionState.steer_queue]."""
        self.soft_pending = False
        """A soft interrupt arrived before the leg had provider attempts."""
        self.branch: BranchCache | None = None
        """The branch this session last read or appended, root → leaf (see
        [`read_branch()`][prism.runtime.run.state.SessionState.read_branch])."""
        self.kept = kept
        """The agent's branches kept between session objects (see
        [`keep_branch()`][prism.runtime.run.state.SessionState.keep_branch])."""

    # ----------------------------------------------------------------- the leaf

    async def ensure_leaf(self) -> None:
        """On first use, continue from the last stored entry of this session id.

        With a branch the agent kept for this session id, the store is asked only for the id of
        that entry (a store with ``last_entry_id``); when it is the kept branch's leaf, the
        session holds that branch without reading it."""
        if self.leaf_resolved:
            return
        store = self.store
        kept = self.kept
        last_entry_id = getattr(store, "last_entry_id", None) if kept is not None else None
        if last_entry_id is not None and kept is not None and kept.holds(store, self.session_id):
            leaf_id = await last_entry_id(self.session_id)
            cache = kept.take(store, self.session_id, leaf_id)
            if cache is not None:
                self.leaf_id = leaf_id
                self.leaf_resolved = True
                self.branch = cache
                return
        entries = await store.list(self.session_id)
        leaf_id = self.leaf_id = entries[-1].id if entries else None
        self.leaf_resolved = True
        try:
            branch = walk_branch(entries, leaf_id) if leaf_id is not None else []
        except ValueError:  # a broken chain: the read reports it
            return
        if len(branch) >= MIN_ENTRIES:
            self.branch = BranchCache(branch)

    async def read_branch(self) -> list[SessionEntry]:
        """The entries of the branch ending at the leaf, root → leaf, as a store read gives
        them (``[]`` for a new conversation); from the store only when the session does not
        hold that branch already (the leaf moved other than by this session's appends).

        Raises:
            ValueError: ``Unknown session leaf: <id>`` / ``Missing session parent: <id>``
                (read from the store).
        """
        cache = await self._held_branch()
        if isinstance(cache, list):
            return cache
        return cache.read()

    async def read_branch_for_run(
        self, redactor: object
    ) -> tuple[list[SessionEntry], dict[int, tuple[Message, Message, int]]]:
        """[`read_branch()`][prism.runtime.run.state.SessionState.read_branch] for a run's history, with the sizes earlier runs measured of
        the messages handed out (by message id; see
        [`BranchCache.read_for_run()`][prism.runtime.run._branch_cache.BranchCache.read_for_run]); ``{}`` when the session holds no branch."""
        cache = await self._held_branch()
        if isinstance(cache, list):
            return cache, {}
        return cache.read_for_run(redactor)

    async def _held_branch(self) -> BranchCache | list[SessionEntry]:
        """The branch the session holds at its leaf, else the store's (then held when it has
        at least ``MIN_ENTRIES`` entries)."""
        if self.held:  # not stored yet: the store's branch is what the reader gets
            return await read_branch(self.store, self.session_id, self.leaf_id)
        cache = self.branch
        if cache is None or cache.leaf_id != self.leaf_id:
            self.branch = None
            branch = await read_branch(self.store, self.session_id, self.leaf_id)
            if len(branch) < MIN_ENTRIES:
                return branch
            cache = self.branch = BranchCache(branch)
        return cache

    def keep_branch(self) -> None:
        """Give the branch this session holds at its leaf to the agent's kept branches, for the
        next session object of this session id (at the end of a run; a no-op without one)."""
        kept = self.kept
        cache = self.branch
        if kept is None or cache is None or self.held or cache.leaf_id != self.leaf_id:
            return
        kept.keep(self.store, self.session_id, cache)

    def move_leaf(self, leaf_id: str | None, *, fork: bool) -> None:
        """Continue from ``leaf_id``; ``fork``: the next append starts a sibling branch."""
        self.leaf_id = leaf_id
        self.leaf_resolved = True
        self.fork_next = fork

    async def append(
        self, entry: SessionEntry, *, idempotency_key: str | None, owned: bool = False
    ) -> None:
        """Append ``entry`` (already redacted, ``parent_id`` = the leaf) and make it the leaf.

        With ``owned`` the caller hands the entry over (nothing else holds its mutable
        containers): a store with ``append_owned`` (the memory store) keeps it without copying.
        While appends are held ([`hold_appends()`][prism.runtime.run.state.SessionState.hold_appends]) the append is recorded instead, to be
        written with the leg's next envelope."""
        parent = self.leaf_id
        fork = self.fork_next and parent is not None
        held = self.held
        if held is not None:
            held.append(SessionAppend(entry, parent, idempotency_key, fork))
        else:
            store = self.store
            append = getattr(store, "append_owned", None) if owned else None
            await (append if append is not None else store.append)(
                entry, expected_parent_id=parent, idempotency_key=idempotency_key, fork=fork
            )
        self.fork_next = False
        self.leaf_id = entry.id
        cache = self.branch
        if cache is not None:
            if cache.leaf_id == parent:
                cache.add(entry, owned)
            else:
                self.branch = None

    def hold_appends(self) -> list[SessionAppend]:
        """Hold the appends from now on (a durable ``every-turn`` leg whose store writes
        entries and envelope together); returns the list they are recorded in, which the
        leg's envelope writes empty."""
        held = self.held
        if held is None:
            held = self.held = []
        return held

    def release_appends(self) -> None:
        """Stop holding appends. Held appends no envelope write took are forgotten, and the
        leaf goes back to where the first of them attached (the last stored entry)."""
        held = self.held
        self.held = None
        if held:
            first = held[0]
            self.leaf_id = first.expected_parent_id
            self.fork_next = first.fork

    # ----------------------------------------------------------------- runs

    def begin(self, leg: ActiveRun | None) -> None:
        """Mark the session busy with ``leg`` (``None``: a manual compaction) and start with an
        empty steer queue."""
        self.busy = True
        self.active = leg
        self.clear_steers()
        self.soft_pending = False

    def finish(self, leg: ActiveRun | None) -> None:
        """The end of ``leg`` (or of a manual compaction): the session is free again."""
        if self.active is leg:
            self.active = None
            self.busy = False
            self.clear_steers()
            self.soft_pending = False

    # ----------------------------------------------------------------- steering

    def queue_steers(self, messages: list[Message]) -> bool:
        """Append ``messages`` to the steer queue unless that exceeds 8 messages or 65 536
        bytes of text (then nothing is queued and ``False`` is returned)."""
        queue = self.steer_queue
        size = text_bytes(messages)
        if (
            len(queue) + len(messages) > MAX_STEER_MESSAGES
            or self.steer_bytes + size > MAX_STEER_BYTES
        ):
            return False
        self.steer_queue = (*queue, *messages)
        self.steer_bytes += size
        return True

    def take_steers(self) -> list[Message]:
        """Remove and return the queued steered messages."""
        messages = list(self.steer_queue)
        self.clear_steers()
        return messages

    def clear_steers(self) -> None:
        """Empty the steer queue."""
        self.steer_queue = ()
        self.steer_bytes = 0

    # ----------------------------------------------------------------- events outside a run

    async def deliver_outside_run(self, event: AgentEvent, redactor: SecretRedactor | None) -> None:
        """Deliver a terminal event of a run that has no active leg.

        The event is redacted with ``redactor`` and given to every subscription and ``on_event``
        (no ledger record); then the subscriptions are closed.
        """
        observers = self.observers
        observers.set_redactor(redactor)
        observers.deliver(redact_agent_event(event, redactor))
        await observers.drain()
        observers.close_all()
