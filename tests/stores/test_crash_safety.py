"""Crash safety (DB-10): durable runs on SQLite and on PostgreSQL, killed with SIGKILL at every
hook point of a clean run, then continued by new processes.

The run and the hook points are described in ``_crash_worker.py``: three provider turns, three
tool calls, every-turn checkpoints, with approvals (50 hook points), without (42), and without on
one store object that writes a turn's entries with its envelope in one transaction (30) — spread over
provider turns (request, mid-stream), tool calls (before and after the side effect), session
appends and checkpoint writes (before and after each real write). For every hook point a
``start`` process kills itself there (``os.kill(getpid(), SIGKILL)``), and a ``recover`` process
continues the run from the store alone (``resume_agent_run`` of the ``running``/``suspended``
envelope, DUR-16..DUR-22). Some cases kill the recovering process too, so a second recovery
continues a twice-crashed run.

Each phase is its own OS process, forked per job from a warm worker interpreter that never opens a
store (so a case costs milliseconds, not interpreter starts); one test runs the same protocol with
a fresh interpreter per phase.

What every case must show (DB-10), with approvals and without:

* no stored message lost: the branch the envelope recorded at the crash is a prefix of the final
  branch; none duplicated: the final branch is exactly the expected transcript;
* no completed provider turn requested again: after a crash, no process requests a turn whose
  answer is on the recorded branch (the provider logs every request in ``turns.log``) — a
  recorded dispatch puts its turn on the recorded branch, so a crash inside a tool round never
  re-requests that round's turn;
* every stored tool call ends up with exactly one result on the final branch, and no branch of
  the store, abandoned ones included, answers a call twice;
* a call whose dispatch was recorded but whose result row was not stored is *reported* by resume
  (``AgentRunStateError``, DUR-20) — in particular every crash inside a tool is — and resolved by
  the operator (DUR-24); a recorded dispatch whose row *was* stored is adopted by the resume, not
  reported; every tool side effect happens exactly once (``effects.log``), so nothing is silently
  re-run;
* no call that had not started is reported (issue 21, item 13): a call is recorded
  ``dispatched`` only by the write made right before its own ``execute``, so every reported call
  has a ``started.log`` line (its tool's first step) from before the report; each matrix prints
  how many calls were reported and the share of those that had not started (zero);
* the input is checkpointed before it is appended: a run that stored an entry always has an
  envelope, and a kill right after the input append resumes the run, the input appended again on
  a fork and present once on the final branch.

Crashes before the run's first checkpoint leave no envelope and no entry: the host starts the run
again. Crashes after a provider answer was stored but before the next write re-request that turn
on a sibling branch (DUR-22); the checks above allow exactly that and nothing more.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from prism.stores.postgres import PostgresStore

WORKER = Path(__file__).with_name("_crash_worker.py")
SERVERS = 2
_IO_GUARD_S = 60.0  # a hang guard only; nothing asserts on time

PROMPT = "Record a, b and c."
CALLS = ("call_1a", "call_1b", "call_2")
EXPECTED_BRANCH: list[tuple[str, str, tuple[str, ...]]] = [
    ("user", "hello", ()),
    ("assistant", "hi, what shall I record?", ()),
    ("user", PROMPT, ()),
    ("assistant", "", ("call_1a", "call_1b")),
    ("tool", "call_1a", ()),
    ("tool", "call_1b", ()),
    ("assistant", "checking c", ("call_2",)),
    ("tool", "call_2", ()),
    ("assistant", "all recorded", ()),
]
"""The final branch: (role, text or the answered call id, tool call ids)."""
DELEGATED_CALLS = ("call_1a", "child_1", "call_2")
"""The side effects of the ``delegated`` run: call_1b is the agent tool, whose child records b."""
EXPECTED_CHILD_BRANCH: list[tuple[str, str, tuple[str, ...]]] = [
    ("user", "record b", ()),
    ("assistant", "", ("child_1",)),
    ("tool", "child_1", ()),
    ("assistant", "b recorded", ()),
]
"""The final branch of the ``delegated`` run's child session."""

CHAINED: tuple[tuple[int, ...], ...] = (
    (6, 3),
    (12, 2),
    (14, 4, 2),
    (16, 4),
    (18, 5),
    (22, 1),
    (26, 7),
    (34, 2),
    (38, 3),
    (44, 2),
)
"""Cases that kill the recovering process too: the start's kill point, then each recover's."""


