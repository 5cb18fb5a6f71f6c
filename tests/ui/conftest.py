"""Browser tests of the web monitor (/ui): a real hub process (the cargo-built
``fieldhub`` binary, $FIELDHUB_BIN), real clients (the ``fieldhub`` Python
package's python-can interface, the ``fieldhub`` CLI) and Debian's chromium
driven by Playwright ($CHROMIUM). Run by ``make test-ui``."""

import json
import os
import subprocess
import tempfile
import time
from pathlib import Path

import can
import pytest
from playwright.sync_api import sync_playwright

FIELDHUB = os.environ.get("FIELDHUB_BIN", "fieldhub")
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
#: Where the tests write the screenshots docs/monitor.md shows.
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "monitor"

CONFIG = """
[hub]
name = "ui-test"

[[channel]]
name = "can0"

[[channel]]
name = "can1"
protocol = "canfd"
data_bitrate = 2000000
"""


class RunningHub:
    """A hub process on a free loopback port, found through its ready file."""

    def __init__(self, config: str, token: str = None):
        self.dir = tempfile.TemporaryDirectory(prefix="fieldhub-ui-")
        root = Path(self.dir.name)
        (root / "hub.toml").write_text(config)
        self.recordings = root / "recordings"
        self.recordings.mkdir()
        ready = root / "ready.json"
        command = [FIELDHUB, "hub", "--config", str(root / "hub.toml"), "--listen", "127.0.0.1:0", "--no-shm",
                   "--recordings-dir", str(self.recordings), "--ready-file", str(ready)]
        env = {k: v for k, v in os.environ.items() if k not in ("FIELDHUB_TOKEN", "FIELDHUB_TOKEN_FILE")}
        if token:
            env["FIELDHUB_TOKEN"] = token
        self.token = token
        self.log = open(root / "hub.log", "w")
        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 30
        while not ready.exists():
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the hub did not start: {(root / 'hub.log').read_text()}")
            time.sleep(0.05)
        info = json.loads(ready.read_text())
        self.http = info["http"]
        self.url = f"tcp://{info['tcp'][0]}"

    def bus(self, channel: str, name: str, **options) -> can.BusABC:
        """A python-can bus on ``channel`` through a port named ``name``."""
        return can.Bus(interface="fieldhub", channel=channel, hub=self.url, port_name=name, token=self.token,
                       **options)

    def api(self, method: str, path: str, body=None):
        """One control API request, the way a test checks the page's effect."""
        import urllib.request
        request = urllib.request.Request(self.http + path, method=method,
                                         data=None if body is None else json.dumps(body).encode())
        if body is not None:
            request.add_header("content-type", "application/json")
        if self.token:
            request.add_header("authorization", f"Bearer {self.token}")
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read() or b"null")

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.log.close()
        self.dir.cleanup()


@pytest.fixture
def hub():
    running = RunningHub(CONFIG)
    yield running
    running.stop()


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


class Page:
    """The monitor open in a browser tab; console errors are collected and
    the test fails on any."""

    def __init__(self, browser, hub: RunningHub, query: str = ""):
        self.context = browser.new_context(viewport={"width": 1400, "height": 900}, accept_downloads=True)
        self.page = self.context.new_page()
        self.errors = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.goto(f"{hub.http}/ui{query}")
        self.page.wait_for_selector("body[data-ready=true]", timeout=10_000)
        self.page.wait_for_selector("#status.live", timeout=10_000)

    def tab(self, name: str):
        self.page.click(f"nav button[data-tab={name}]")

    def close(self):
        self.context.close()


@pytest.fixture
def page(browser, hub):
    opened = Page(browser, hub)
    # A test that provokes an error on purpose lists the text it expects.
    opened.page.expected_errors = []
    yield opened.page
    errors = [e for e in opened.errors if not any(x in e for x in opened.page.expected_errors)]
    opened.close()
    assert errors == [], f"console errors: {errors}"


def screenshot(page, name: str):
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"))
