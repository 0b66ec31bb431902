"""The documentation site: ``mkdocs build --strict`` passes (no broken link, anchor or reference),
every public name has a reference entry and a docstring summary, docstrings hold no reST role,
and the built site, served over HTTP on 127.0.0.1, finds ``RunLimits`` from its search box in a
real headless Chromium (Debian's, driven by Playwright, set up as the inspector's browser tests).

The site builds once per session; without the ``docs`` extra the build tests skip.
"""

from __future__ import annotations

import functools
import http.server
import importlib
import importlib.util
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
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
REST_ROLE = re.compile(r":(?:class|func|meth|mod|attr|data|exc|obj|const|py:\w+):`")


def _pages_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_pages", ROOT / "scripts" / "docs_pages.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


REFERENCE: dict[str, str] = _pages_script().REFERENCE


def test_no_rest_role_is_left_in_the_source() -> None:
    """Docstrings cross-reference with Markdown autorefs (``[Name][prism.path]``): the reference
    renders them as Markdown, where a reST role would show as literal text."""
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted(SRC.rglob("*.py"))
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if REST_ROLE.search(line)
    ]
    assert found == []


@pytest.fixture(scope="session")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("mkdocs", reason="the site builders are the docs extra")
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "PYTHONPATH": str(SRC), "DISABLE_MKDOCS_2_WARNING": "true"}
    env["NO_MKDOCS_2_WARNING"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"mkdocs build --strict failed:\n{proc.stdout}\n{proc.stderr}"
    return out


def test_the_site_builds_strictly_with_the_generated_pages(site: Path) -> None:
    """Zero warnings (a broken link, anchor or cross-reference aborts the build), and the pages
    generated at build time exist: one reference page per module, the error codes, the CLI,
    ``llms.txt`` and ``llms-full.txt``, and a redirect from each moved guide."""
    for module in REFERENCE:
        assert (site / "reference" / module / "index.html").is_file(), module
    errors = (site / "reference" / "errors" / "index.html").read_text(encoding="utf-8")
    import prism.errors

    for code in (n for n in prism.errors.__all__ if n.startswith("ERR_")):
        assert code in errors, f"{code} is missing from the error-code table"
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    for command in ("prism run", "prism resume", "prism serve", "prism eval", "prism mcp"):
        assert command in cli
    llms = (site / "llms.txt").read_text(encoding="utf-8")
    assert "Get started" in llms and "reference/prism" in llms
    assert "RunLimits" in (site / "llms-full.txt").read_text(encoding="utf-8")
    moved = (site / "models" / "index.html").read_text(encoding="utf-8")
    assert "guides/models/" in moved


def _public_names() -> Iterator[tuple[str, str]]:
    for module in REFERENCE:
        for name in importlib.import_module(module).__all__:
            yield module, name


def test_every_public_name_has_a_reference_entry(site: Path) -> None:
    """Each name in ``prism.__all__`` and in each documented submodule's ``__all__`` has an entry
    (an anchor ``module.name``) on its module's reference page."""
    missing = []
    pages: dict[str, str] = {}
    for module, name in _public_names():
        if module not in pages:
            path = site / "reference" / module / "index.html"
            pages[module] = path.read_text(encoding="utf-8")
        if f'id="{module}.{name}"' not in pages[module]:
            missing.append(f"{module}.{name}")
    assert missing == [], missing


def test_every_public_name_has_a_docstring_summary() -> None:
    """The reference shows each public name's docstring; its first line is a summary. Error-code
    constants (a string equal to its name) are described by the error-code table instead."""
    griffe = pytest.importorskip("griffe", reason="the docs extra installs griffe")
    package = griffe.load("prism", search_paths=[str(SRC)], resolve_aliases=True)
    missing = []
    for module, name in _public_names():
        if getattr(importlib.import_module(module), name) == name and name.startswith("ERR_"):
            continue
        obj = package.modules_collection[f"{module}.{name}"]
        target = obj.final_target if obj.is_alias else obj
        docstring = target.docstring.value.strip() if target.docstring else ""
        if not docstring.splitlines() or not docstring.splitlines()[0].strip():
            missing.append(f"{module}.{name}")
    assert missing == [], missing


# ---------------------------------------------------------------- the site in a browser


def _require_browser() -> None:
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


class _Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def served(site: Path) -> Iterator[str]:
    """The built site over HTTP on 127.0.0.1 (Material's search does not run from file://)."""
    handler = functools.partial(_Quiet, directory=str(site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


async def test_the_search_box_finds_run_limits(served: str) -> None:
    """Typing ``RunLimits`` into the search box lists its reference entry."""
    _require_browser()
    from playwright.async_api import async_playwright

    async with async_playwright() as p:
        browser = await p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            page = await browser.new_page()
            await page.goto(served)
            await page.keyboard.press("s")  # Material's shortcut: focus the search box
            await page.fill("input.md-search__input", "RunLimits")
            hits = page.locator(".md-search-result__item")
            await hits.first.wait_for(timeout=30_000)
            text = await page.locator(".md-search-result").inner_text()
            assert "RunLimits" in text
            links = await page.locator(".md-search-result__link").evaluate_all(
                "links => links.map(a => a.href)"
            )
            assert any("reference/prism" in href for href in links), links
        finally:
            await browser.close()
