"""The playground page in a real (headless) Chromium: where Chromium is, and typing into the
page's composer. The ``browser``, ``page`` and ``playground`` fixtures are in conftest.py."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("PAPERBOY_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"

#: For the browser test modules: without Chromium they are skipped (CI installs it, .ci/run).
needs_chromium = pytest.mark.skipif(
    not Path(CHROMIUM).exists(),
    reason=f"Chromium not found at {CHROMIUM} (apt-get install chromium, or set PAPERBOY_CHROMIUM)",
)


def send(page, text: str) -> None:
    """Type ``text`` into the composer and press Enter, as a person does."""
    page.fill("#input", text)
    page.press("#input", "Enter")
