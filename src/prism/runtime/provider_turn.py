"""Provider-request policies and the provider attempts, under their earlier module path.

The attempts of one request live in [`prism.runtime.run.attempts`][prism.runtime.run.attempts] (``ProviderAttempts``, formerly
``ProviderTurnRunner``), the request policies in [`prism.runtime.run.policies`][prism.runtime.run.policies]. This module keeps
the names importable from here and holds [`generate_with_retry()`][prism.runtime.provider_turn.generate_with_retry], the public helper that runs
one request through a leg's attempts.
"""

from __future__ import annotations

from prism.runtime.run._attempt import EMPTY_TURN_RESULT as EMPTY_TURN_RESULT
from prism.runtime.run._attempt import SoftInterrupt as SoftInterrupt
from prism.runtime.run.attempts import ProviderAttempts
from prism.runtime.run.attempts import ProviderAttempts as ProviderTurnRunner
from prism.runtime.run.policies import PolicyContext as PolicyContext
from prism.runtime.run.policies import ProviderRequestPolicy as ProviderRequestPolicy
from prism.runtime.run.policies import ProviderRequestPolicyResult as ProviderRequestPolicyResult
from prism.types import ProviderRequest, ProviderTurnResult, canonical_json

__all__ = [
    "EMPTY_TURN_RESULT",
    "PolicyContext",
    "ProviderAttempts",
    "ProviderRequestPolicy",
    "ProviderRequestPolicyResult",
    "ProviderTurnRunner",
    "SoftInterrupt",
    "generate_with_retry",
]


async def generate_with_retry(
    runner: ProviderAttempts,
    request: ProviderRequest,
    *,
    request_bytes: int | None = None,
    turn: int = 1,
    secrets: tuple[str, ...] = (),
) -> ProviderTurnResult:
    """Run ``request`` through ``runner`` with retry; see
    [`ProviderAttempts.run()`][prism.runtime.provider_turn.ProviderAttempts.run].

    Args:
        runner: The leg's provider attempts.
        request: The redacted request.
        request_bytes: Its canonical UTF-8 size; ``None`` computes it here (O(request)).
        turn: Turn number for events.
        secrets: Provider-request policy secrets.
    """
    if request_bytes is None:
        request_bytes = len(canonical_json(request.to_dict()).encode())
    return await runner.run(request, request_bytes=request_bytes, turn=turn, secrets=secrets)
