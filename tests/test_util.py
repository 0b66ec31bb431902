"""Generated ids and timestamps keep their formats (ARCH-13)."""

from __future__ import annotations

import os
import re
import time
import uuid

import pytest

from prism import _fast_stamps
from prism._fast_stamps import new_id, now_iso


def test_new_id_is_a_prefix_and_a_uuid4_hex_arch_13() -> None:
    seen = set()
    for _ in range(2000):
        value = new_id("entry")
        prefix, _, hex_part = value.partition("_")
        assert prefix == "entry"
        assert re.fullmatch(r"[0-9a-f]{32}", hex_part)
        parsed = uuid.UUID(hex=hex_part)
        assert parsed.version == 4
        assert parsed.variant == uuid.RFC_4122
        assert parsed.hex == hex_part
        seen.add(value)
    assert len(seen) == 2000


def test_new_id_keeps_the_whole_prefix_arch_13() -> None:
    assert new_id("toolcall").startswith("toolcall_")
    assert len(new_id("run")) == len("run_") + 32


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_new_id_of_a_forked_child_differs_from_its_parents_arch_13() -> None:
    """Random bytes read ahead before a fork are not handed out again in the child."""
    new_id("run")  # the parent now holds bytes read ahead
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child
        try:
            os.write(write, " ".join(new_id("run") for _ in range(8)).encode())
        finally:
            os._exit(0)
    os.close(write)
    with os.fdopen(read) as pipe:
        child = set(pipe.read().split())
    os.waitpid(pid, 0)
    parent = {new_id("run") for _ in range(8)}
    assert len(child) == 8
    assert not child & parent


def test_now_iso_is_utc_with_milliseconds_and_z_arch_13(monkeypatch: pytest.MonkeyPatch) -> None:
    base = 1_700_000_000 * 1_000_000_000  # 2023-11-14T22:13:20Z
    clock = iter([base + 5_000_000, base + 999_999_999, base + 1_000_000_000, base + 61_000_000_000])
    monkeypatch.setattr(_fast_stamps.time, "time_ns", lambda: next(clock))
    assert now_iso() == "2023-11-14T22:13:20.005Z"
    assert now_iso() == "2023-11-14T22:13:20.999Z"
    assert now_iso() == "2023-11-14T22:13:21.000Z"
    assert now_iso() == "2023-11-14T22:14:21.000Z"


def test_now_iso_matches_the_clock_arch_13() -> None:
    value = now_iso()
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", value)
    parsed = time.strptime(value[:19], "%Y-%m-%dT%H:%M:%S")
    assert abs(time.mktime(parsed) - time.mktime(time.gmtime())) < 5


def test_new_id_random_digits_cover_every_value_arch_13() -> None:
    """Only the version digit is fixed; the variant digit is one of 8, 9, a, b; every other digit
    of the ids takes all sixteen values (the read-ahead block is masked, not truncated)."""
    digits = [new_id("x")[2:] for _ in range(3000)]
    for position in range(32):
        seen = {d[position] for d in digits}
        if position == 12:
            assert seen == {"4"}
        elif position == 16:
            assert seen == set("89ab")
        else:
            assert len(seen) == 16, position
