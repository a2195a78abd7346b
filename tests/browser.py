"""Headless Chromium through Selenium for the browser tests, or a skip saying what to
install (CI sets RECALL_REQUIRE_BROWSER=1, so a missing browser fails there instead)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import pytest

CHROMIUM = os.environ.get("RECALL_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("RECALL_CHROMEDRIVER", "/usr/bin/chromedriver")
INSTALL = "apt-get install -y chromium chromium-driver (and pip install selenium)"


def headless_chromium(profile_dir: Path, *, window: str, headless: str = "--headless",
                      capabilities: dict[str, Any] | None = None, args: list[str] | None = None,
                      prefs: dict[str, Any] | None = None) -> Any:
    required = os.environ.get("RECALL_REQUIRE_BROWSER") == "1"
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not shutil.which(p)]
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service
    except ImportError:
        missing.append("selenium")
    if missing:
        if required:
            pytest.fail(f"browser test required but {', '.join(missing)} missing: {INSTALL}")
        pytest.skip(f"no headless browser ({', '.join(missing)} missing): {INSTALL}")
    opts = Options()
    opts.binary_location = CHROMIUM
    for arg in (headless, "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                "--disable-component-update", "--no-first-run", "--disable-sync",
                "--disable-dev-shm-usage", f"--user-data-dir={profile_dir}", f"--window-size={window}"):
        opts.add_argument(arg)
    for arg in args or []:
        opts.add_argument(arg)
    if prefs:
        opts.add_experimental_option("prefs", prefs)
    for key, value in (capabilities or {}).items():
        opts.set_capability(key, value)
    return webdriver.Chrome(service=Service(CHROMEDRIVER), options=opts)
