"""The dashboard: what the steward and an analyst see (HTML), and a real browser (Debian's
chromium, driven by Selenium with the system chromedriver) logging in, running the page's
script and drawing the spending plot."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from dpcurator.client import Client
from dpcurator.service import STEWARD

from .conftest import LiveServer

COUNT = "SELECT region, COUNT(*) AS n FROM people GROUP BY region"
HOSTILE = "SELECT COUNT(*) FROM people WHERE region = '<script>alert(1)</script>'"


@pytest.fixture
def busy(live: Callable[..., LiveServer]) -> LiveServer:
    server = live(analysts={"ann": {"people": 0.5}, "bob": {"people": 1.0}})
    with Client(server.url, server.key("ann")) as ann, Client(server.url, server.key("bob")) as bob:
        ann.sql(COUNT, epsilon=0.25)
        ann.sql(HOSTILE, epsilon=0.25)
        bob.sql(COUNT, epsilon=0.5)
        with pytest.raises(Exception, match="Refused"):
            ann.sql(COUNT, epsilon=0.25)
    return server


def _page(server: LiveServer, key: str) -> str:
    with httpx.Client(base_url=server.url, follow_redirects=True) as browser:
        response = browser.post("/login", data={"key": key})
        assert response.status_code == 200 and response.url.path == "/dashboard"
        return response.text


def test_the_steward_sees_every_analyst_refusals_and_the_audit_trail(busy: LiveServer) -> None:
    page = _page(busy, busy.key(STEWARD))
    for part in ("id='analysts'", "id='refusals'", "id='audit'", "id='spending-plot'"):
        assert part in page
    assert "ann/people" in page and "bob/people" in page
    assert "<script>alert(1)</script>" not in page and "&lt;script&gt;alert(1)" in page


def test_an_analyst_sees_only_their_own(busy: LiveServer) -> None:
    page = _page(busy, busy.key("bob"))
    assert "analyst bob" in page and "id='spending-plot'" in page
    assert "ann" not in page and "id='refusals'" not in page and "id='audit'" not in page


def test_a_bad_key_stays_on_the_login_page(busy: LiveServer) -> None:
    response = httpx.post(busy.url + "/login", data={"key": "dpk_nope"})
    assert response.status_code == 401 and "unknown or revoked" in response.text
    assert httpx.get(busy.url + "/dashboard").headers["location"] == "/login"


@pytest.fixture
def chrome() -> Iterator[object]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    browser_path = shutil.which("chromium") or "/usr/bin/chromium"
    driver_path = shutil.which("chromedriver") or "/usr/bin/chromedriver"
    options = webdriver.ChromeOptions()
    options.binary_location = browser_path
    for argument in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--disable-gpu",
        "--window-size=1200,1600",
    ):
        options.add_argument(argument)
    driver = webdriver.Chrome(service=Service(executable_path=driver_path), options=options)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.mark.slow
def test_a_real_browser_logs_in_runs_the_script_and_draws_the_plot(
    busy: LiveServer, chrome: object, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    d: Any = chrome
    d.get(busy.url + "/dashboard")
    assert d.current_url.endswith("/login")
    d.find_element(By.ID, "key").send_keys(busy.key("bob"))
    d.find_element(By.ID, "login").click()
    status = WebDriverWait(d, 60).until(  # bounded: the script refreshes on load
        lambda drv: (
            drv.find_element(By.ID, "live-status")
            if drv.find_element(By.ID, "live-status").get_attribute("data-state") == "live"
            else False
        )
    )
    assert status.text.startswith("live")
    lines = d.find_elements(By.CSS_SELECTOR, "#spending-plot polyline.series")
    assert len(lines) == 1
    remaining = d.find_element(By.CSS_SELECTOR, "[data-remaining='people']").text
    assert float(remaining) == 0.5
    shot = tmp_path / "dashboard.png"
    assert d.save_screenshot(str(shot)) and shot.stat().st_size > 10_000
