"""Real third-party programs over a hub, as users run them: can-isotp,
udsoncan, canopen (PDO, heartbeat), cantools, python-can's logger and player
through BLF and ASC, and the C library's poll() reader beside a Python
sender."""

import os
import signal
import subprocess
import sys
import threading
import time

import can
import canopen
import cantools
import isotp
import pytest
import udsoncan
from udsoncan.client import Client
from udsoncan.connections import PythonIsoTpConnection

from test_tools import start_can_logger

CHANNELS = """
[[channel]]
name = "can0"

[[channel]]
name = "can1"

[[channel]]
name = "fd0"
protocol = "canfd"
"""

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def isotp_stack(bus, notifier, txid, rxid, fd):
    params = {
        "tx_data_length": 64 if fd else 8,
        "can_fd": fd,
        "max_frame_size": 1 << 20,
        "stmin": 0,
        "blocksize": 0,
        "rx_flowcontrol_timeout": 5000,
        "rx_consecutive_frame_timeout": 5000,
    }
    address = isotp.Address(isotp.AddressingMode.Normal_11bits, txid=txid, rxid=rxid)
    return isotp.NotifierBasedCanStack(bus, notifier, address=address, params=params)


class IsoTpPair:
    """A tester and an ECU talking ISO-TP over one channel."""

    def __init__(self, hub, channel, fd):
        self.buses = [hub.bus(channel, fd=fd), hub.bus(channel, fd=fd)]
        self.notifiers = [can.Notifier(bus, [], timeout=0.05) for bus in self.buses]
        self.tester = isotp_stack(self.buses[0], self.notifiers[0], 0x7E0, 0x7E8, fd)
        self.ecu = isotp_stack(self.buses[1], self.notifiers[1], 0x7E8, 0x7E0, fd)

    def close(self):
        for stack in (self.tester, self.ecu):
            stack.stop()
        for notifier in self.notifiers:
            notifier.stop()


def transfer(sender, receiver, payload):
    sender.send(payload)
    got = receiver.recv(block=True, timeout=60)
    assert got == payload, f"{len(payload)} bytes sent, {None if got is None else len(got)} received"


@pytest.mark.fieldhub_config(CHANNELS)
@pytest.mark.parametrize("channel, fd, size", [("can0", False, 4095), ("fd0", True, 60000)])
def test_isotp_carries_the_largest_messages_both_ways(fieldhub_hub, channel, fd, size):
    pair = IsoTpPair(fieldhub_hub, channel, fd)
    try:
        pair.tester.start()
        pair.ecu.start()
        payload = bytes((i * 7 + 3) % 256 for i in range(size))
        transfer(pair.tester, pair.ecu, payload)
        transfer(pair.ecu, pair.tester, payload[::-1])
    finally:
        pair.close()
    assert all(bus.rx_dropped == 0 for bus in pair.buses)


@pytest.mark.fieldhub_config(CHANNELS)
def test_a_udsoncan_client_reads_the_vin_of_an_ecu(fieldhub_hub):
    vin = b"WF0XXXGCDX1234567"
    pair = IsoTpPair(fieldhub_hub, "can0", False)
    pair.ecu.start()
    served = []

    def serve():
        # ReadDataByIdentifier (0x22) F190 -> positive response 0x62 F190 VIN;
        # anything else: serviceNotSupported.
        while not served:
            request = pair.ecu.recv(block=True, timeout=0.1)
            if request is None:
                continue
            if bytes(request[:3]) == b"\x22\xf1\x90":
                pair.ecu.send(b"\x62\xf1\x90" + vin)
                served.append(bytes(request))
            else:
                pair.ecu.send(bytes([0x7F, request[0], 0x11]))

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    config = dict(udsoncan.configs.default_client_config)
    config["data_identifiers"] = {0xF190: udsoncan.AsciiCodec(len(vin))}
    try:
        with Client(PythonIsoTpConnection(pair.tester), request_timeout=10, config=config) as client:
            response = client.read_data_by_identifier(0xF190)
        assert response.service_data.values[0xF190] == vin.decode()
    finally:
        served.append(None)
        server.join(5)
        pair.close()


def pdo_dictionary():
    """An object dictionary with a counter at 0x6000 and TPDO1's
    communication (0x1800) and mapping (0x1A00) records."""
    od = canopen.objectdictionary
    dictionary = od.ObjectDictionary()
    counter = od.ODVariable("Counter", 0x6000)
    counter.data_type = od.UNSIGNED16
    dictionary.add_object(counter)
    for index, name, fields in [
        (0x1800, "TPDO1 communication", [("COB-ID", od.UNSIGNED32), ("Transmission type", od.UNSIGNED8)]),
        (0x1A00, "TPDO1 mapping", [("Mapped object 1", od.UNSIGNED32)]),
    ]:
        record = od.ODRecord(name, index)
        count = od.ODVariable("Number of entries", index, 0)
        count.data_type = od.UNSIGNED8
        record.add_member(count)
        for subindex, (field, data_type) in enumerate(fields, start=1):
            member = od.ODVariable(field, index, subindex)
            member.data_type = data_type
            record.add_member(member)
        dictionary.add_object(record)
    return dictionary


