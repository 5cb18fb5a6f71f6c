"""python-can's own programs and higher layers run on fieldhub unchanged."""

import os
import subprocess
import sys
import time

import can
import canopen
import pytest


def test_can_logger_and_player_work_against_a_hub(fieldhub_hub, tmp_path):
    log = tmp_path / "out.log"
    logger = subprocess.Popen(
        [sys.executable, "-m", "can.logger", "-i", "fieldhub", "-c", "can0", "-f", str(log),
         "--bus-kwargs", f"hub={fieldhub_hub.url}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 30
    while len(fieldhub_hub.clients()) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    sender = fieldhub_hub.bus("can0")
    for i in range(5):
        sender.send(can.Message(arbitration_id=0x700 + i, data=[i], is_extended_id=False))
    sender.flush_tx_buffer()
    time.sleep(0.5)
    logger.send_signal(2)
    logger.wait(30)
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
