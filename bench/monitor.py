"""What an open web monitor costs the hub's other clients.

Each run times N frames from `fieldhub gen` to a lossless `fieldhub dump` on
the same channel over shared memory, once with no page open and once with
the monitor (/ui, trace view, all channels) open in headless Chromium, and
prints the throughputs and their ratio — at the rate the issue names
(200,000 frames/s offered: the lossless client should still get them all at
that rate) and as fast as the bus takes them (`-g 0`: the hub's ceiling). The monitor is a lossy tap the bus never waits for, so the ratio
should stay near 1; on a small machine the browser's own CPU use is part of
what it measures, so a third series reads the WebSocket from a thread of
this script instead (the hub's own cost of a monitor). A benchmark, not a test: it prints figures and asserts
nothing.

    .venv/bin/python bench/monitor.py [--fieldhub target/release/fieldhub] [--frames 500000] [--runs 3]

Needs Playwright in the Python environment (`make ui-env` installs it) and
Debian's chromium at /usr/bin/chromium.
"""

import argparse
import base64
import json
import os
import socket
import statistics
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from playwright.sync_api import sync_playwright

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]


def start_hub(fieldhub, workdir, name):
    ready = Path(workdir) / f"{name}.ready"
    hub = subprocess.Popen([fieldhub, "hub", "--listen", "127.0.0.1:0", "--shm", name, "--ready-file", str(ready)],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while not ready.exists():
        if hub.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the hub did not start")
        time.sleep(0.05)
    return hub, json.loads(ready.read_text())


class RawMonitor:
    """The monitor's WebSocket read and thrown away by a thread of this
    process: the hub's side of a monitor without a browser's CPU use."""

    def __init__(self, http):
        host, port = http.removeprefix("http://").rsplit(":", 1)
        self.socket = socket.create_connection((host, int(port)))
        key = base64.b64encode(os.urandom(16)).decode()
        self.socket.sendall((f"GET /api/v1/monitor HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                             f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                             "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        if not self.socket.recv(4096).startswith(b"HTTP/1.1 101"):
            raise SystemExit("the hub refused the monitor's WebSocket")
        self.bytes = 0
        self.reader = threading.Thread(target=self.drain, daemon=True)
        self.reader.start()

    def drain(self):
        while chunk := self.socket.recv(1 << 16):
            self.bytes += len(chunk)

    def close(self):
        self.socket.close()


def one_run(fieldhub, frames, gap_ms, monitor, workdir, run):
    """Frames per second the lossless client received: `monitor` is None, a
    browser (the page open), or RawMonitor (the WebSocket only)."""
    name = f"bench-monitor-{os.getpid()}-{run}"
    hub, info = start_hub(fieldhub, workdir, name)
    page = raw = None
    try:
        if monitor is RawMonitor:
            raw = RawMonitor(info["http"])
        elif monitor is not None:
            page = monitor.new_page()
            page.goto(f"{info['http']}/ui")
            page.wait_for_selector("#status.live", timeout=10_000)
        url = info["shm"]
        dump = subprocess.Popen([fieldhub, "dump", "--hub", url, "--lossless", "-n", str(frames), "can0"],
                                stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        started = time.monotonic()
        subprocess.run([fieldhub, "gen", "--hub", url, "-g", str(gap_ms), "-I", "r", "-L", "8", "-D", "i",
                        "-n", str(frames), "can0"], check=True)
        dump.wait(600)
        elapsed = time.monotonic() - started
        not_drawn = page.inner_text("#not-drawn") if page else "-"
        return frames / elapsed, not_drawn
    finally:
        if page:
            page.close()
        if raw:
            raw.close()
        hub.terminate()
        hub.wait(10)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fieldhub", default="target/release/fieldhub")
    parser.add_argument("--frames", type=int, default=500_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    args = parser.parse_args()
    print(f"load before: {open('/proc/loadavg').read().strip()}")
    modes = [("200,000 frames/s offered", 0.005), ("as fast as the bus takes them", 0)]
    results = {name: ([], [], []) for name, _ in modes}
    with tempfile.TemporaryDirectory() as workdir, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        for run in range(args.runs):
            for name, gap_ms in modes:
                without, with_socket, with_page = results[name]
                # Interleaved, so a machine that slows down over time weighs on all.
                without.append(one_run(args.fieldhub, args.frames, gap_ms, None, workdir, run)[0])
                with_socket.append(one_run(args.fieldhub, args.frames, gap_ms, RawMonitor, workdir, run)[0])
                rate, not_drawn = one_run(args.fieldhub, args.frames, gap_ms, browser, workdir, run)
                with_page.append(rate)
                print(f"run {run + 1}, {name}: {without[-1]:>10,.0f} frames/s without a monitor, "
                      f"{with_socket[-1]:>10,.0f} with its WebSocket read by a script, "
                      f"{with_page[-1]:>10,.0f} with the page open (not drawn: {not_drawn})")
        browser.close()
    for name, (without, with_socket, with_page) in results.items():
        a, b, c = (statistics.median(x) for x in (without, with_socket, with_page))
        print(f"median, {name}: {a:,.0f} frames/s without a monitor; WebSocket only {b:,.0f} "
              f"(ratio {b / a:.3f}); page open {c:,.0f} (ratio {c / a:.3f})")
    print(f"load after: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
