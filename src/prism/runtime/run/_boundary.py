"""The turn boundary of a run leg: once per provider turn, with extension hooks.

The boundary runs on the first ``ctx.assemble`` or ``ctx.generate`` of a turn. Durable runs plug
their approval suspension and ``every-turn`` checkpoint into it, the turn policy its stop check.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from prism.limits import RunLimitTracker

__all__ = ["BoundaryHook", "TurnBoundary"]


BoundaryHook = Callable[[int], Coroutine[Any, Any, None]]
"""``await hook(turn)`` at a turn boundary; may raise to stop or suspend the run."""


class TurnBoundary:
    """The once-per-provider-turn boundary.

    It runs on the first ``ctx.assemble`` or ``ctx.generate`` of a turn; the turn index is
    "completed provider turns + 1" (a completed turn is a ``generate`` call that returned).
    In order: the ``before_charge`` hooks (the approval suspension and the turn policy plug in
    here), charging ``max_turns``, then the ``after_charge`` hooks (the ``every-turn``
    checkpoint plugs in here).

    Args:
        tracker: The run's limit tracker.
        before_charge: Hooks evaluated before ``max_turns`` is charged.
        after_charge: Hooks run after the charge.
    """

    __slots__ = ("_tracker", "after_charge", "before_charge", "completed", "entered", "failure")

    def __init__(
        self,
        tracker: RunLimitTracker,
        *,
        before_charge: Sequence[BoundaryHook] = (),
        after_charge: Sequence[BoundaryHook] = (),
    ) -> None:
        self._tracker = tracker
        self.before_charge: tuple[BoundaryHook, ...] = tuple(before_charge)
        """Hooks evaluated before ``max_turns`` is charged (approvals, turn policy); add one
        with ``+=`` (a tuple: a boundary without hooks holds no container)."""
        self.after_charge: tuple[BoundaryHook, ...] = tuple(after_charge)
        """Hooks run after the charge (``every-turn`` checkpoint)."""
        self.entered = 0
        """Index of the last turn whose boundary ran (0 before the first): the boundary of turn
        ``completed + 1`` is still due when this differs from it."""
        self.completed = 0
        """Provider turns completed in this leg (returned ``generate`` calls)."""
        self.failure: BaseException | None = None
        """What a boundary raised (a stop, a suspension, a breach, a policy error): sticky for
        the rest of the leg."""

    @property
    def turn(self) -> int:
        """Index of the provider turn the next boundary precedes (``completed + 1``)."""
        return self.completed + 1

    async def enter(self) -> int:
        """Run the boundary for the current turn unless it already ran; return the turn index.

        Raises:
            RunLimitExceeded: ``max_turns`` breached.
            Exception: whatever a hook raises (turn-policy stop, suspension).
        """
        failure = self.failure
        if failure is not None:
            raise failure
        turn = self.completed + 1
        if self.entered == turn:
            return turn
        self.entered = turn
        try:
            for hook in self.before_charge:
                await hook(turn)
            self._tracker.charge_turn()
            for hook in self.after_charge:
                await hook(turn)
        except Exception as exc:
            self.failure = exc
            raise
        return turn