# --------------------------------------------------------------------------- running phases


class ForkServer:
    """One ``_crash_worker.py serve`` process; each job runs in a child it forks."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc

    async def run(self, job: dict[str, Any]) -> dict[str, Any]:
        proc = self.proc
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(job) + "\n").encode())
        await proc.stdin.drain()
        line = await asyncio.wait_for(proc.stdout.readline(), _IO_GUARD_S)
        if not line:
            err = await proc.stderr.read() if proc.stderr is not None else b""
            raise AssertionError(f"worker server exited: {err.decode(errors='replace')}")
        answer: dict[str, Any] = json.loads(line)
        return answer


@asynccontextmanager
async def fork_servers(count: int) -> AsyncIterator[list[ForkServer]]:
    procs = [
        await asyncio.create_subprocess_exec(
            sys.executable, str(WORKER), "serve",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        for _ in range(count)
    ]
    try:
        yield [ForkServer(p) for p in procs]
    finally:
        for p in procs:
            if p.stdin is not None:
                p.stdin.close()
        for p in procs:
            try:
                await asyncio.wait_for(p.wait(), _IO_GUARD_S)
            except TimeoutError:
                p.kill()
                await p.wait()


class FreshInterpreter:
    """Runs each job in a new ``python _crash_worker.py once JOB`` process."""

    async def run(self, job: dict[str, Any]) -> dict[str, Any]:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, str(WORKER), "once", json.dumps(job),
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        code = await asyncio.wait_for(proc.wait(), _IO_GUARD_S)
        return {
            "pid": proc.pid,
            "exit": code if code >= 0 else None,
            "signal": -code if code < 0 else None,
        }


@dataclass
class Case:
    """A chain of phases over one session: ``start`` killed at ``kills[0]``, a ``recover``
    killed at each later value, then a ``recover`` that runs to the end. No kills: one clean
    ``start``."""

    kills: tuple[int, ...]
    directory: Path
    url: str
    schema: str | None
    session: str
    gated: bool = True
    delegated: bool = False
    together: bool = False
    parallel: bool = False
    outcomes: list[dict[str, Any]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return "kill@" + ",".join(map(str, self.kills)) if self.kills else "clean"

    def phases(self) -> list[tuple[str, int | None]]:
        if not self.kills:
            return [("start", None)]
        modes = ["start"] + ["recover"] * len(self.kills)
        kills: list[int | None] = [*self.kills, None]
        return list(zip(modes, kills, strict=True))

    async def run(self, runner: Any) -> None:
        for phase, (mode, kill_at) in enumerate(self.phases()):
            outcome = await runner.run(
                {
                    "mode": mode,
                    "url": self.url,
                    "schema": self.schema,
                    "session": self.session,
                    "dir": str(self.directory),
                    "phase": phase,
                    "kill_at": kill_at,
                    "gated": self.gated,
                    "delegated": self.delegated,
                    "together": self.together,
                    "parallel": self.parallel,
                }
            )
            self.outcomes.append(outcome)
            if kill_at is not None and outcome["signal"] != signal.SIGKILL:
                return  # reported by check_case


async def run_cases(cases: list[Case], runners: list[Any]) -> None:
    queue: asyncio.Queue[Case] = asyncio.Queue()
    for case in cases:
        queue.put_nowait(case)

    async def drain(runner: Any) -> None:
        while not queue.empty():
            await queue.get_nowait().run(runner)

    await asyncio.gather(*(drain(r) for r in runners))


# --------------------------------------------------------------------------- checks


def _read_lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _json(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def _shape(entry: dict[str, Any]) -> tuple[str, str, tuple[str, ...]]:
    role = entry.get("role", entry.get("kind", "?"))
    key = entry.get("result_for") if role == "tool" else entry.get("text", "")
    return role, str(key), tuple(entry.get("calls", ()))


def _answer_problems(path: list[dict[str, Any]], *, complete: bool = False) -> list[str]:
    """Tool results on one root-to-leaf path: each answers a call made earlier on the path, at
    most once (exactly once with ``complete``)."""
    problems = []
    calls: list[str] = []
    answered: Counter[str] = Counter()
    for entry in path:
        calls += entry.get("calls", [])
        if "result_for" in entry:
            if entry["result_for"] not in calls:
                problems.append(f"result for unknown call {entry['result_for']}")
            answered[entry["result_for"]] += 1
    for call in calls:
        if answered[call] > 1 or (complete and answered[call] != 1):
            problems.append(f"call {call} has {answered[call]} results")
    return problems


def kill_labels(case: Case) -> list[str]:
    """``<mode>: <hook label>`` of every kill of the case."""
    labels = []
    for phase, (mode, kill_at) in enumerate(case.phases()):
        if kill_at is None:
            continue
        lines = _read_lines(case.directory / f"trace-{phase}.log")
        if lines and lines[-1].startswith("KILL "):
            labels.append(f"{mode}: {lines[-1].split(' ', 2)[2]}")
    return labels


def check_case(case: Case) -> list[str]:
    """Every DB-10 property of one case; returns the violations (empty when all hold)."""
    d = case.directory
    phases = case.phases()
    problems: list[str] = []
    # -- the processes died where they were told to, and the last one finished the run
    if len(case.outcomes) != len(phases):
        problems.append(f"ran {len(case.outcomes)} of {len(phases)} phases: {case.outcomes}")
        return problems
    for phase, ((_, kill_at), outcome) in enumerate(zip(phases, case.outcomes, strict=True)):
        error = d / f"error-{phase}.txt"
        if error.exists():
            problems.append(f"phase {phase} raised:\n{error.read_text()}")
        if kill_at is not None:
            last = (_read_lines(d / f"trace-{phase}.log") or [""])[-1]
            if outcome["signal"] != signal.SIGKILL or not last.startswith(f"KILL {kill_at} "):
                problems.append(f"phase {phase} was not killed at {kill_at}: {outcome}, {last!r}")
        elif outcome["exit"] != 0:
            problems.append(f"phase {phase} exited with {outcome}")
    if problems:
        return problems
    last_phase = len(phases) - 1
    final = _json(d / f"final-{last_phase}.json")
    if final is None or final.get("status") != "succeeded" or "final" not in final:
        return [f"run did not succeed: {final}"]
    branch = final["final"]["branch"]
    everything = final["final"]["all"]
    ids = [e["id"] for e in branch]
    # -- none duplicated, none missing: exactly the expected transcript
    if [_shape(e) for e in branch] != EXPECTED_BRANCH or len(set(ids)) != len(ids):
        problems.append(f"final branch {[_shape(e) for e in branch]}")
    reports = [line.split() for line in _read_lines(d / "reports.log")]
    rejected = {r[2] for r in reports if r[1] == "reject"}
    for entry in branch:
        if entry.get("role") == "tool":
            expected_code = "approval_rejected" if entry["result_for"] in rejected else None
            if entry.get("error_code") != expected_code:
                problems.append(f"result of {entry['result_for']}: {entry.get('error_code')}")
    # -- every stored tool call has exactly one result on the final branch, and no branch of
    #    the store (abandoned ones included) answers a call twice or answers an unknown call
    problems += [f"final branch: {p}" for p in _answer_problems(branch, complete=True)]
    by_id = {e["id"]: e for e in everything}
    parents = {e["parent"] for e in everything}
    for leaf in (e for e in everything if e["id"] not in parents):
        path = [leaf]
        while path[-1]["parent"] is not None:
            path.append(by_id[path[-1]["parent"]])
        problems += [f"branch to {leaf['id']}: {p}" for p in _answer_problems(path[::-1])]
    # -- every side effect exactly once, never silently re-run (the operator re-runs a reported
    #    call only when its side effect did not happen), with approvals and without
    effect_lines = [line.split() for line in _read_lines(d / "effects.log")]
    effects = Counter(call for call, _ in effect_lines)
    if effects != Counter(DELEGATED_CALLS if case.delegated else CALLS):
        problems.append(f"tool side effects {dict(effects)}")
    if case.delegated:
        problems += _child_problems(final.get("child"))
    turns = [tuple(map(int, line.split())) for line in _read_lines(d / "turns.log")]
    child_turns = [tuple(map(int, line.split())) for line in _read_lines(d / "child-turns.log")]
    for phase, (mode, _) in enumerate(phases):
        if mode != "recover":
            continue
        snap = _json(d / f"snapshot-{phase}.json")
        if snap is None:
            problems.append(f"phase {phase}: no snapshot")
            continue
        recorded = snap["branch"]
        # -- no stored message lost
        if ids[: len(recorded)] != [e["id"] for e in recorded]:
            problems.append(f"phase {phase}: the recorded branch is not kept")
        # -- no completed provider turn requested again
        done = sum(
            1 for e in recorded if e.get("role") == "assistant" and e["run"] == snap["run_id"]
        )
        again = [t for t, p in turns if p >= phase and t <= done]
        if again:
            problems.append(f"phase {phase}: turns {again} requested again ({done} were stored)")
        # -- a tool whose result was checkpointed never runs again
        answered = {e["result_for"] for e in recorded if "result_for" in e}
        child = snap.get("child") if case.delegated else None
        if child is not None:
            # -- nor a completed turn of the child, nor a call the child's checkpoint answered
            mine = [e for e in child["branch"] if e["run"] == child["run_id"]]
            done = sum(1 for e in mine if e.get("role") == "assistant")
            again = [t for t, p in child_turns if p >= phase and t <= done]
            if again:
                problems.append(f"phase {phase}: child turns {again} requested again")
            answered |= {e["result_for"] for e in child["branch"] if "result_for" in e}
        rerun = [c for c, p in effect_lines if c in answered and int(p) >= phase]
        if rerun:
            problems.append(f"phase {phase}: checkpointed calls {rerun} ran again")
        envelope = snap["envelope"]
        ambiguous = any(line == [str(phase), "ambiguous"] for line in reports)
        previous = (_read_lines(d / f"trace-{phase - 1}.log") or [""])[-1].split()
        # -- the input is checkpointed before it is appended: no stored entry without an
        #    envelope, and a kill right after the append resumes the run (DUR-7)
        if envelope is None and snap["run_id"] is not None:
            problems.append(f"phase {phase}: run {snap['run_id']} stored entries, no envelope")
        # (the delegated run's child checkpoints its own input the same way)
        inputs = envelope if child is None else child["envelope"]
        if previous[2:4] == ["append.after", "user[text]"] and not (inputs or {}).get("input"):
            problems.append(f"phase {phase}: the appended input is not in the envelope")
        if envelope is None:
            # never durable: nothing irreversible may have happened before
            earlier_turns = [t for t, p in turns if p < phase]
            earlier_effects = [
                line for line in _read_lines(d / "effects.log") if int(line.split()[1]) < phase
            ]
            if earlier_turns or earlier_effects or ambiguous:
                problems.append(f"phase {phase}: work done before the first checkpoint")
            continue
        # -- an ambiguous dispatch is reported exactly when one was recorded and its result
        #    row is not stored after the recorded leaf (a stored row is adopted by the resume)
        dispatched = [
            p["id"]
            for p in envelope["pending"]
            if p["status"] == "dispatched"
            and p["id"] not in envelope["adoptable"]
            and not p.get("child")  # a call that started a child run resumes the child
        ]
        child_envelope = None if child is None else child["envelope"]
        if envelope["status"] == "running" and child_envelope is not None and any(
            p.get("child") for p in envelope["pending"]
        ):
            # the parent's resume reports an ambiguous call of its recorded child run
            if child_envelope["status"] == "running":
                dispatched += [
                    p["id"]
                    for p in child_envelope["pending"]
                    if p["status"] == "dispatched" and p["id"] not in child_envelope["adoptable"]
                ]
        if bool(dispatched) != ambiguous:
            problems.append(f"phase {phase}: dispatched {dispatched}, reported={ambiguous}")
        # -- a crash inside a tool is always such a case, with approvals and without
        in_tool = previous[2:3] in (["tool.before"], ["tool.after"])
        if in_tool and previous[3] not in dispatched:
            problems.append(f"phase {phase}: crash in {previous[3]} is not reported")
    return problems


def _dispatched_in(label: str) -> set[str]:
    """The calls a ``save`` hook label lists as ``dispatched``."""
    return {t.split(":")[1] for t in label.split() if t.startswith("dispatched:")}


def _killed_before_execute(case: Case, phase: int, call: str) -> bool:
    """Whether phase ``phase`` was killed right after the write that dispatched ``call`` alone
    (its own marking, the last step before its ``execute``): the one window in which a call
    that had not started must still be reported, since nothing in the store tells it from a call
    killed inside its tool."""
    lines = _read_lines(case.directory / f"trace-{phase}.log")
    if not lines or not lines[-1].startswith("KILL ") or " save.after " not in lines[-1]:
        return False
    label = lines[-1].split(" save.after ", 1)[1]
    earlier = [
        line.split(" save.after ", 1)[1] for line in lines[:-1] if " save.after " in line
    ]
    before = _dispatched_in(earlier[-1]) if earlier else set()
    return _dispatched_in(label) - before == {call}


def ambiguity_counts(case: Case) -> tuple[int, list[str], list[str]]:
    """``(ambiguous calls reported, those that had not started, those of them killed between
    their own dispatch write and their execute)``.

    A call a resume reported ambiguous whose ``execute`` never began before the report (no
    ``started.log`` line of an earlier phase) had not started. Unless the crash fell right
    after the write that dispatched it alone — the step before its ``execute`` — it is a
    needless ambiguity (issue 21, item 13: none)."""
    d = case.directory
    started = [line.split() for line in _read_lines(d / "started.log")]
    reported = 0
    not_started: list[str] = []
    window: list[str] = []
    for line in _read_lines(d / "reports.log"):
        phase, action, *rest = line.split()
        if action == "ambiguous":
            continue
        reported += 1
        call = rest[0]
        if any(c == call and int(p) < int(phase) for c, p in started):
            continue
        name = f"{case.name} phase {phase}: {call}"
        not_started.append(name)
        if _killed_before_execute(case, int(phase) - 1, call):
            window.append(name)
    return reported, not_started, window


def assert_no_needless_ambiguity(label: str, cases: list[Case]) -> None:
    """Report the share of ambiguous calls that had not started (printed with ``-s``) and
    require every one of them to have been killed between its own dispatch write and its
    ``execute``."""
    reported = 0
    not_started: list[str] = []
    window: list[str] = []
    for case in cases:
        count, never, at_dispatch = ambiguity_counts(case)
        reported += count
        not_started += never
        window += at_dispatch
    needless = [name for name in not_started if name not in window]
    share = 100.0 * len(needless) / reported if reported else 0.0
    print(
        f"\n{label}: {reported} ambiguous calls reported; {len(window)} killed between their own "
        f"dispatch write and their execute; {len(needless)} that had not started otherwise "
        f"({share:.0f} % of the reported)"
    )
    assert reported, f"{label}: no ambiguous call was reported"
    assert not needless, f"{label}: ambiguous calls that had not started: {needless}"


def _child_problems(child: dict[str, Any] | None) -> list[str]:
    """The ``delegated`` run's child finished with exactly the expected transcript, each of its
    calls answered once on every branch of its session."""
    if child is None or child.get("status") != "succeeded":
        return [f"child run did not succeed: {child}"]
    problems = []
    branch = child["branch"]
    if [_shape(e) for e in branch] != EXPECTED_CHILD_BRANCH:
        problems.append(f"child branch {[_shape(e) for e in branch]}")
    problems += [f"child branch: {p}" for p in _answer_problems(branch, complete=True)]
    everything = child["all"]
    by_id = {e["id"]: e for e in everything}
    parents = {e["parent"] for e in everything}
    for leaf in (e for e in everything if e["id"] not in parents):
        path = [leaf]
        while path[-1]["parent"] is not None:
            path.append(by_id[path[-1]["parent"]])
        problems += [f"child branch to {leaf['id']}: {p}" for p in _answer_problems(path[::-1])]
    return problems


@dataclass(frozen=True)
class Mode:
    """A run configuration of the matrix: its hook points and the chained cases."""

    gated: bool
    hook_points: int
    kinds: dict[str, int]
    chained: tuple[tuple[int, ...], ...]
    paths: frozenset[str]
    reports: frozenset[str]
    together: bool = False
    """One store object for sessions and checkpoints: a turn's entries and its envelope are
    written in one transaction (``save_checkpoint_with_entries``)."""
    parallel: bool = False
    """A round's calls run two at a time (``tool_concurrency=2``)."""


