"""What the inspector's browser tests share: Debian's Chromium as Playwright drives it, the skip
(or, with ``PRISM_REQUIRE_BROWSER=1``, the failure) that names what is missing, and a page that
collects its script errors."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--headless",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
]


def require_browser() -> None:
    """Skip the test, naming the missing binary or package — or fail it under
    ``PRISM_REQUIRE_BROWSER=1`` (CI), where the browser tests may not skip."""
    missing = None
    if not CHROMIUM.exists():
        missing = f"the browser tests need Chromium at {CHROMIUM} (Debian's chromium package)"
    else:
        try:
            import playwright.async_api  # noqa: F401
        except ImportError:
            missing = "the browser tests need the playwright package (the dev extra)"
    if missing is None:
        return
    if os.environ.get("PRISM_REQUIRE_BROWSER") == "1":
        pytest.fail(missing + " (PRISM_REQUIRE_BROWSER=1)")
    pytest.skip(missing)


async def new_page(chromium: Any, width: int = 1280, height: int = 800, **options: Any) -> Any:
    """A page in a fresh context; ``page.errors`` collects script errors and CSP violations."""
    context = await chromium.new_context(viewport={"width": width, "height": height}, **options)
    page = await context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.errors = errors  # read by the tests: no script error, no CSP violation
    return page
