"""Headless Chromium (Debian's package) driven by Playwright, as the browser tests under tests/e2e launch it."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.local_stack import REPO

CHROMIUM = Path("/usr/bin/chromium")
ARTIFACTS = REPO / "test-artifacts"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

# A browser test module's marks.
NEEDS_CHROMIUM = [
    pytest.mark.browser,
    # CI installs Chromium itself (scripts/ensure_system_deps.sh), so there a missing browser is a failure.
    pytest.mark.skipif(
        not CHROMIUM.exists() and not os.environ.get("CI"),
        reason="Debian's chromium is not installed (scripts/ensure_system_deps.sh)",
    ),
]


@contextmanager
def chromium() -> Iterator[Any]:
    # Playwright is a declared dependency: its absence fails the test rather than skipping it unseen.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()
