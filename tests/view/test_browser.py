"""A real headless Chromium (Debian's `chromium` + `chromium-driver`, through selenium).

It loads the report from `file://` and the pages of a real `sessionstore view`,
and each test asserts what is rendered and that the console logged no error;
screenshots are saved beside the test's files. Set `SESSIONSTORE_SCREENSHOTS`
to a directory to keep the demo session's screenshots there (docs/viewer.md
shows them: `SESSIONSTORE_SCREENSHOTS=docs/img python -m pytest
tests/view/test_browser.py -k demo`). Without Chromium these tests fail and
say how to install it: they are never skipped.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runner import run
from inspect_helpers import metrics, trial
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.chrome.webdriver import WebDriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait
from view_helpers import rich_session, viewer

from sessionstore.store.session import Store

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1200,900",
)


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if shutil.which(p) is None]
    if missing:
        pytest.fail(
            f"{' and '.join(missing)} missing: the browser tests need Debian's Chromium; "
            "install it with `apt-get install -y chromium chromium-driver` (.ci/run does)",
            pytrace=False,
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # The driver is given: selenium must not look for (or download) one of its own.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("SE_OFFLINE", "true")
        driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def console_errors(driver: WebDriver) -> list[dict[str, object]]:
    """The errors the console logged since the last call (each call drains the log)."""
    entries: list[dict[str, object]] = driver.get_log("browser")  # type: ignore[no-untyped-call]  # selenium leaves it unannotated
    return [e for e in entries if e["level"] in ("SEVERE", "ERROR")]


def _load(driver: WebDriver, url: str, shot: Path) -> str:
    """Load `url`, save a screenshot, check the console; the page's rendered text."""
    console_errors(driver)  # drop what earlier pages logged
    driver.get(url)
    WebDriverWait(driver, 20).until(
        lambda d: d.execute_script("return document.readyState") == "complete"
    )
    assert driver.save_screenshot(str(shot)) and shot.stat().st_size > 1000
    errors = console_errors(driver)
    assert errors == [], errors
    return driver.find_element(By.TAG_NAME, "body").text


def _column(driver: WebDriver, table: str, index: int) -> list[str]:
    cells = driver.find_elements(By.CSS_SELECTOR, f"table.{table} tbody tr td:nth-child({index})")
    return [c.text for c in cells]


def _column_across_reload(driver: WebDriver, table: str, index: int) -> list[str] | None:
    """`_column`, or None when the page reloaded between finding a cell and reading it.

    Chromedriver reports that as a stale element, or (seen in CI, under load) as an
    "unhandled inspector error" that the node no longer belongs to the document.
    """
    try:
        return _column(driver, table, index)
    except StaleElementReferenceException:
        return None
    except WebDriverException as exc:
        if "does not belong to the document" in str(exc):
            return None
        raise


def test_report_from_file_renders_sorts_and_works_without_js(
    browser: WebDriver, tmp_path: Path
) -> None:
    store = Store(tmp_path / "store")
    rich_session(store)
    out = tmp_path / "report.html"
    assert run("report", "rich0001", "--store", store.root, "-o", out).returncode == 0
    text = _load(browser, out.as_uri(), tmp_path / "report.png")
    assert "#1 output_tok_per_s = 950.5" in text
    assert "<script>alert('pwned')</script>" in text  # shown as text, never run
    assert _column(browser, "trials", 2) == ["completed", "completed", "torn", "in_flight"]
    # Sorting by the objective (click twice: descending) puts trial 2 first.
    header = browser.find_element(By.CSS_SELECTOR, "table.trials th:nth-child(3)")
    header.click()
    header.click()
    assert _column(browser, "trials", 1)[:2] == ["2", "1"]
    circles = browser.find_elements(By.CSS_SELECTOR, "svg circle")
    assert len(circles) == 4 and circles[0].is_displayed()
    browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": True})
    try:
        text = _load(browser, out.as_uri(), tmp_path / "report-nojs.png")
    finally:
        browser.execute_cdp_cmd("Emulation.setScriptExecutionDisabled", {"value": False})
    assert "Verification attempts" in text and "best #1" in text


def test_view_pages_render_and_a_running_session_updates_itself(
    browser: WebDriver, tmp_path: Path
) -> None:
    store = Store(tmp_path / "store")
    session = rich_session(store)
    with viewer(store.root) as view:
        text = _load(browser, view.url, tmp_path / "list.png")
        assert "rich0001" in text and "verified (2/6)" in text
        text = _load(browser, f"{view.url}s/rich0001/trials/1", tmp_path / "record.png")
        assert "PASS" in text and "blob.bin" in text and "download" in text
        _load(browser, f"{view.url}s/rich0001", tmp_path / "session.png")
        assert _column(browser, "trials", 2)[-1] == "in_flight"
        # The agent completes a trial: the open page shows it without being told.
        trial(session, metrics(999.0, 120.0))
        # The page reloads itself when the record lands: a cell read across that reload
        # is stale, and the next poll reads the new page.
        WebDriverWait(browser, 30, poll_frequency=0.5).until(
            lambda d: (_column_across_reload(d, "trials", 2) or [])[-1:] == ["completed"]
        )
        assert _column(browser, "trials", 1)[-1] == "5"
        errors = console_errors(browser)
        assert errors == [], errors
        browser.get("about:blank")  # no live page left polling a stopped server


def test_demo_session_screenshots(browser: WebDriver, tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert run("demo", "--store", store, timeout=120).returncode == 0
    (session,) = Store(store).sessions()
    keep = os.environ.get("SESSIONSTORE_SCREENSHOTS")
    with viewer(store) as view:
        pages = {  # name: (path, window height: the page's length, no blank below)
            "viewer-sessions.png": ("", 300),
            "viewer-session.png": (f"s/{session.key}", 1150),
            "viewer-trial.png": (f"s/{session.key}/trials/2?against=1", 1000),
        }
        for name, (path, height) in pages.items():
            browser.set_window_size(1200, height)
            text = _load(browser, view.url + path, tmp_path / name)
            assert "demo: tune fake-7b" in text or "trial 2" in text
            if keep:
                shutil.copyfile(tmp_path / name, Path(keep) / name)
        # Leave the live page before its server stops: a poll it sent meanwhile would
        # log a refused connection, which the report's page check below would see.
        browser.get("about:blank")
    out = tmp_path / "report.html"
    assert run("report", session.key, "--store", store, "-o", out).returncode == 0
    text = _load(browser, out.as_uri(), tmp_path / "viewer-report.png")
    assert "best #1" in text
    browser.set_window_size(1200, 900)
