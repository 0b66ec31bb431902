"""Compaction: options, the default strategy, strategies and the middleware hook (STORE-7..STORE-9)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from prism.abort import AbortController
from prism.compaction import (
    NO_OLDER_ENTRIES_SUMMARY,
    CompactionInput,
    CompactionOptions,
    CompactionResult,
    compaction_entry,
    compaction_strategy_name,
    compute_compaction,
    default_compaction_strategy,
    resolve_compaction_options,
    should_auto_compact,
    validate_compaction_options,
)
from prism.errors import PrismConfigError
from prism.middleware import MiddlewareRegistry
from prism.store import (
    SessionEntry,
    drop_trailing_input,
    history_from_branch,
    new_session_entry,
)
from prism.types import (
    ImageContent,
    Message,
    ModelConfig,
    TextContent,
    ThinkingContent,
    ToolCallContent,
    ToolResult,
    assistant_message,
    tool_result_message,
    user_message,
)
from store_support import SID, call_msg, chain, result_msg

# --------------------------------------------------------------------------- STORE-7


def run_default(branch: Sequence[SessionEntry], **options: Any) -> CompactionResult:
    return default_compaction_strategy(
        CompactionInput(session_id=SID, entries=tuple(branch), options=CompactionOptions(**options))
    )


def test_store7_option_defaults() -> None:
    """STORE-7: CompactionOptions defaults."""
    o = CompactionOptions()
    assert (o.threshold_entries, o.keep_recent_entries, o.max_summary_chars, o.strategy,
            o.secrets) == (None, 8, 4000, None, ())


def test_store7_lines_for_every_entry_kind() -> None:
    """STORE-7: one line per older entry with the exact formats."""
    branch = chain(
        user_message("hello"),
        Message("assistant", (ThinkingContent("hidden"), TextContent("let me look"),
                              ToolCallContent("c1", "search", {"q": "x"}))),
        tool_result_message(ToolResult("c1", "search", value=1)),
        Message("user", (TextContent("see"), ImageContent(url="http://img"))),
        new_session_entry("summary", session_id=SID, summary="old stuff"),
        new_session_entry("model_change", session_id=SID, model=ModelConfig("openai", "gpt-x")),
        new_session_entry("custom", session_id=SID, data={"k": 1}),
        user_message("recent"),
    )
    result = run_default(branch, keep_recent_entries=1)
    assert result.summary == "\n".join(
        [
            "user: hello",
            "assistant: let me look [tool_call search]",
            "tool: [tool_result search]",
            "user: see [image]",
            "summary: old stuff",
            "model changed to openai/gpt-x",
        ]
    )
    assert result.through_entry_id == branch[-2].id
    assert result.keep_entry_ids == (branch[-1].id,)


def test_store7_tool_results_are_never_kept_without_their_call() -> None:
    """STORE-7: the kept window extends backwards over tool results to their call."""
    branch = chain(
        user_message("q"),
        call_msg("a", "b"),
        result_msg("a"),
        result_msg("b"),
        assistant_message("done"),
    )
    result = run_default(branch, keep_recent_entries=2)  # would start at result b
    assert result.keep_entry_ids == tuple(e.id for e in branch[1:])
    assert result.through_entry_id == branch[0].id
    assert result.summary == "user: q"
    history, _ = history_from_branch(chain(*branch, compaction_entry(
        result, session_id=SID, options=CompactionOptions(), trigger="auto")))
    assert [m.role for m in history] == ["assistant", "tool", "tool", "assistant"]


def test_store7_no_older_entries() -> None:
    """STORE-7: with nothing older the summary is the fixed sentence."""
    branch = chain(user_message("a"), assistant_message("b"))
    result = run_default(branch)
    assert result == CompactionResult(
        NO_OLDER_ENTRIES_SUMMARY, None, tuple(e.id for e in branch)
    )
    assert NO_OLDER_ENTRIES_SUMMARY == "No older session entries to summarize."


def test_store7_keep_zero_summarises_everything() -> None:
    """STORE-7: keep_recent_entries=0 keeps nothing; through is the last branch entry."""
    branch = chain(user_message("a"), assistant_message("b"))
    result = run_default(branch, keep_recent_entries=0)
    assert result.summary == "user: a\nassistant: b"
    assert result.through_entry_id == branch[-1].id
    assert result.keep_entry_ids == ()


def test_store7_secrets_replaced_then_truncated_with_ellipsis() -> None:
    """STORE-7: secrets replaced, text cut to max_summary_chars ending with `…`."""
    branch = chain(user_message("token sk-123 here " + "x" * 50), user_message("keep"))
    result = run_default(branch, keep_recent_entries=1, secrets=("sk-123",), max_summary_chars=20)
    assert len(result.summary) == 20
    assert result.summary.endswith("…")
    assert result.summary == "user: token [REDACT…"
    full = run_default(branch, keep_recent_entries=1, secrets=("sk-123",))
    assert "sk-123" not in full.summary and "[REDACTED]" in full.summary


def test_store7_second_compaction_folds_the_previous_summary() -> None:
    """STORE-7: entries summarised by an earlier compaction appear as its summary line."""
    base = chain(user_message("a"), user_message("b"), user_message("c"))
    first = run_default(base, keep_recent_entries=1)
    c1 = compaction_entry(first, session_id=SID, options=CompactionOptions(), trigger="manual")
    branch = chain(*base, c1, user_message("d"), user_message("e"))
    second = run_default(branch, keep_recent_entries=1)
    assert second.summary == "summary: user: a\nuser: b\nuser: c\nuser: d"
    assert second.keep_entry_ids == (branch[-1].id,)
    assert second.through_entry_id == branch[-2].id


def test_store7_compaction_entry_data() -> None:
    """STORE-7/STORE-9: data holds through_entry_id, keep_entry_ids, strategy, trigger."""
    result = CompactionResult("S", "entry_a", ("entry_b",))
    e = compaction_entry(result, session_id=SID, options=CompactionOptions(), trigger="auto",
                         parent_id="entry_b", run_id="run_1")
    assert e.kind == "compaction" and e.summary == "S"
    assert e.parent_id == "entry_b" and e.run_id == "run_1"
    assert dict(e.data or {}) == {
        "through_entry_id": "entry_a",
        "keep_entry_ids": ["entry_b"],
        "strategy": "default",
        "trigger": "auto",
    }


# --------------------------------------------------------------------------- STORE-8


def test_store8_auto_compaction_conditions() -> None:
    """STORE-8: threshold set, more entries than it, last entry not a compaction."""
    branch = chain(user_message("a"), user_message("b"), user_message("c"))
    assert should_auto_compact(CompactionOptions(threshold_entries=2), branch)
    assert not should_auto_compact(CompactionOptions(threshold_entries=3), branch)
    assert not should_auto_compact(CompactionOptions(), branch)
    assert not should_auto_compact(None, branch)
    comp = new_session_entry("compaction", session_id=SID, summary="s", data={})
    assert not should_auto_compact(CompactionOptions(threshold_entries=1), chain(*branch, comp))


def test_store8_drop_trailing_input() -> None:
    """STORE-8: remove from the history's end the messages equal to the input messages."""
    inputs = [user_message("i1"), user_message("i2")]
    history = [user_message("old"), user_message("i1"), user_message("i2")]
    assert drop_trailing_input(history, inputs) == 2
    assert [m.text for m in history] == ["old"]
    partial = [user_message("old"), user_message("i2")]  # i1 was summarised away
    assert drop_trailing_input(partial, inputs) == 1
    assert [m.text for m in partial] == ["old"]
    unrelated = [user_message("x")]
    assert drop_trailing_input(unrelated, inputs) == 0
    assert len(unrelated) == 1


