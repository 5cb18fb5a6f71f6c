"""A private hub is found through its ready line (``--ready-fd``), not its
log: it starts whatever ``FIELDHUB_LOG`` says."""

import json
import os
import subprocess
import sys

import can

import fieldhub

#: The fields of `fieldhub hub --ready-fd`'s line (docs/configuration.md).
READY_FIELDS = {"tcp", "unix", "http", "tls", "shm", "ivshmem", "channels", "cannelloni", "pid"}


def test_a_private_hub_starts_and_carries_frames_with_the_log_at_warn(monkeypatch):
    monkeypatch.setenv("FIELDHUB_LOG", "warn")
    with fieldhub.Hub() as hub:
        assert hub.url.startswith("tcp://127.0.0.1:") and not hub.url.endswith(":0")
        assert hub.shm_url.startswith("shm://py-")
        a, b = hub.bus("can0"), hub.bus("can0")
        try:
            a.send(can.Message(arbitration_id=0x123, data=[1, 2, 3], is_extended_id=False))
            got = b.recv(30)
            assert got is not None and got.arbitration_id == 0x123 and got.data == bytearray([1, 2, 3])
            assert [c["name"] for c in hub.channels()] == ["can0", "can1"]
        finally:
            a.shutdown()
            b.shutdown()


def test_python_m_fieldhub_hub_writes_one_ready_line_and_closes_the_fd():
    read_end, write_end = os.pipe()
    hub = subprocess.Popen(
        [sys.executable, "-m", "fieldhub", "hub", "--no-shm", "--listen", "127.0.0.1:0", "--ready-fd", str(write_end)],
        pass_fds=(write_end,), stderr=subprocess.DEVNULL,
    )
    os.close(write_end)
    try:
        with os.fdopen(read_end, "rb") as pipe:
            text = pipe.read().decode()  # to end of file: the hub closed its end
        assert text.endswith("\n") and text.count("\n") == 1, text
        ready = json.loads(text)
        assert set(ready) == READY_FIELDS
        assert ready["pid"] == hub.pid and ready["shm"] is None and ready["unix"] == []
        assert ready["http"] == f"http://{ready['tcp'][0]}"
        assert ready["channels"] == ["can0", "can1"]
    finally:
        hub.terminate()
        assert hub.wait(30) == 0


def test_a_ready_fd_that_is_not_open_is_refused_naming_the_flag():
    done = subprocess.run(
        [sys.executable, "-m", "fieldhub", "hub", "--no-shm", "--listen", "127.0.0.1:0", "--ready-fd", "999"],
        capture_output=True, text=True, timeout=60,
    )
    assert done.returncode != 0
    assert "--ready-fd 999: no such open file descriptor" in done.stderr, done.stderr