def test_canopen_heartbeat_sync_and_a_tpdo_decoded_by_canopen(fieldhub_hub):
    device_bus, master_bus = fieldhub_hub.bus("can0"), fieldhub_hub.bus("can0")
    device_net, master_net = canopen.Network(device_bus), canopen.Network(master_bus)
    device_net.connect()
    master_net.connect()
    dictionary = pdo_dictionary()
    try:
        device = canopen.LocalNode(7, dictionary)
        device_net.add_node(device)
        master = canopen.RemoteNode(7, dictionary)
        master_net.add_node(master)
        # The device's heartbeat, produced by canopen, seen by the master.
        device.nmt.state = "OPERATIONAL"
        device.nmt.start_heartbeat(20)
        assert master.nmt.wait_for_heartbeat(timeout=5) == "OPERATIONAL"
        # A synchronous TPDO1: the device answers each SYNC with its counter;
        # the master decodes it with canopen's PDO map.
        sent = []

        def on_sync(cob_id, data, timestamp):
            sent.append(len(sent) + 1)
            device_net.send_message(0x187, sent[-1].to_bytes(2, "little"))

        device_net.subscribe(0x80, on_sync)
        tpdo = master.tpdo[1]
        tpdo.clear()
        tpdo.add_variable(0x6000)
        tpdo.cob_id = 0x187
        tpdo.trans_type = 1
        tpdo.enabled = True
        tpdo.subscribe()
        seen = []
        for _ in range(20):
            master_net.sync.transmit()
            tpdo.wait_for_reception(timeout=5)
            seen.append(tpdo["Counter"].raw)
        assert seen == list(range(1, 21))
    finally:
        device_net.disconnect()
        master_net.disconnect()


DBC = """VERSION ""

NS_ :

BS_:

BU_: ECU TESTER

BO_ 291 Engine: 8 ECU
 SG_ Rpm : 0|16@1+ (0.25,0) [0|16383.75] "rpm" TESTER
 SG_ CoolantTemp : 16|8@1+ (1,-40) [-40|215] "degC" TESTER
 SG_ Torque : 31|12@0- (0.5,0) [-1024|1023.5] "Nm" TESTER
"""


def test_cantools_decodes_frames_received_from_the_hub(fieldhub_hub):
    db = cantools.database.load_string(DBC, "dbc")
    engine = db.get_message_by_name("Engine")
    ecu, tester = fieldhub_hub.bus("can0"), fieldhub_hub.bus("can0")
    sent = [{"Rpm": 800 + 12.25 * n, "CoolantTemp": n - 40, "Torque": -100 + 3.5 * n} for n in range(50)]
    for values in sent:
        ecu.send(can.Message(arbitration_id=engine.frame_id, data=engine.encode(values), is_extended_id=False))
    for values in sent:
        message = tester.recv(5)
        assert db.decode_message(message.arbitration_id, message.data) == values


@pytest.mark.fieldhub_config(CHANNELS)
@pytest.mark.parametrize("suffix", ["blf", "asc"])
def test_can_logger_and_player_round_trip_through_blf_and_asc(fieldhub_hub, tmp_path, suffix):
    log = tmp_path / f"session.{suffix}"
    logger = start_can_logger(fieldhub_hub, log)
    sender = fieldhub_hub.bus("can0")
    sent = [
        can.Message(arbitration_id=0x100 + n % 7 if n % 3 else 0x18DA00F1 + n, is_extended_id=n % 3 == 0,
                    data=n.to_bytes(2, "little") + bytes(n % 7))
        for n in range(200)
    ]
    for message in sent:
        sender.send(message)
    sender.flush_tx_buffer()
    time.sleep(0.5)
    logger.send_signal(signal.SIGINT)
    assert logger.wait(30) == 0, logger.stderr.read()
    key = [(m.arbitration_id, m.is_extended_id, bytes(m.data)) for m in sent]
    assert [(m.arbitration_id, m.is_extended_id, bytes(m.data)) for m in can.LogReader(str(log))] == key

    listener = fieldhub_hub.bus("can1", block_on_overflow=True)
    player = subprocess.run(
        [sys.executable, "-m", "can.player", "-i", "fieldhub", "-c", "can1", "--ignore-timestamps", str(log)],
        capture_output=True, timeout=120, env={**os.environ, "FIELDHUB_HUB": fieldhub_hub.url},
    )
    assert player.returncode == 0, player.stderr
    replayed = [listener.recv(5) for _ in sent]
    assert [(m.arbitration_id, m.is_extended_id, bytes(m.data)) for m in replayed] == key


def test_a_c_poll_reader_sees_a_python_senders_frames_in_order(fieldhub_hub, tmp_path):
    prefix = os.environ.get("FIELDHUB_C_PREFIX", os.path.join(REPO, "target", "c-build", "prefix"))
    if not os.path.exists(os.path.join(prefix, "lib", "libfieldhub.so")):
        pytest.fail(f"libfieldhub is not installed in {prefix}: `make test-c` installs it there (or set FIELDHUB_C_PREFIX)")
    candump = tmp_path / "candump"
    subprocess.run(
        ["gcc", "-std=c99", "-O1", "-o", str(candump), os.path.join(REPO, "examples", "c", "candump.c"),
         f"-I{prefix}/include", f"-L{prefix}/lib", "-lfieldhub", f"-Wl,-rpath,{prefix}/lib"],
        check=True,
    )
    frames = 5000
    reader = subprocess.Popen([str(candump), "-n", str(frames), fieldhub_hub.url, "can0"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 30
    while len(fieldhub_hub.ports()) < 1 and time.monotonic() < deadline:
        time.sleep(0.05)
    sender = fieldhub_hub.bus("can0")
    for n in range(frames):
        sender.send(can.Message(arbitration_id=0x321, data=n.to_bytes(4, "big"), is_extended_id=False))
    out, err = reader.communicate(timeout=60)
    assert reader.returncode == 0, err
    # candump's format: "  can0  321   [4]  00 00 00 2A"
    numbers = [int("".join(line.split()[-4:]), 16) for line in out.splitlines()]
    assert numbers == list(range(frames))
