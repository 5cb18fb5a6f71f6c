"""A rest-bus simulation driven from pytest (docs/rest-bus.md): a signal
set, ramped, stopped and started through ``hub.rbs()`` is what a python-can
bus on the channel receives from the message's next cycle on — exactly, in
virtual time — and ``hub.start_rbs`` starts a simulation of a DBC file on a
running hub and removes it again."""

import pathlib

import can
import pytest

import fieldhub

NS = 1_000_000_000
MS = 1_000_000
BODY = pathlib.Path(__file__).resolve().parents[2] / "crates" / "fieldhub-rbs" / "tests" / "data" / "body.dbc"
ENGINE = 0x100

CONFIG = f"""
[[channel]]
name = "can0"

[[rbs]]
dbc = "{BODY}"
channel = "can0"
except = ["DUT"]

[[rbs.counter]]
message = "EngineStatus"
signal = "Counter"
max = 14
"""


def engine_frames(bus):
    """The EngineStatus frames waiting for ``bus``: (bus time in ns, Rpm raw)."""
    frames = []
    while (message := bus.recv(0)) is not None:
        if message.arbitration_id == ENGINE:
            frames.append((round(message.timestamp * NS), int.from_bytes(message.data[2:4], "little")))
    return frames


def rpm(raw):
    return raw * 0.25


@pytest.fixture
def dut():
    """A hub in virtual time running the simulation, and the device under
    test's synchronised bus on its channel."""
    with fieldhub.Hub(CONFIG, time="virtual") as hub:
        bus = hub.bus("can0", synchronized=True)
        try:
            yield hub, bus
        finally:
            bus.shutdown()


def test_a_signal_set_from_pytest_is_in_the_next_cycle_the_python_can_bus_receives(dut):
    hub, bus = dut
    bus.step(0.05)
    before = engine_frames(bus)
    assert before and all(rpm(raw) == 800 for _, raw in before), "GenSigStartValue 3200 raw"
    answer = hub.rbs().set("EngineStatus", Rpm=2000)
    assert answer["signals"]["Rpm"] == 2000
    bus.step(0.03)
    frames = before + engine_frames(bus)
    assert [t for t, _ in frames] == [t for t in range(frames[0][0], 80 * MS + 1, 10 * MS)], "every 10 ms"
    # Set at 50 ms, after that instant's cycle: the next cycle, at 60 ms, carries it.
    assert [(t, rpm(raw)) for t, raw in frames if t >= 50 * MS] == [
        (50 * MS, 800), (60 * MS, 2000), (70 * MS, 2000), (80 * MS, 2000)]
    assert hub.rbs().get("EngineStatus", "Rpm") == 2000


def test_a_ramp_sends_at_every_cycle_the_linear_value_at_its_bus_time(dut):
    hub, bus = dut
    bus.step(0.05)
    engine_frames(bus)
    hub.rbs().ramp("EngineStatus", 0.1, Rpm=1000)
    bus.step(0.2)
    frames = [(t, raw) for t, raw in engine_frames(bus) if t > 50 * MS]
    # The cycle at 50 ms went before the ramp was asked for (it may be read
    # in this step). The ramp starts at the next cycle (60 ms) from 800 rpm (raw 3200) and gains
    # 800 raw in 100 ms, rounded half to even as the raw value is.
    times = range(60 * MS, 250 * MS + 1, 10 * MS)
    expected = [(t, round(3200 + 800 * min(1.0, (t - 60 * MS) / (100 * MS)))) for t in times]
    assert frames == expected
    assert [raw for _, raw in frames][:6] == [3200, 3280, 3360, 3440, 3520, 3600]
    listed = hub.rbs().message("EngineStatus")
    assert listed["signals"]["Rpm"] == 1000 and listed["ramps"]["Rpm"] == {"to": 1000, "ms": 100}


def test_a_stopped_message_leaves_the_bus_and_comes_back_on_its_cycles(dut):
    hub, bus = dut
    bus.step(0.05)
    engine_frames(bus)
    stopped = hub.rbs().stop("EngineStatus")
    assert stopped["enabled"] is False
    bus.step(0.05)
    assert [t for t, _ in engine_frames(bus) if t > 50 * MS] == []
    hub.rbs().start("EngineStatus")
    bus.step(0.03)
    assert [t for t, _ in engine_frames(bus)] == [110 * MS, 120 * MS, 130 * MS], "in phase with its cycle"


def test_faults_and_refusals_by_name(dut):
    hub, bus = dut
    sim = hub.rbs()
    bus.step(0.03)
    assert sim.stick_counter("EngineStatus")["counter_stuck"] is True
    assert sim.corrupt_checksum("EngineStatus")["checksum_wrong"] is True
    assert [m["enabled"] for m in sim.stop_node("BODY")["messages"]] == [False, False]
    assert [m["enabled"] for m in sim.start_node("BODY")["messages"]] == [True, True]
    with pytest.raises(fieldhub.HubError, match=r"CoolantTemp: 300 is outside its range -40..=215") as refused:
        sim.set("EngineStatus", Rpm=1000, CoolantTemp=300)
    assert refused.value.status == 400
    assert sim.get("EngineStatus", "Rpm") == 800, "a refused change changes nothing"
    with pytest.raises(fieldhub.HubError, match="sends no message 'Nope'"):
        sim.set("Nope", X=1)
    with pytest.raises(fieldhub.HubError, match="no rest-bus simulation 3 runs"):
        hub.rbs(3).set("EngineStatus", Rpm=1)


def test_start_rbs_simulates_a_dbc_on_a_running_hub_until_its_block_ends(tmp_path):
    with fieldhub.Hub('[[channel]]\nname = "can0"\n') as hub:
        bus = hub.bus("can0")
        counters = [{"message": "EngineStatus", "signal": "Counter", "max": 14}]
        checksums = [{"message": "EngineStatus", "signal": "Checksum", "algorithm": "crc8-sae-j1850"}]
        with hub.start_rbs(BODY, "can0", exclude=["DUT"], counters=counters, checksums=checksums) as sim:
            assert [m["name"] for m in sim.messages()] == ["EngineStatus", "BodyMux", "BodyEvent"]
            assert {"ENGINE", "BODY"} <= {port["name"] for port in hub.ports()}
            sim.set("EngineStatus", Rpm=1500)
            wanted = (6000).to_bytes(2, "little")  # 1500 rpm at 0.25 rpm per bit
            # The frames sent before the value was set come first: at most a
            # second of them (110 a second).
            for _ in range(300):
                message = bus.recv(2.0)
                if message is not None and message.arbitration_id == ENGINE and message.data[2:4] == wanted:
                    break
            else:
                pytest.fail("the value set never came on the bus")
        assert hub.request("GET", "/api/v1/rbs") == []
        bus.shutdown()

        broken = tmp_path / "broken.dbc"
        broken.write_text(BODY.read_text().replace(" SG_ Rpm : 16|16@1+", " SG_ Rpm : 16|16@9+"))
        with pytest.raises(fieldhub.HubError, match=r"broken.dbc: line 12: the DBC file does not parse") as refused:
            hub.start_rbs(broken, "can0")
        assert refused.value.status == 400
        with pytest.raises(fieldhub.HubError, match="no channel 'can9'|can9") as refused:
            hub.start_rbs(BODY, "can9", exclude=["DUT"])
        assert refused.value.status == 422
        assert hub.request("GET", "/api/v1/rbs") == [], "a refused simulation leaves nothing behind"
