"""Open a report page in real headless Chromium (Debian's /usr/bin/chromium, driven by
Playwright) and say what it did: every request it made, its images, its text."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("LETEO_CHROMIUM", "/usr/bin/chromium")
# CI installs Chromium and sets this, so a missing browser fails there instead of skipping
REQUIRED = os.environ.get("LETEO_REQUIRE_BROWSER") == "1"
FLAGS = [  # a closed network: no background connections at start-up
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@dataclass
class Rendered:
    requests: list[str]
    failed: list[str]
    console_errors: list[str]
    images: list[dict]
    headings: list[str]
    text: str


def need_browser() -> None:
    missing = not (Path(CHROMIUM).exists() or shutil.which(CHROMIUM))
    try:
        import playwright.sync_api  # noqa: F401
    except ImportError:
        missing = True
    if missing and REQUIRED:
        pytest.fail(f"headless Chromium ({CHROMIUM}) and playwright are required here")
    if missing:
        pytest.skip(f"needs Chromium at {CHROMIUM} (Debian package chromium) and playwright")


def render(page_file: Path) -> Rendered:
    from playwright.sync_api import sync_playwright

    requests: list[str] = []
    failed: list[str] = []
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=FLAGS)
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.on("requestfailed", lambda r: failed.append(r.url))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.goto(page_file.resolve().as_uri(), wait_until="load")
            images = page.eval_on_selector_all(
                "img",
                "els => els.map(e => ({complete: e.complete, width: e.naturalWidth, "
                "height: e.naturalHeight, alt: e.alt, data: e.src.startsWith('data:image/png')}))",
            )
            headings = page.eval_on_selector_all("h1, h2", "els => els.map(e => e.textContent)")
            text = page.inner_text("body")
        finally:
            browser.close()
    return Rendered(requests, failed, errors, images, headings, text)