# --------------------------------------------------------------------------- STORE-9


async def test_store9_custom_sync_and_async_strategies() -> None:
    """STORE-9: a strategy may be sync or async and receives CompactionInput."""
    received: list[CompactionInput] = []
    branch = chain(user_message("a"))
    signal = AbortController().signal

    def sync_strategy(inp: CompactionInput) -> CompactionResult:
        received.append(inp)
        return CompactionResult("sync", None, ())

    async def async_strategy(inp: CompactionInput) -> CompactionResult:
        received.append(inp)
        return CompactionResult("async", branch[0].id, ())

    r1 = await compute_compaction(session_id=SID, entries=branch,
                                  options=CompactionOptions(strategy=sync_strategy))
    r2 = await compute_compaction(session_id=SID, entries=branch, signal=signal,
                                  options=CompactionOptions(strategy=async_strategy))
    assert (r1.summary, r2.summary) == ("sync", "async")
    assert received[0].signal is None and received[1].signal is signal
    assert received[0].entries == tuple(branch)
    assert received[0].session_id == SID


async def test_store9_default_strategy_when_none() -> None:
    """STORE-9: no strategy means the default one."""
    branch = chain(user_message("a"), user_message("b"))
    r = await compute_compaction(session_id=SID, entries=branch,
                                 options=CompactionOptions(keep_recent_entries=1))
    assert r.summary == "user: a"