GATED = Mode(
    gated=True,
    hook_points=50,
    kinds={"provider": 6, "tool": 6, "append": 14, "save": 24},
    chained=CHAINED,
    paths=frozenset({"restart", "running", "suspended", "finished"}),
    reports=frozenset({"ambiguous", "reject", "rerun"}),
)
"""Approval-gated tools: every replayed dispatch is recorded before its side effect (APR-9)."""
PLAIN = Mode(
    gated=False,
    hook_points=42,
    kinds={"provider": 6, "tool": 6, "append": 14, "save": 16},
    chained=((4, 3), (10, 2), (14, 4), (16, 4), (20, 2), (32, 3)),
    paths=frozenset({"restart", "running", "finished"}),
    reports=frozenset({"ambiguous", "reject", "rerun"}),
)
"""Ungated tools: every dispatch is recorded before its side effect too (every-turn, DB-10)."""
TOGETHER = Mode(
    gated=False,
    hook_points=30,
    kinds={"provider": 6, "tool": 6, "append": 2, "save": 16},
    chained=((4, 3), (10, 2), (12, 4), (14, 4), (18, 2), (22, 3)),
    paths=frozenset({"restart", "running", "finished"}),
    reports=frozenset({"ambiguous", "reject", "rerun"}),
    together=True,
)
"""Ungated tools on one store object: from the first turn boundary on, each append is held and
written with the next envelope in one transaction, so no kill falls between a turn's entries
and its envelope; a stored result row is never left for a resume to adopt."""
PARALLEL = Mode(
    gated=False,
    hook_points=30,
    kinds={"provider": 6, "tool": 6, "append": 2, "save": 16},
    chained=((4, 3), (10, 2), (12, 4), (14, 4), (18, 2), (22, 3)),
    paths=frozenset({"restart", "running", "finished"}),
    reports=frozenset({"ambiguous", "reject", "rerun"}),
    together=True,
    parallel=True,
)
"""``TOGETHER`` with the first round's two calls running at once: each call is dispatched by a
marking write of its own right before its ``execute`` (issue 21, item 13), so a crash while
the first runs leaves the second ``ready`` (one marking for both reported both)."""


