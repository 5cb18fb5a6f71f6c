"""The ``fieldhub`` command the package installs: the same tools as the
binary, with nothing but ``pip install fieldhub``."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

#: The script pip wrote next to this interpreter.
FIELDHUB = Path(sys.executable).parent / "fieldhub"


def run(*args, **options):
    return subprocess.run([str(FIELDHUB), *args], capture_output=True, text=True, timeout=60, **options)


def test_the_script_is_installed_and_lists_every_tool():
    assert FIELDHUB.exists(), f"pip installed no fieldhub script next to {sys.executable}"
    out = run("--help")
    assert out.returncode == 0, out.stderr
    tools = ("hub", "dump", "send", "gen", "stats", "top", "record", "replay", "convert", "isotp", "ctl",
             "frame-bits", "bench", "bridge", "rbs")
    for tool in tools:
        assert f"\n  {tool} " in out.stdout, f"{tool} missing from:\n{out.stdout}"


def test_tools_work_as_the_binarys_do():
    out = run("frame-bits", "123#DEADBEEF")
    assert out.returncode == 0 and ": 81 bits" in out.stdout, out
    bad = run("send", "can0", "123#XYZ")
    assert bad.returncode == 1 and "error:" in bad.stderr, bad
    usage = run("dump", "--no-such-option")
    assert usage.returncode == 2 and "--no-such-option" in usage.stderr, usage


def test_a_hub_started_by_the_script_carries_what_its_send_sends_to_its_dump(tmp_path):
    ready = tmp_path / "ready.json"
    hub = subprocess.Popen(
        [str(FIELDHUB), "hub", "--quiet", "--no-shm", "--listen", "127.0.0.1:0", "--ready-file", str(ready)],
        stderr=subprocess.PIPE, text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not ready.exists():
            assert hub.poll() is None and time.monotonic() < deadline, hub.stderr.read() if hub.poll() else "no ready file"
            time.sleep(0.05)
        url = "tcp://" + json.loads(ready.read_text())["tcp"][0]
        dump = subprocess.Popen([str(FIELDHUB), "dump", "--hub", url, "-n", "3", "-L", "can0"],
                                stdout=subprocess.PIPE, text=True)
        # Frames sent before dump's port is open are not dump's to see.
        while '"dump.' not in run("ctl", "--hub", url, "ports").stdout:
            assert dump.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        for n in range(3):
            sent = run("send", "--hub", url, "can0", f"12{n}#0{n}")
            assert sent.returncode == 0, sent.stderr
        lines, _ = dump.communicate(timeout=60)
        assert [line.split()[-1] for line in lines.splitlines()] == ["120#00", "121#01", "122#02"]
    finally:
        hub.send_signal(signal.SIGTERM)
        assert hub.wait(timeout=60) == 0
