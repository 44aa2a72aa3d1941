"""A real browser for the web page's tests: Debian's headless Chromium driven by Selenium.

The browser is the system's (`chromium` and `chromium-driver`, which .ci/run installs): the
driver's path is given to Selenium, so Selenium Manager never runs and nothing is downloaded.
Without them the browser tier is skipped, with one reason. Each browser gets a new profile
folder and the switches that keep it from talking to anything but the page under test.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from tests.patience import ceiling

BROWSER_ENV = "KBMCP_TEST_CHROMIUM"  # another Chromium binary (and KBMCP_TEST_CHROMEDRIVER)
DRIVER_ENV = "KBMCP_TEST_CHROMEDRIVER"
REQUIRE_ENV = "KBMCP_TEST_REQUIRE_BROWSER"
SKIP_REASON = (
    "no browser: the browser tier drives Debian's headless Chromium; install it with "
    "`apt-get install chromium chromium-driver` (.ci/run does)"
)
SWITCHES = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-extensions",
    "--disable-default-apps",
    "--hide-scrollbars",
    "--force-color-profile=srgb",
)
DESKTOP = (1280, 800)
PHONE = (390, 844)
WAIT_SECONDS = 30.0


def browser_paths() -> tuple[str, str] | None:
    """(chromium, chromedriver), or None when either is missing."""
    browser = os.environ.get(BROWSER_ENV) or next(
        filter(None, (shutil.which(name) for name in ("chromium", "chromium-browser"))), None
    )
    driver = os.environ.get(DRIVER_ENV) or shutil.which("chromedriver")
    if (
        browser is None
        or driver is None
        or not (os.path.isfile(browser) and os.path.isfile(driver))
    ):
        return None
    return browser, driver


def require_browser(*, module: bool = False) -> tuple[str, str]:
    """The browser's and its driver's paths; without them the test (`module`: the whole
    module, reported as one skip with one reason) is skipped, or fails when REQUIRE_ENV says
    the browser must be there (.ci/run sets it once the browser is installed)."""
    paths = browser_paths()
    if paths is None:
        if os.environ.get(REQUIRE_ENV):
            pytest.fail(f"{REQUIRE_ENV} is set and there is {SKIP_REASON}", pytrace=False)
        pytest.skip(SKIP_REASON, allow_module_level=module)
    try:
        import selenium  # noqa: F401 (a test extra)
    except ImportError:
        pytest.skip(
            "no browser driver library: install the test extras (selenium)",
            allow_module_level=module,
        )
    return paths


@contextmanager
def chromium() -> Iterator[Any]:
    """A headless Chromium with a new profile, its console log readable (`get_log`)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser, driver_path = require_browser()
    profile = tempfile.mkdtemp(prefix="kbmcp-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = browser
    for switch in (
        *SWITCHES,
        f"--user-data-dir={profile}",
        f"--window-size={DESKTOP[0]},{DESKTOP[1]}",
    ):
        options.add_argument(switch)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    driver.set_page_load_timeout(ceiling(WAIT_SECONDS))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def wait_until(driver: Any, condition: Callable[[Any], Any], what: str) -> Any:
    from selenium.webdriver.support.ui import WebDriverWait

    limit = ceiling(WAIT_SECONDS)
    return WebDriverWait(driver, limit, poll_frequency=0.05).until(
        condition, message=f"waited {limit:.0f} s for {what}"
    )


def settled(driver: Any) -> bool:
    """No htmx request in flight and the document loaded."""
    return bool(
        driver.execute_script(
            "return document.readyState === 'complete' && window.htmx !== undefined"
            " && document.querySelector('.htmx-request') === null"
        )
    )


def wait_for(driver: Any, css: str) -> Any:
    """The element `css` once it is on the page and no request is in flight."""
    from selenium.webdriver.common.by import By

    def found(d: Any) -> Any:
        elements = d.find_elements(By.CSS_SELECTOR, css)
        return elements[0] if elements and settled(d) else None

    return wait_until(driver, found, css)


def auth_state(driver: Any) -> str | None:
    return driver.execute_script(
        "var m = document.getElementById('main'); return m && m.dataset.kbmcpAuth"
    )


def sign_in(driver: Any, base: str, secret: str, path: str = "/") -> None:
    """Open `path` in a tab that holds no token, sign in with `secret`, wait for the page."""
    from selenium.webdriver.common.by import By

    driver.get(base + "/static/favicon.svg")  # a file of the origin, to reach its storage
    driver.execute_script("window.sessionStorage.clear()")
    driver.get(base + path)
    wait_for(driver, "form#sign-in")
    field = driver.find_element(By.NAME, "token")
    field.clear()
    field.send_keys(secret)
    driver.find_element(By.CSS_SELECTOR, "form#sign-in button").click()
    wait_until(driver, lambda d: auth_state(d) in ("ok", "refused") and settled(d), "sign-in")


def set_width(driver: Any, size: tuple[int, int]) -> None:
    """The viewport a phone or a desktop has (device metrics: a window cannot be made this
    narrow)."""
    width, height = size
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": width < 600},
    )


def console_problems(driver: Any) -> list[str]:
    """Console messages since the last call that are not the expected 401s of full page loads
    under tokens: a CSP violation, a script error, a failed file."""
    problems = []
    for entry in driver.get_log("browser"):
        message = entry.get("message", "")
        if "status of 401" in message or "Autofocus processing was blocked" in message:
            continue
        if entry.get("level") in ("SEVERE", "WARNING") or "Content Security Policy" in message:
            problems.append(message)
    return problems