async def _crash_matrix(
    tmp_path: Path, url_for: Any, schema: str | None, runners: Any, mode: Mode
) -> None:
    prefix = "x" if mode.parallel else "t" if mode.together else "g" if mode.gated else "p"

    def case(kills: tuple[int, ...]) -> Case:
        name = prefix + ("clean" if not kills else "k" + "_".join(map(str, kills)))
        directory = tmp_path / name
        directory.mkdir()
        return Case(
            kills, directory, url_for(directory), schema, f"sess_{name}", mode.gated,
            together=mode.together, parallel=mode.parallel,
        )

    clean = case(())
    await run_cases([clean], runners[:1])
    assert check_case(clean) == []
    points = _read_lines(clean.directory / "trace-0.log")
    assert len(points) == mode.hook_points, points
    kinds = Counter(p.split()[1].split(".")[0] for p in points)
    assert kinds == mode.kinds, kinds

    cases = [case((k,)) for k in range(1, mode.hook_points + 1)]
    cases += [case(kills) for kills in mode.chained]
    await run_cases(cases, runners)
    failures = {c.name: p for c in cases if (p := check_case(c))}
    assert not failures, json.dumps(failures, indent=1)
    store = "sqlite" if schema is None else "postgres"
    assert_no_needless_ambiguity(f"{store} {prefix}-matrix", cases)
    # the kills really are spread over all kinds of hook points (at least 20 distinct ones)
    killed = {label for c in cases for label in kill_labels(c)}
    assert len(killed) >= 20
    for kind in ("provider.", "tool.", "append.", "save."):
        least = min(4, mode.kinds[kind[:-1]])  # the held appends have no hook points of their own
        assert sum(1 for label in killed if label.split(": ")[1].startswith(kind)) >= least, kind
    assert any(label.startswith("recover: ") for label in killed)
    # and they exercised every recovery path
    paths = Counter(
        (_json(c.directory / f"final-{len(c.phases()) - 1}.json") or {}).get("path")
        for c in cases
    )
    assert mode.paths <= set(paths), paths
    reports = Counter(
        line.split()[1] for c in cases for line in _read_lines(c.directory / "reports.log")
    )
    assert set(reports) == mode.reports, reports
    # a dispatched call whose row was stored before the crash was adopted, not reported
    adopted = [
        snap["envelope"]["adoptable"]
        for c in cases
        for phase in range(1, len(c.phases()))
        if (snap := _json(c.directory / f"snapshot-{phase}.json")) and snap["envelope"]
    ]
    if mode.together:
        # a run's turns store their rows with their envelopes: after a killed start there is
        # no row to adopt (a resumed leg's replay, before its first boundary, stores its rows
        # on their own, so a killed recovery may leave one)
        after_start = [
            snap["envelope"]["adoptable"]
            for c in cases
            if (snap := _json(c.directory / "snapshot-1.json")) and snap["envelope"]
        ]
        assert not any(after_start), "a turn's result row was stored without its envelope"
    else:
        assert any(adopted), "no case adopted a stored result row"
    # the kill right after the input append resumed the run (it did not start it again)
    after_input = next(c for c in cases if c.kills == (4,))
    assert kill_labels(after_input) == ["start: append.after user[text]"]
    final = _json(after_input.directory / "final-1.json")
    assert final is not None and final["path"] == "running", final