async def test_store9_middleware_hook_may_replace_the_result() -> None:
    """STORE-9: the `compaction` middleware hook receives and may replace the result."""
    middleware = MiddlewareRegistry()
    seen: list[CompactionResult] = []

    def hook(result: CompactionResult) -> CompactionResult:
        seen.append(result)
        return CompactionResult("replaced", result.through_entry_id, result.keep_entry_ids)

    middleware.use("compaction", hook)
    branch = chain(user_message("a"), user_message("b"))
    r = await compute_compaction(session_id=SID, entries=branch, middleware=middleware,
                                 options=CompactionOptions(keep_recent_entries=1))
    assert seen[0].summary == "user: a"
    assert r.summary == "replaced"


async def test_store9_strategy_must_return_a_result() -> None:
    """STORE-9: a mapping result is converted; anything else is a TypeError."""
    branch = chain(user_message("a"))
    r = await compute_compaction(
        session_id=SID, entries=branch,
        options=CompactionOptions(strategy=lambda _i: {"summary": "m", "keep_entry_ids": ["x"]}),
    )
    assert r == CompactionResult("m", None, ("x",))
    with pytest.raises(TypeError):
        await compute_compaction(session_id=SID, entries=branch,
                                 options=CompactionOptions(strategy=lambda _i: "nope"))


def test_store9_strategy_names() -> None:
    """STORE-9: "default", else the `name` attribute, else `__name__`."""

    class Named:
        name = "my-strategy"

        def __call__(self, inp: CompactionInput) -> CompactionResult:
            return CompactionResult("x")

    def plain(inp: CompactionInput) -> CompactionResult:
        return CompactionResult("x")

    assert compaction_strategy_name(None) == "default"
    assert compaction_strategy_name(default_compaction_strategy) == "default"
    assert compaction_strategy_name(Named()) == "my-strategy"
    assert compaction_strategy_name(plain) == "plain"
    e = compaction_entry(CompactionResult("x"), session_id=SID,
                         options=CompactionOptions(strategy=plain), trigger="manual")
    assert (e.data or {})["strategy"] == "plain"
    assert (e.data or {})["trigger"] == "manual"


# --------------------------------------------------------------------------- options / RUN-6


@pytest.mark.parametrize(
    "overrides",
    [
        {"threshold_entries": 0},
        {"threshold_entries": True},
        {"keep_recent_entries": -1},
        {"keep_recent_entries": 1.5},
        {"max_summary_chars": 0},
        {"strategy": "default"},
        {"secrets": "sk"},
        {"secrets": [1]},
    ],
)
def test_compaction_options_validation(overrides: dict[str, Any]) -> None:
    """ARCH-9: invalid compaction options raise PrismConfigError."""
    with pytest.raises(PrismConfigError):
        validate_compaction_options(overrides)


def test_compaction_options_mapping_and_unknown_keys() -> None:
    """RUN-7: mappings convert; camelCase keys are reported with their snake_case name."""
    def strategy(inp: CompactionInput) -> CompactionResult:
        return CompactionResult("x")

    o = validate_compaction_options({"threshold_entries": 3, "strategy": strategy,
                                     "secrets": ["a"]})
    assert o == CompactionOptions(threshold_entries=3, strategy=strategy, secrets=("a",))
    with pytest.raises(PrismConfigError) as info:
        validate_compaction_options({"keepRecentEntries": 2})
    assert "keep_recent_entries" in str(info.value)


def test_run6_compaction_resolution() -> None:
    """RUN-6: False disables, dataclass replaces, mapping overlays, none -> no compaction."""
    agent = CompactionOptions(threshold_entries=10, keep_recent_entries=4)
    assert resolve_compaction_options(None, None) is None
    assert resolve_compaction_options(agent, None) == agent
    assert resolve_compaction_options(agent, False) is None
    assert resolve_compaction_options(agent, CompactionOptions()) == CompactionOptions()
    assert resolve_compaction_options(agent, {"keep_recent_entries": 1}) == CompactionOptions(
        threshold_entries=10, keep_recent_entries=1
    )
    assert resolve_compaction_options(False, {"keep_recent_entries": 1}) == CompactionOptions(
        keep_recent_entries=1
    )
    with pytest.raises(PrismConfigError):
        resolve_compaction_options(agent, {"bogus": 1})
