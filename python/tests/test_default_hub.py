"""A bus given no hub URL connects as the fieldhub tools do (one function,
``fieldhub_client::connect_default``): ``$FIELDHUB_HUB``, else
``shm://default`` when the local hub serves it, and TCP with one line saying
why when that shared memory cannot be used."""

import json
import logging
import os
import socket
import subprocess
import sys

import can
import pytest


@pytest.fixture
def hub_serving_shm_default(tmp_path, monkeypatch):
    """A hub serving ``shm://default`` in a private runtime directory (this
    test's own, so no other hub competes for the name); yields (runtime
    directory, its TCP URL). The client side sees the same directory."""
    runtime = tmp_path / "runtime"
    runtime.mkdir(mode=0o700)
    env = {**os.environ, "XDG_RUNTIME_DIR": str(runtime)}
    env.pop("FIELDHUB_HUB", None)
    ready_read, ready_write = os.pipe()
    hub = subprocess.Popen(
        [sys.executable, "-m", "fieldhub", "hub", "--listen", "127.0.0.1:0", "--shm", "default",
         "--until-stdin-closes", "--ready-fd", str(ready_write)],
        stdin=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, pass_fds=(ready_write,),
    )
    os.close(ready_write)
    try:
        with os.fdopen(ready_read) as ready:
            line = ready.readline()
        assert line, "the hub did not report ready"
        url = "tcp://" + json.loads(line)["tcp"][0]
        monkeypatch.setenv("XDG_RUNTIME_DIR", str(runtime))
        monkeypatch.delenv("FIELDHUB_HUB", raising=False)
        yield runtime, url
    finally:
        hub.stdin.close()
        hub.wait(30)


def test_a_bus_given_no_hub_uses_shm_default_when_it_serves(hub_serving_shm_default, caplog):
    _, url = hub_serving_shm_default
    with caplog.at_level(logging.WARNING, logger="can.fieldhub"):
        bus = can.Bus(interface="fieldhub", channel="can0")
    try:
        assert bus.hub == "shm://default"
        assert not caplog.records, "nothing to say when shared memory serves"
    finally:
        bus.shutdown()


def test_a_bus_given_no_hub_falls_back_to_tcp_with_one_line_when_shm_default_cannot_be_used(
    hub_serving_shm_default, caplog
):
    runtime, url = hub_serving_shm_default
    watcher = can.Bus(interface="fieldhub", channel="can0", hub=url)
    # The session socket no longer leads to the hub (a killed hub's, or a
    # squatter's): connecting to it is refused; the hub's TCP listener,
    # published next to it, still serves.
    path = runtime / "fieldhub" / "default.sock"
    path.unlink()
    dead = socket.socket(socket.AF_UNIX)
    dead.bind(str(path))
    dead.close()
    try:
        with caplog.at_level(logging.WARNING, logger="can.fieldhub"):
            bus = can.Bus(interface="fieldhub", channel="can0")
        try:
            assert bus.hub == url, "the bus names the hub it reached"
            lines = [r.getMessage() for r in caplog.records if r.name == "can.fieldhub"]
            assert len(lines) == 1, lines
            assert lines[0].startswith("fieldhub: shm://default cannot be used (") and lines[0].endswith(
                f"; using {url} instead"
            ), lines[0]
            bus.send(can.Message(arbitration_id=0x123, data=b"\xfa\x11", is_extended_id=False))
            got = watcher.recv(10)
            assert got is not None and (got.arbitration_id, bytes(got.data)) == (0x123, b"\xfa\x11")
        finally:
            bus.shutdown()
    finally:
        watcher.shutdown()
