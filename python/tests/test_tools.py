"""python-can's own programs and higher layers run on fieldhub unchanged."""

import fcntl
import os
import pty
import re
import select
import signal
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import can
import canopen
import pytest


LOGGER_WITH_SIGINT = (
    "import runpy, signal, sys; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "sys.argv[0] = 'can.logger'; runpy.run_module('can.logger', run_name='__main__')"
)


def start_can_logger(hub, log, *options, ready=lambda ports: len(ports) >= 1):
    """`python -m can.logger` on can0 of `hub`, writing `log`; returns once
    `ready` holds for the hub's ports (by default: its port is open), as
    frames sent before that are not the logger's to record. It stops on
    SIGINT: a test run started in the background inherits SIGINT ignored, so
    the logger gets Python's handler."""
    logger = subprocess.Popen(
        [sys.executable, "-c", LOGGER_WITH_SIGINT, "-i", "fieldhub", "-c", "can0", *options, "-f", str(log),
         "--bus-kwargs", f"hub={hub.url}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while not ready(hub.ports()) and time.monotonic() < deadline:
        time.sleep(0.05)
    return logger


def test_can_logger_and_player_work_against_a_hub(fieldhub_hub, tmp_path):
    log = tmp_path / "out.log"
    logger = start_can_logger(fieldhub_hub, log)
    sender = fieldhub_hub.bus("can0")
    for i in range(5):
        sender.send(can.Message(arbitration_id=0x700 + i, data=[i], is_extended_id=False))
    sender.flush_tx_buffer()
    time.sleep(0.5)
    logger.send_signal(signal.SIGINT)
    assert logger.wait(30) == 0, logger.stderr.read()
    recorded = list(can.LogReader(str(log)))
    assert [m.arbitration_id for m in recorded] == [0x700 + i for i in range(5)]

    listener = fieldhub_hub.bus("can1")
    player = subprocess.run(
        [sys.executable, "-m", "can.player", "-i", "fieldhub", "-c", "can1", "--ignore-timestamps", str(log)],
        capture_output=True, timeout=60, env={**os.environ, "FIELDHUB_HUB": fieldhub_hub.url},
    )
    assert player.returncode == 0, player.stderr
    replayed = [listener.recv(5) for _ in range(5)]
    assert [m.arbitration_id for m in replayed] == [0x700 + i for i in range(5)]


def test_can_logger_passive_records_as_a_listen_only_node(fieldhub_hub, tmp_path):
    log = tmp_path / "passive.log"
    # --passive sets the state after opening: wait for the listen-only port.
    logger = start_can_logger(fieldhub_hub, log, "--passive", ready=lambda ports: any(p["listen_only"] for p in ports))
    sender = fieldhub_hub.bus("can0")
    for i in range(50):
        sender.send(can.Message(arbitration_id=0x600, data=i.to_bytes(2, "little"), is_extended_id=False))
    sender.flush_tx_buffer()
    time.sleep(0.5)
    (port,) = [p for p in fieldhub_hub.ports() if p["listen_only"]]
    assert port["tx_frames"] == 0
    logger.send_signal(signal.SIGINT)
    assert logger.wait(30) == 0, logger.stderr.read()
    recorded = list(can.LogReader(str(log)))
    assert [int.from_bytes(m.data, "little") for m in recorded] == list(range(50))


def test_canopen_sdo_upload_and_download_of_a_segmented_value(fieldhub_hub):
    server_bus, client_bus = fieldhub_hub.bus("can0"), fieldhub_hub.bus("can0")
    server_net, client_net = canopen.Network(server_bus), canopen.Network(client_bus)
    server_net.connect()
    client_net.connect()
    try:
        dictionary = canopen.ObjectDictionary()
        name = canopen.objectdictionary.ODVariable("Device name", 0x1008)
        name.data_type = canopen.objectdictionary.VISIBLE_STRING
        name.access_type = "rw"
        dictionary.add_object(name)
        local = canopen.LocalNode(5, dictionary)
        server_net.add_node(local)
        local.sdo["Device name"].raw = "fieldhub virtual ECU"
        remote = canopen.RemoteNode(5, dictionary)
        client_net.add_node(remote)
        # Longer than 4 bytes: a segmented transfer both ways.
        assert remote.sdo["Device name"].raw == "fieldhub virtual ECU"
        remote.sdo["Device name"].raw = "renamed over a fieldhub bus"
        assert local.sdo["Device name"].raw == "renamed over a fieldhub bus"
    finally:
        server_net.disconnect()
        client_net.disconnect()


def test_can_viewer_shows_frames_from_a_hub(fieldhub_hub):
    controller, terminal = pty.openpty()
    fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 120, 0, 0))
    viewer = subprocess.Popen(
        [sys.executable, "-m", "can.viewer", "-i", "fieldhub", "-c", "can0"],
        stdin=terminal, stdout=terminal, stderr=terminal, close_fds=True,
        env={**os.environ, "FIELDHUB_HUB": fieldhub_hub.url, "TERM": "xterm"},
    )
    os.close(terminal)
    screen = b""
    try:
        deadline = time.monotonic() + 30
        # The viewer's port, not just its connection (see the logger test).
        while len(fieldhub_hub.ports()) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        with fieldhub_hub.bus("can0") as sender:
            sender.send(can.Message(arbitration_id=0x5A5, data=[0xDE, 0xAD], is_extended_id=False))
            while b"0x5A5" not in screen and time.monotonic() < deadline:
                if select.select([controller], [], [], 0.5)[0]:
                    screen += os.read(controller, 65536)
        assert b"0x5A5" in screen, screen[-2000:]
        os.write(controller, b"q")
        assert viewer.wait(30) == 0
    finally:
        viewer.kill()
        viewer.wait(30)
        os.close(controller)


def test_readme_example_runs(tmp_path):
    readme = (Path(__file__).parent.parent / "README.md").read_text()
    example = readme.split("```python\n", 1)[1].split("```", 1)[0]
    script = tmp_path / "example.py"
    script.write_text(example)
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert re.search(r"ID:\s+7e0\s+S Rx\s+DL:\s+3\s+02 10 01", run.stdout), run.stdout
    assert "1 frame(s) on can0; fault rule 1" in run.stdout
