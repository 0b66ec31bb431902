"""Per-turn runtime cost with realistic payloads, in CPU microseconds per turn.

Where ``bench_turns.py`` measures the runtime with empty payloads (one no-op call per turn), this
scenario carries the sizes a real agent sees, so that the cost of work proportional to payload
size (copying, byte counting, redaction, validation, serialisation, stored history) shows:

* a ~2 KB system prompt (``instructions``);
* four typed tools (``@prism.tool``, one pydantic-model parameter each, ``async def``), run with
  ``SingleShotLoopOptions(tool_concurrency=2)`` and the built-in argument validation on;
* a scripted mock provider that answers N-1 tool turns — each with ~200 bytes of assistant text
  (streamed in a few deltas), two tool calls with ~200-byte JSON arguments and a usage report —
  then one final text turn;
* tool results of ~1 KB of JSON each, built fresh on every call.

Store configurations (``--stores``):

* ``memory`` — the default in-memory session store, no durable run state;
* ``sqlite`` — ``prism.stores.SqliteStore`` on a fresh temporary file as the session store *and*
  the checkpoint store, with a durable run (``RunStateOptions``) checkpointing at every turn
  boundary (``checkpoint_policy="every-turn"``);
* ``memory-durable`` (optional) — the same durable run over the memory checkpoint store, which
  separates the checkpointing cost from SQLite's;
* ``postgres`` (optional) — as ``sqlite``, with ``prism.stores.PostgresStore`` on the server of
  ``$PRISM_TEST_POSTGRES_URL`` (a fresh schema per run, dropped afterwards), the server's
  ``synchronous_commit``; ``postgres-async-commit``: the same with ``synchronous_commit="off"``;
* ``memory-ledger`` (optional) — ``memory`` with a ``MemoryRunLedger`` (run rows, every event,
  tool-call and usage rows, and request rows where the tree writes them);
* ``sqlite-ledger`` (optional) — ``sqlite`` with the store as the run ledger too (as ``prism
  run`` has it).

Each sample is one complete ``session.run`` of N turns on a new agent and session (construction,
opening the database and closing it are not timed), after ``gc.collect()``. The configurations
are interleaved round by round so that machine noise hits them alike, after one 20-turn warm-up
run each. Reported: the median over ``--runs`` samples of process CPU time ÷ N (all threads,
so the SQLite worker thread counts; robust to other load on a shared machine), and of wall time
÷ N. The payload sizes actually used are printed first.

Usage::

    python benchmarks/bench_realistic.py [--n 20 200 1000] [--runs 11]
        [--stores memory sqlite] [--json PATH|-]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from _prism_api import api
from pydantic import BaseModel

P = api(
    "create_agent",
    "tool",
    "create_mock_provider",
    "provider_done",
    "provider_text_delta",
    "provider_tool_call",
    "Usage",
    "RunLimits",
    "UNLIMITED",
    "SingleShotLoopOptions",
    "RunStateOptions",
    "MemoryCheckpointStore",
)

STORES = (
    "memory",
    "sqlite",
    "memory-durable",
    "postgres",
    "postgres-async-commit",
    "memory-ledger",
    "sqlite-ledger",
)
TEXT_CHUNKS = 4
"""Deltas the ~200 bytes of assistant text of a turn are streamed in."""
FINAL_TEXT = (
    "All four checks are done: the order is in transit, the customer record is current, the "
    "ticket is updated with the tracking link and the replacement part is in stock at the main "
    "warehouse."
)

# --------------------------------------------------------------------------- the ~2 KB prompt

SYSTEM_PROMPT = "\n".join(
    [
        "You are the support assistant of Northwind Outfitters, an online retailer of outdoor "
        "equipment. You help customers and support agents with orders, returns, deliveries, "
        "stock questions and account changes.",
        "",
        "Rules:",
        "1. Always look up the order or the customer record before you answer a question about "
        "it; never guess order numbers, dates, amounts or tracking codes.",
        "2. Use search_orders to find orders by customer, status or date range; use get_customer "
        "for contact details, loyalty tier and open tickets; use check_inventory before promising "
        "a replacement or an exchange; use update_ticket to record what you did and why.",
        "3. When two lookups do not depend on each other, request them in the same turn.",
        "4. Refunds above 500 EUR, address changes on shipped orders and any change to payment "
        "details need a human agent: say so, record it on the ticket and stop.",
        "5. Quote prices in the currency of the order, with two decimals. Dates are ISO 8601, in "
        "the customer's time zone when it is known, else UTC.",
        "6. Keep answers short: at most five sentences, then a bulleted list of the actions you "
        "took. Do not repeat the customer's question back to them.",
        "",
        "Returns policy summary: items can be returned within 30 days of delivery if unused and "
        "in their original packaging; footwear and sleeping bags within 14 days; personalised "
        "items cannot be returned. Return shipping is free for loyalty tiers silver and gold. "
        "Exchanges are shipped when the returned item is scanned at the warehouse, or at once "
        "for gold members. Damaged-on-arrival items are replaced without a return when the "
        "customer sends a photo; record the photo reference on the ticket.",
        "",
        "Delivery summary: standard delivery takes 3 to 5 working days, express 1 to 2; orders "
        "placed before 14:00 CET on a working day leave the warehouse the same day. Carriers: "
        "DHL for Germany and Austria, DPD elsewhere in the EU, UPS outside the EU. A parcel "
        "without a tracking update for 5 working days is treated as lost: open a carrier claim "
        "through update_ticket with status 'carrier_claim' and offer a replacement.",
    ]
)

# --------------------------------------------------------------------------- typed tools


class OrderQuery(BaseModel):
    customer_id: str
    status: Literal["open", "shipped", "delivered", "returned", "cancelled"]
    placed_after: str
    placed_before: str
    sku_prefix: str
    limit: int
    include_items: bool


class CustomerLookup(BaseModel):
    customer_id: str
    email: str
    fields: list[str]
    include_tickets: bool
    locale: str
    requested_by: str


class TicketUpdate(BaseModel):
    ticket_id: str
    status: Literal["open", "pending_customer", "resolved", "carrier_claim"]
    note: str
    tags: list[str]


class InventoryCheck(BaseModel):
    sku: str
    warehouses: list[str]
    quantity: int
    reserve: bool
    reference: str
    reason: str


CALLS = [0]
"""Tool executions so far (checked after every run: a rejected call would not count)."""


def tool_result(kind: str, key: str, rows: int) -> dict[str, Any]:
    """A fresh ~1 KB JSON-able result (new objects on every call, as a real tool returns)."""
    CALLS[0] += 1
    return {
        "kind": kind,
        "key": key,
        "source": "northwind-api/v3",
        "rows": [
            {
                "id": f"{kind[:3].upper()}-{key}-{i:03d}",
                "status": "shipped" if i % 2 else "delivered",
                "amount": {"value": 129.9 + i, "currency": "EUR"},
                "updated_at": f"2024-06-{10 + i:02d}T09:{i:02d}:00Z",
                "carrier": "DHL",
                "tracking": f"JD0146000{i:05d}{key[-4:]}",
            }
            for i in range(rows)
        ],
        "next_page": None,
    }


@P.tool
async def search_orders(query: OrderQuery) -> dict[str, Any]:
    """Find a customer's orders by status and date range.

    Args:
        query: Customer, status, date range and SKU prefix to match.
    """
    return tool_result("orders", query.customer_id, 5)


@P.tool
async def get_customer(request: CustomerLookup) -> dict[str, Any]:
    """Read a customer record: contact details, loyalty tier, open tickets.

    Args:
        request: Which customer and which fields.
    """
    return tool_result("customer", request.customer_id, 5)


@P.tool
async def update_ticket(update: TicketUpdate) -> dict[str, Any]:
    """Record an action or a status change on a support ticket.

    Args:
        update: Ticket id, new status, note and tags.
    """
    return tool_result("ticket", update.ticket_id, 5)


@P.tool
async def check_inventory(request: InventoryCheck) -> dict[str, Any]:
    """Check (and optionally reserve) stock of one SKU in some warehouses.

    Args:
        request: SKU, warehouses, quantity and whether to reserve.
    """
    return tool_result("inventory", request.sku, 5)


TOOLS = [search_orders, get_customer, update_ticket, check_inventory]
TOOL_NAMES = [t.name for t in TOOLS]


def _arguments(tool: int, turn: int, call: int) -> dict[str, Any]:
    """~200 bytes of JSON arguments for tool number ``tool`` (distinct on every call)."""
    customer = f"CUST-{100000 + turn:06d}"
    if tool == 0:
        return {
            "query": {
                "customer_id": customer,
                "status": "shipped",
                "placed_after": "2024-05-01T00:00:00Z",
                "placed_before": "2024-06-30T23:59:59Z",
                "sku_prefix": f"TENT-{call}",
                "limit": 20,
                "include_items": True,
            }
        }
    if tool == 1:
        return {
            "request": {
                "customer_id": customer,
                "email": f"customer.{turn}@example.com",
                "fields": ["name", "tier", "address", "open_tickets"],
                "include_tickets": True,
                "locale": "de-DE",
                "requested_by": "agent-07",
            }
        }
    if tool == 2:
        return {
            "update": {
                "ticket_id": f"T-{turn:07d}",
                "status": "pending_customer",
                "note": f"Checked order status and stock for {customer}; waiting for the customer's photo.",
                "tags": ["delivery", "exchange"],
            }
        }
    return {
        "request": {
            "sku": f"TENT-2P-ULTRALIGHT-{turn % 97:03d}",
            "warehouses": ["DE-HAM-1", "DE-MUC-2", "AT-VIE-1"],
            "quantity": 1,
            "reserve": False,
            "reference": f"T-{turn:07d}/{call}",
            "reason": "replace a damaged item",
        }
    }


def _assistant_text(turn: int) -> str:
    return (
        f"Turn {turn}: I'll look up the order history and the customer record at the same time, "
        "so that I can check the delivery status against the carrier data and the loyalty tier "
        "before I suggest an exchange."
    )


def _chunks(text: str, parts: int) -> list[str]:
    size = -(-len(text) // parts)
    return [text[i : i + size] for i in range(0, len(text), size)]


ScriptedCall = tuple[str, str, dict[str, Any]]
"""One scripted tool call: (call id, tool name, JSON arguments)."""
ScriptedTurn = tuple[str, tuple[ScriptedCall, ...], int, int]
"""One scripted model turn: (assistant text, tool calls, input tokens, output tokens)."""


def plain_script(n: int) -> list[ScriptedTurn]:
    """The scenario as plain data (for other frameworks' fake models; :func:`build_script` is
    the same turns as prism provider events): N-1 turns of text + two tool calls, then the final
    text. The tool names are :data:`TOOL_NAMES`; arguments are fresh objects on every call."""
    script: list[ScriptedTurn] = []
    for turn in range(n - 1):
        first, second = turn % 4, (turn + 1) % 4
        calls = (
            (f"call_{turn}_a", TOOL_NAMES[first], _arguments(first, turn, 0)),
            (f"call_{turn}_b", TOOL_NAMES[second], _arguments(second, turn, 1)),
        )
        script.append((_assistant_text(turn), calls, 1200 + 700 * turn, 90))
    script.append((FINAL_TEXT, (), 1200 + 700 * n, 40))
    return script


def build_script(n: int) -> list[list[Any]]:
    """N-1 turns of text + two tool calls, then a final text turn (prism provider events)."""
    script: list[list[Any]] = []
    for text, calls, input_tokens, output_tokens in plain_script(n):
        events: list[Any] = [P.provider_text_delta(c) for c in _chunks(text, TEXT_CHUNKS)]
        events.extend(P.provider_tool_call(*call) for call in calls)
        usage = P.Usage(input_tokens=input_tokens, output_tokens=output_tokens)
        events.append(P.provider_done(usage))
        script.append(events)
    return script


def payload_sizes() -> dict[str, Any]:
    """The UTF-8 byte sizes this scenario uses (JSON as ``json.dumps`` writes it by default)."""

    def size(value: Any) -> int:
        return len(json.dumps(value).encode())

    args = [size(_arguments(t, 500, c)) for t in range(4) for c in range(2)]
    results = [size(tool_result(k, "CUST-100500", 5)) for k in ("orders", "customer", "ticket")]
    CALLS[0] -= len(results)
    return {
        "system_prompt_bytes": len(SYSTEM_PROMPT.encode()),
        "assistant_text_bytes_per_turn": len(_assistant_text(500).encode()),
        "assistant_text_deltas_per_turn": TEXT_CHUNKS,
        "final_text_bytes": len(FINAL_TEXT.encode()),
        "tool_calls_per_turn": 2,
        "tool_argument_bytes": {
            "min": min(args),
            "max": max(args),
            "median": statistics.median(args),
        },
        "tool_result_bytes": {"min": min(results), "max": max(results)},
        "tools": [t.name for t in TOOLS],
        "tool_schema_bytes": sum(size(t.parameters) for t in TOOLS),
    }


# --------------------------------------------------------------------------- one run


async def run_once(n: int, store_kind: str) -> tuple[float, float]:
    """One timed run of N turns; returns (CPU seconds, wall seconds)."""
    provider = P.create_mock_provider(turns=build_script(n))
    unlimited = P.UNLIMITED
    options: dict[str, Any] = {
        "model": {"provider": "mock", "model": "bench-realistic"},
        "provider": provider,
        "instructions": SYSTEM_PROMPT,
        "tools": TOOLS,
        "loop": P.SingleShotLoopOptions(tool_concurrency=2),
        "limits": P.RunLimits(
            max_turns=unlimited,
            max_provider_attempts=unlimited,
            max_tool_rounds=unlimited,
            max_tool_calls=unlimited,
            max_wall_time_ms=unlimited,
            max_request_bytes=64 * 2**20,
        ),
    }
    store: Any = None
    tmp: tempfile.TemporaryDirectory[str] | None = None
    schema = ""
    if store_kind == "memory-ledger":
        options["run_ledger"] = api("MemoryRunLedger").MemoryRunLedger()
    if store_kind in ("sqlite", "sqlite-ledger"):
        tmp = tempfile.TemporaryDirectory(prefix="prism-bench-")
        sqlite_store = api("SqliteStore").SqliteStore
        store = sqlite_store(os.path.join(tmp.name, "bench.db"))
        await store.open()
        options["store"] = store
        options["id"] = "bench-realistic"
        options["run_state"] = P.RunStateOptions(store, "bench-1", checkpoint_policy="every-turn")
        if store_kind == "sqlite-ledger":
            options["run_ledger"] = store
    elif store_kind.startswith("postgres"):
        schema = f"bench_{os.getpid()}_{time.monotonic_ns()}"
        sync = {"synchronous_commit": "off"} if store_kind == "postgres-async-commit" else {}
        store = await api("PostgresStore").PostgresStore.connect(
            _postgres_url(), schema=schema, **sync
        )
        options["store"] = store
        options["id"] = "bench-realistic"
        options["run_state"] = P.RunStateOptions(store, "bench-1", checkpoint_policy="every-turn")
    elif store_kind == "memory-durable":
        options["id"] = "bench-realistic"
        options["run_state"] = P.RunStateOptions(
            P.MemoryCheckpointStore(), "bench-1", checkpoint_policy="every-turn"
        )
    agent = P.create_agent(**options)
    session = agent.create_session()
    calls_before = CALLS[0]
    gc.collect()
    cpu0 = time.process_time()
    wall0 = time.perf_counter()
    result = await session.run("Where is my tent? Order from last month, customer CUST-100000.")
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    try:
        if result.status != "succeeded" or result.text != FINAL_TEXT:
            error = getattr(result, "error", None)
            raise RuntimeError(f"run did not finish as scripted: {result.status} {error!r}")
        if provider.call_count != n:
            raise RuntimeError(f"expected {n} provider turns, got {provider.call_count}")
        if CALLS[0] - calls_before != 2 * (n - 1):
            raise RuntimeError(f"expected {2 * (n - 1)} tool runs, got {CALLS[0] - calls_before}")
    finally:
        if store is not None:
            await store.aclose()
        if tmp is not None:
            tmp.cleanup()
        if schema:
            await _drop_schema(schema)
    return cpu, wall


def _postgres_url() -> str:
    url = os.environ.get("PRISM_TEST_POSTGRES_URL")
    if not url:
        raise SystemExit("--stores postgres needs PRISM_TEST_POSTGRES_URL")
    return url


async def _drop_schema(schema: str) -> None:
    import psycopg

    async with await psycopg.AsyncConnection.connect(_postgres_url(), autocommit=True) as conn:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


async def measure(ns: list[int], runs: int, stores: list[str]) -> dict[str, Any]:
    """Median µs/turn per (store, N): interleaved over the stores, ``runs`` samples each."""
    for store_kind in stores:
        await run_once(20, store_kind)  # warm-up: first-use caches, imports, the database code
    out: dict[str, Any] = {}
    for n in ns:
        samples: dict[str, list[tuple[float, float]]] = {s: [] for s in stores}
        for _ in range(runs):
            for store_kind in stores:
                samples[store_kind].append(await run_once(n, store_kind))
        for store_kind in stores:
            cpu = [c / n * 1e6 for c, _ in samples[store_kind]]
            wall = [w / n * 1e6 for _, w in samples[store_kind]]
            out.setdefault(store_kind, {})[str(n)] = {
                "median_cpu_us_per_turn": statistics.median(cpu),
                "median_wall_us_per_turn": statistics.median(wall),
                "min_cpu_us_per_turn": min(cpu),
                "runs": runs,
            }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--n", type=int, nargs="+", default=[20, 200, 1000], help="turns per run")
    parser.add_argument("--runs", type=int, default=11, help="timed runs per (store, N)")
    parser.add_argument("--stores", nargs="+", choices=STORES, default=["memory", "sqlite"])
    parser.add_argument(
        "--json", default=None, help="write the results as JSON to PATH (- : stdout)"
    )
    args = parser.parse_args()
    if any(n < 2 for n in args.n):
        parser.error("--n: at least 2 turns (N-1 tool turns, then the final text)")
    sizes = payload_sizes()
    if args.json != "-":
        print("payload sizes (bytes):")
        for key, value in sizes.items():
            print(f"  {key}: {value}")
    results = asyncio.run(measure(args.n, args.runs, args.stores))
    if args.json != "-":
        print(f"median over {args.runs} runs, µs per turn (process CPU / wall):")
        for store_kind, by_n in results.items():
            for n, cell in by_n.items():
                print(
                    f"  {store_kind:<15} N={n:>5}: cpu {cell['median_cpu_us_per_turn']:9.1f}"
                    f"   wall {cell['median_wall_us_per_turn']:9.1f}"
                )
    if args.json is not None:
        payload = {"scenario": "realistic", "payload_sizes": sizes, "results": results}
        text = json.dumps(payload, indent=2, sort_keys=True)
        if args.json == "-":
            print(text)
        else:
            Path(args.json).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
