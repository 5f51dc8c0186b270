"""A real headless browser for the tests of the HTML pages: Debian's Chromium, driven by
selenium through Debian's chromedriver (scripts/test_services.sh installs both).

Never a downloaded browser: both binaries are named by path and SE_OFFLINE keeps
selenium-manager from fetching anything. Chromium runs with --no-sandbox, as the tests run
as root in CI. Screenshots land in test-artifacts/ (git-ignored), for a person to look at.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from selenium.webdriver.chrome.webdriver import WebDriver

PROJECT = Path(__file__).resolve().parent.parent
ARTIFACTS = PROJECT / "test-artifacts"
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
WIDTH, HEIGHT = 1280, 2000  # the window: a desktop page, tall enough for most at once
MAX_SHOT_HEIGHT = 30000  # a screenshot's height at most, in CSS pixels
LOAD_TIMEOUT_S = 30


def browser_missing() -> str | None:
    """Why no test browser can start here, or None."""
    if not os.access(CHROMIUM, os.X_OK):
        return f"{CHROMIUM} is not installed (apt-get install chromium)"
    if not os.access(CHROMEDRIVER, os.X_OK):
        return f"{CHROMEDRIVER} is not installed (apt-get install chromium-driver)"
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not importable (pip install -e '.[dev]')"
    return None


class Browser:
    """One headless Chromium for a test session: opens local files, reports their console
    errors, takes screenshots and runs scripts in the open page."""

    def __init__(self, driver: WebDriver) -> None:
        self.driver = driver

    def open(self, path: Path) -> list[str]:
        """Load the local file `path`, wait until the page has loaded, and return the
        SEVERE console messages logged since the previous call (a page's own errors, a
        resource that failed to load, a blocked request)."""
        from selenium.webdriver.support.wait import WebDriverWait

        self.driver.get(path.resolve().as_uri())
        WebDriverWait(self.driver, LOAD_TIMEOUT_S).until(
            lambda driver: driver.execute_script("return document.readyState") == "complete")
        return self.errors()

    def errors(self) -> list[str]:
        """The SEVERE console messages logged since the last look (reading drains them)."""
        return [entry["message"] for entry in self.driver.get_log("browser")
                if entry["level"] == "SEVERE"]

    def screenshot(self, name: str) -> Path:
        """The whole page (up to MAX_SHOT_HEIGHT tall) as test-artifacts/NAME.png."""
        size = self.driver.execute_cdp_cmd("Page.getLayoutMetrics", {})["cssContentSize"]
        clip = {"x": 0, "y": 0, "width": max(size["width"], 1),
                "height": min(max(size["height"], 1), MAX_SHOT_HEIGHT), "scale": 1}
        shot = self.driver.execute_cdp_cmd("Page.captureScreenshot", {
            "format": "png", "captureBeyondViewport": True, "clip": clip})
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"{name}.png"
        path.write_bytes(base64.b64decode(shot["data"]))
        return path

    def js(self, script: str, *args: Any) -> Any:
        """Run `script` in the open page (`return ...` gives its value back)."""
        return self.driver.execute_script(script, *args)

    def stop(self) -> None:
        """End the browser and its chromedriver."""
        self.driver.quit()


def start_browser() -> Browser:
    """Headless Chromium through chromedriver, both Debian's; console messages kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ["SE_OFFLINE"] = "true"  # selenium-manager never downloads a browser or driver
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--allow-file-access-from-files",
                     f"--window-size={WIDTH},{HEIGHT}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options,
                              service=Service(executable_path=str(CHROMEDRIVER)))
    driver.set_page_load_timeout(LOAD_TIMEOUT_S)
    return Browser(driver)