DELEGATED_HOOK_POINTS = {False: 64, True: 80}
"""Hook points of a clean ``delegated`` run, ungated and gated: the parent's with the agent
tool's call instead of a plain one, and the child's (its provider turns, appends, checkpoint
writes and tool); gated, every call of either agent waits for an approval the host gives at
once (the child's through the parent)."""
SEED = int(os.environ.get("PRISM_CRASH_SEED", "16"))
"""Seed of the delegated run's random kill points (set ``PRISM_CRASH_SEED`` for others)."""


async def _delegated_crash_cases(
    tmp_path: Path,
    url_for: Any,
    schema: str | None,
    runners: Any,
    *,
    singles: int,
    chained: int,
    gated: bool = False,
) -> None:
    """A parent run whose agent tool's child run records b, SIGKILLed at random hook points of
    either agent (and some recoveries killed too), then resumed through the parent alone: both
    runs finish with their exact transcripts, every side effect happened once, and no completed
    provider turn of either agent is requested again."""

    def case(kills: tuple[int, ...]) -> Case:
        name = ("dg" if gated else "d") + ("clean" if not kills else "k" + "_".join(map(str, kills)))
        directory = tmp_path / name
        directory.mkdir()
        return Case(
            kills, directory, url_for(directory), schema, f"sess_{name}", gated, delegated=True
        )

    clean = case(())
    await run_cases([clean], runners[:1])
    assert check_case(clean) == []
    points = _read_lines(clean.directory / "trace-0.log")
    count = DELEGATED_HOOK_POINTS[gated]
    assert len(points) == count, points
    rng = random.Random(SEED)
    child_points = [i + 1 for i, p in enumerate(points) if " c" in p or "child_1" in p]
    picked = set(rng.sample(range(1, count + 1), min(singles, count)))
    picked |= set(rng.sample(child_points, 4))  # some always land inside the child
    cases = [case((k,)) for k in sorted(picked)]
    # a recovery killed too (early enough that it still has that many hook points to meet)
    cases += [case((rng.randint(1, 45), rng.randint(1, 12))) for _ in range(chained)]
    await run_cases(cases, runners)
    failures = {c.name: p for c in cases if (p := check_case(c))}
    assert not failures, f"seed {SEED}: " + json.dumps(failures, indent=1)
    store = "sqlite" if schema is None else "postgres"
    assert_no_needless_ambiguity(f"{store} delegated{' gated' if gated else ''}", cases)
    killed = {label for c in cases for label in kill_labels(c)}
    assert any(" c" in label or "child_1" in label for label in killed), killed
    paths = Counter(
        (_json(c.directory / f"final-{len(c.phases()) - 1}.json") or {}).get("path")
        for c in cases
    )
    assert "running" in paths, paths


