"""What an open web monitor costs the hub's other clients.

Each run times N frames from `fieldhub gen -g 0` (as fast as the bus takes
them) to a lossless `fieldhub dump` on the same channel over shared memory,
once with no page open and once with the monitor (/ui, trace view, all
channels) open in headless Chromium, and prints the throughputs and their
ratio. The monitor is a lossy tap the bus never waits for, so the ratio
should stay near 1; on a small machine the browser's own CPU use is part of
what it measures. A benchmark, not a test: it prints figures and asserts
nothing.

    .venv/bin/python bench/monitor.py [--fieldhub target/release/fieldhub] [--frames 500000] [--runs 3]

Needs Playwright in the Python environment (`make ui-env` installs it) and
Debian's chromium at /usr/bin/chromium.
"""

import argparse
import json
import os
import statistics
import subprocess
import tempfile
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


def one_run(fieldhub, frames, browser, workdir, run):
    """Frames per second the lossless client received, with or without a page."""
    name = f"bench-monitor-{os.getpid()}-{run}-{'page' if browser else 'none'}"
    hub, info = start_hub(fieldhub, workdir, name)
    page = None
    try:
        if browser:
            page = browser.new_page()
            page.goto(f"{info['http']}/ui")
            page.wait_for_selector("#status.live", timeout=10_000)
        url = info["shm"]
        dump = subprocess.Popen([fieldhub, "dump", "--hub", url, "--lossless", "-n", str(frames), "can0"],
                                stdout=subprocess.DEVNULL)
        time.sleep(0.5)
        started = time.monotonic()
        subprocess.run([fieldhub, "gen", "--hub", url, "-g", "0", "-I", "123", "-L", "8", "-D", "i",
                        "-n", str(frames), "can0"], check=True)
        dump.wait(600)
        elapsed = time.monotonic() - started
        not_drawn = page.inner_text("#not-drawn") if page else "-"
        return frames / elapsed, not_drawn
    finally:
        if page:
            page.close()
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
    without, with_page = [], []
    with tempfile.TemporaryDirectory() as workdir, sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=CHROMIUM_ARGS)
        for run in range(args.runs):
            # Alternate, so a machine that slows down over time weighs on both.
            rate, _ = one_run(args.fieldhub, args.frames, None, workdir, run)
            without.append(rate)
            rate, not_drawn = one_run(args.fieldhub, args.frames, browser, workdir, run)
            with_page.append(rate)
            print(f"run {run + 1}: {without[-1]:>10,.0f} frames/s without the monitor, "
                  f"{with_page[-1]:>10,.0f} with it open (not drawn: {not_drawn})")
        browser.close()
    a, b = statistics.median(without), statistics.median(with_page)
    print(f"median: {a:,.0f} frames/s without, {b:,.0f} with the monitor open; ratio {b / a:.3f}")
    print(f"load after: {open('/proc/loadavg').read().strip()}")


if __name__ == "__main__":
    main()
