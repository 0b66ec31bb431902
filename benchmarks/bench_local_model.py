"""Time to first token and tokens/s: prism's providers vs the ``openai`` SDK called directly.

Starts llama-cpp-python's OpenAI-compatible server on the bundled SmolLM2-135M-Instruct model
(``python -m prism.providers.llama_cpp``: the same server with prism's safe defaults, one thread,
127.0.0.1, a free port), then streams the same prompt with the same ``max_tokens`` through:

* ``sdk``      — ``openai.AsyncOpenAI().chat.completions.create(stream=True)``, counting chunks;
* ``provider`` — ``prism.providers.openai.create_openai_compatible_provider(...).generate()``;
* ``session``  — a full ``session.stream(...)`` run through prism's runtime on that provider;
* ``inproc``   — the in-process provider (``prism.providers.llama_cpp``), for reference only
  (no HTTP at all; not part of the ratio).

The clients run in rotating order, several rounds, after one warm-up each. Reported per client:
median time to first token (ms), median decode rate (tokens after the first / time from first to
last token) and median end-to-end rate (tokens / request time), plus the median over rounds of the
per-round ratio prism / SDK (robust to load changing during the benchmark). A "token" is one streamed text fragment; the server streams one per sampled token, and
at temperature 0 every client receives the same fragments.

Usage::

    python benchmarks/bench_local_model.py [--runs 7] [--max-tokens 128] [--json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

PROMPT = "Write a short story about a lighthouse keeper and a storm."
SYSTEM = "You are a helpful assistant."


@dataclass
class Sample:
    """One streamed request: offsets in seconds from the request start."""

    first: float
    last: float
    total: float
    tokens: int


@dataclass
class Series:
    name: str
    samples: list[Sample] = field(default_factory=list)

    def medians(self) -> dict[str, float]:
        ttft = statistics.median(s.first * 1000 for s in self.samples)
        decode = statistics.median(
            (s.tokens - 1) / (s.last - s.first) for s in self.samples if s.last > s.first
        )
        e2e = statistics.median(s.tokens / s.total for s in self.samples)
        tokens = statistics.median(s.tokens for s in self.samples)
        return {"ttft_ms": ttft, "decode_tok_s": decode, "e2e_tok_s": e2e, "tokens": tokens}


async def _timed(stream: AsyncIterator[bool]) -> Sample:
    """Consume ``stream`` (True per text fragment) and time it."""
    start = time.perf_counter()
    first = last = 0.0
    tokens = 0
    async for is_text in stream:
        if is_text:
            now = time.perf_counter() - start
            if tokens == 0:
                first = now
            last = now
            tokens += 1
    return Sample(first=first, last=last, total=time.perf_counter() - start, tokens=tokens)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _start_server(port: int) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [
            sys.executable, "-m", "prism.providers.llama_cpp",
            "--chat_format", "chatml-function-calling", "--n_ctx", "4096",
            "--n_threads", "1", "--n_threads_batch", "1",
            "--host", "127.0.0.1", "--port", str(port),
            "--model_alias", "smollm2-135m-instruct",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


async def _wait_ready(base_url: str, proc: subprocess.Popen[bytes], timeout_s: float) -> None:
    import httpx

    deadline = time.monotonic() + timeout_s
    async with httpx.AsyncClient() as client:
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"server exited with code {proc.returncode}")
            try:
                if (await client.get(f"{base_url}/models", timeout=2)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.2)
    raise RuntimeError(f"server not ready after {timeout_s:.0f} s")


def _stop_server(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


async def run(runs: int, max_tokens: int) -> dict[str, Any]:
    import openai

    from prism.providers.llama_cpp import create_local_provider
    from prism.providers.openai import create_openai_compatible_provider
    from prism.types import ModelConfig, ProviderRequest, system_message, user_message

    port = _free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    proc = _start_server(port)
    try:
        await _wait_ready(base_url, proc, 120)
        parameters = {"temperature": 0, "max_tokens": max_tokens, "seed": 1}
        model = ModelConfig(provider="openai-compatible", model="smollm2-135m-instruct",
                            parameters=parameters)
        messages = (system_message(SYSTEM), user_message(PROMPT))
        sdk = openai.AsyncOpenAI(base_url=base_url, api_key="none", max_retries=0)
        provider = create_openai_compatible_provider(base_url=base_url, auth_style="none")
        inproc = create_local_provider()
        inproc.load()

        async def sdk_stream() -> AsyncIterator[bool]:
            stream = await sdk.chat.completions.create(
                model="smollm2-135m-instruct",
                messages=[{"role": "system", "content": SYSTEM},
                          {"role": "user", "content": PROMPT}],
                stream=True,
                **parameters,  # type: ignore[arg-type]
            )
            async for chunk in stream:
                yield any(c.delta.content for c in chunk.choices)

        async def provider_stream(p: Any, m: ModelConfig) -> AsyncIterator[bool]:
            async for event in p.generate(ProviderRequest(model=m, messages=messages)):
                yield event.type == "content_delta"

        clients: dict[str, Callable[[], AsyncIterator[bool]]] = {
            "sdk": sdk_stream,
            "provider": lambda: provider_stream(provider, model),
            "inproc": lambda: provider_stream(
                inproc, ModelConfig(provider="local", model="smollm2", parameters=parameters)
            ),
        }
        session_stream = _session_client(provider, model)
        if session_stream is not None:
            clients["session"] = session_stream

        series = {name: Series(name) for name in clients}
        for make in clients.values():  # warm-up (prompt cache, connections)
            await _timed(make())
        names = list(clients)
        for round_index in range(runs):
            shift = round_index % len(names)
            for name in names[shift:] + names[:shift]:
                series[name].samples.append(await _timed(clients[name]()))
        await sdk.close()
    finally:
        _stop_server(proc)

    report: dict[str, Any] = {"runs": runs, "max_tokens": max_tokens, "clients": {}}
    for name, s in series.items():
        report["clients"][name] = s.medians()
    sdk = series["sdk"].samples
    for name in ("provider", "session"):
        if name not in series:
            continue
        mine = series[name].samples
        # per-round ratios (same round, adjacent requests) are robust to load drift on the machine
        report[f"{name}_vs_sdk"] = {
            "ttft_ratio": statistics.median(m.first / b.first for m, b in zip(mine, sdk, strict=True)),
            "decode_ratio": statistics.median(
                ((m.tokens - 1) / (m.last - m.first)) / ((b.tokens - 1) / (b.last - b.first))
                for m, b in zip(mine, sdk, strict=True)
            ),
            "e2e_ratio": statistics.median(
                (m.tokens / m.total) / (b.tokens / b.total) for m, b in zip(mine, sdk, strict=True)
            ),
        }
    return report


def _session_client(provider: Any, model: Any) -> Callable[[], AsyncIterator[bool]] | None:
    """A full prism run (``session.stream``) on ``provider``; ``None`` without the runtime."""
    try:
        from prism.runtime.agent import create_agent
    except ImportError:
        return None
    agent = create_agent(model=model, provider=provider, instructions=SYSTEM, retry=False)

    async def stream() -> AsyncIterator[bool]:
        session = agent.create_session()
        async with session.stream(PROMPT) as events:
            async for event in events:
                yield event.type == "message_delta" and getattr(event.content, "type", "") == "text"

    return stream


def _print(report: dict[str, Any]) -> None:
    print(f"runs={report['runs']} max_tokens={report['max_tokens']} (medians)")
    print(f"{'client':<10}{'tokens':>8}{'TTFT ms':>10}{'decode tok/s':>14}{'e2e tok/s':>11}")
    for name, m in report["clients"].items():
        print(f"{name:<10}{m['tokens']:>8.0f}{m['ttft_ms']:>10.1f}"
              f"{m['decode_tok_s']:>14.1f}{m['e2e_tok_s']:>11.1f}")
    for name in ("provider", "session"):
        key = f"{name}_vs_sdk"
        if key in report:
            r = report[key]
            print(f"{name} / sdk (median of per-round ratios): TTFT x{r['ttft_ratio']:.3f}, decode x{r['decode_ratio']:.3f}, "
                  f"e2e x{r['e2e_ratio']:.3f}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=7, help="rounds per client (default 7)")
    parser.add_argument("--max-tokens", type=int, default=128, help="max_tokens (default 128)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    args = parser.parse_args(argv)
    report = asyncio.run(run(args.runs, args.max_tokens))
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        _print(report)


if __name__ == "__main__":
    main()