# --------------------------------------------------------------------------- tests


async def test_db10_sqlite_sigkill_at_every_hook_point_then_resume(tmp_path: Path) -> None:
    """DB-10 on SQLite, each case over its own database file: with approvals, 50 single kills
    (every hook point) and 10 chained ones; without, 42 and 6; with a turn's entries and
    envelope written together, 30 and 6."""
    async with fork_servers(SERVERS) as servers:
        for mode in (GATED, PLAIN, TOGETHER, PARALLEL):
            await _crash_matrix(tmp_path, lambda d: f"sqlite:///{d}/store.db", None, servers, mode)


async def test_db10_postgres_sigkill_at_every_hook_point_then_resume(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    """DB-10 on PostgreSQL: the same cases, all in one schema (one session per case)."""
    store = await PostgresStore.connect(pg_url, schema=pg_schema, max_size=1)
    await store.aclose()  # migrated before the workers start
    async with fork_servers(SERVERS) as servers:
        for mode in (GATED, PLAIN, TOGETHER, PARALLEL):
            await _crash_matrix(tmp_path, lambda d: pg_url, pg_schema, servers, mode)


async def test_delegated_sqlite_sigkill_at_random_points_of_parent_and_child(
    tmp_path: Path,
) -> None:
    """Issue 16 on SQLite: a parent and its agent tool's child, killed at every hook point of
    either (64) and, chained, at random points of the start and of a recovery (8)."""
    async with fork_servers(SERVERS) as servers:
        await _delegated_crash_cases(
            tmp_path, lambda d: f"sqlite:///{d}/store.db", None, servers, singles=64, chained=8
        )


async def test_delegated_gated_sqlite_sigkill_at_random_points_of_parent_and_child(
    tmp_path: Path,
) -> None:
    """Issue 16 on SQLite, every call of either agent gated (the child's approvals given through
    the parent): killed at every hook point of either agent (80), and 10 random chained kills."""
    async with fork_servers(SERVERS) as servers:
        await _delegated_crash_cases(
            tmp_path, lambda d: f"sqlite:///{d}/store.db", None, servers, singles=80, chained=10,
            gated=True,
        )


async def test_delegated_postgres_sigkill_at_random_points_of_parent_and_child(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    """Issue 16 on PostgreSQL: 20 random hook points of either agent plus 4 in the child, and 4
    random chained kills; all cases in one schema."""
    store = await PostgresStore.connect(pg_url, schema=pg_schema, max_size=1)
    await store.aclose()  # migrated before the workers start
    async with fork_servers(SERVERS) as servers:
        await _delegated_crash_cases(
            tmp_path, lambda d: pg_url, pg_schema, servers, singles=20, chained=4
        )


@pytest.mark.parametrize(
    ("kills", "gated"),
    [((17,), True), ((32,), True), ((20, 3), True), ((14,), False), ((4,), False)],
    ids=str,
)
async def test_db10_fresh_interpreter_per_phase(
    tmp_path: Path, kills: tuple[int, ...], gated: bool
) -> None:
    """DB-10 without the fork server: each phase is a new interpreter (SQLite)."""
    case = Case(kills, tmp_path, f"sqlite:///{tmp_path}/store.db", None, "sess_fresh", gated)
    await case.run(FreshInterpreter())
    assert check_case(case) == []


async def test_db10_checks_catch_violations(tmp_path: Path) -> None:
    """The checks fail on a re-run side effect, a duplicated message, an unreported ambiguous
    call and a re-requested turn (so the crash tests can fail)."""
    async with fork_servers(1) as servers:
        case = Case(
            (14,), tmp_path, f"sqlite:///{tmp_path}/store.db", None, "sess_check", gated=False
        )
        await case.run(servers[0])
    assert check_case(case) == []
    effects = tmp_path / "effects.log"
    original = effects.read_text()
    effects.write_text(original + "call_1a 1\n")
    assert any("side effects" in p for p in check_case(case))
    effects.write_text(original)

    final_path = tmp_path / "final-1.json"
    final = json.loads(final_path.read_text())
    doubled = json.loads(json.dumps(final))
    doubled["final"]["branch"].insert(4, doubled["final"]["branch"][3])
    final_path.write_text(json.dumps(doubled))
    assert any("final branch" in p for p in check_case(case))
    final_path.write_text(json.dumps(final))

    reports = tmp_path / "reports.log"
    saved_reports = reports.read_text()
    reports.write_text("")
    assert any("reported=False" in p for p in check_case(case))
    reports.write_text(saved_reports)

    turns = tmp_path / "turns.log"
    turns.write_text(turns.read_text() + "1 1\n")
    assert any("requested again" in p for p in check_case(case))
