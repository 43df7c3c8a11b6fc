"""Governance tests in a real browser: headless chromium (Playwright, Debian's /usr/bin/chromium), its
contexts, the rows of a page's tables, signing in through the form, screenshots kept as artifacts."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from .dashboard import COOKIE, TOKENS

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
ARTIFACTS = Path(__file__).resolve().parent / "artifacts"
NO_CHROMIUM = pytest.mark.skipif(not CHROMIUM.exists(), reason="Debian's chromium is not installed at "
                                 "/usr/bin/chromium (.ci/run installs it: apt-get install chromium)")


def launch(p):
    return p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)


def playwright():
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:  # a test dependency of the project (pyproject [test]); its absence is a failure
        pytest.fail("the playwright package is not installed: pip install -e '.[test]'")
    return sync_playwright()


def context_of(browser, **kw):
    """A browser context whose automatic /favicon.ico requests never reach the server (each one would be
    an unauthenticated request, see test_browsing_the_dashboard_adds_no_rejections)."""
    context = browser.new_context(**kw)
    context.route("**/favicon.ico", lambda route: route.fulfill(status=404, body=""))
    return context


def rows(page, table_id: str) -> list[list[str]]:
    """The text of each data row of a table (the header row left out)."""
    return page.eval_on_selector_all(
        f"#{table_id} tr", "rows => rows.slice(1).map(r => Array.from(r.cells).map(c => c.innerText.trim()))")


def rows_nojs(page, table_id: str) -> list[list[str]]:
    rows = page.locator(f"#{table_id} tr")
    out = []
    for i in range(1, rows.count()):
        cells = rows.nth(i).locator("td")
        out.append([cells.nth(j).inner_text().strip() for j in range(cells.count())])
    return out


def sign_in_page(page, base: str, token: str) -> None:
    page.goto(base + "/governance")
    assert page.url == base + "/governance/login"  # no cookie: redirected to the sign-in form
    page.fill("input[name=token]", token)
    page.click("button[type=submit]")




def signed_in_as(page, context, base: str, who: str) -> None:
    """The sign-in form, then the page; the cookie is a session's id (HttpOnly, SameSite=Strict, for
    /governance only, for the session's 8 hours), never the token."""
    from playwright.sync_api import expect

    sign_in_page(page, base, TOKENS[who])
    page.wait_for_url(base + "/governance")
    expect(page.locator("h1")).to_have_text("Governance")
    expect(page.locator("body")).to_contain_text(f"Signed in as {who}")
    cookie = next(c for c in context.cookies() if c["name"] == COOKIE)
    assert cookie["httpOnly"] is True and cookie["path"] == "/governance" and cookie["sameSite"] == "Strict"
    assert cookie["value"] != TOKENS[who] and 7.9 * 3600 < cookie["expires"] - time.time() <= 8 * 3600
    assert not any(TOKENS[who] in c["value"] for c in context.cookies())


def screenshot(page, name: str) -> Path:
    """The page as a test artifact: a real PNG of some size."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    assert len(data) > 20_000, f"the screenshot {name} is only {len(data)} bytes"
    return path
