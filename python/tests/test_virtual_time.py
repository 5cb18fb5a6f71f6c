"""Virtual time from Python: synchronised buses step bus time, periodic
tasks keep their period in bus time, and a run — a failing one included —
is the same on every run."""

import re
import threading

import can
import pytest

import fieldhub
from test_fixture import run_pytest

NS = 1_000_000_000


def frames_of(bus):
    """Everything waiting for ``bus`` now, as (bus time in ns, id, data)."""
    frames = []
    while (message := bus.recv(0)) is not None:
        frames.append((round(message.timestamp * NS), message.arbitration_id, bytes(message.data)))
    return frames


@pytest.mark.fieldhub_config(time="virtual")
def test_a_minute_of_periodic_frames_in_one_step_keeps_every_period_in_bus_time(fieldhub_hub):
    ecu = fieldhub_hub.bus("can0", synchronized=True)
    observer = fieldhub_hub.bus("can0")
    assert ecu.now == 0.0
    fast = ecu.send_periodic(can.Message(arbitration_id=0x100, data=[1], is_extended_id=False), 0.01)
    ecu.send_periodic(can.Message(arbitration_id=0x200, data=[2], is_extended_id=False), 0.1, duration=30.0)
    assert ecu.step(60.0) == 60.0
    fast.stop()
    observer.flush_tx_buffer()
    frames = frames_of(observer)
    assert len(frames) == 6000 + 300
    assert [t for t, id_, _ in frames if id_ == 0x100] == [k * 10_000_000 for k in range(6000)]
    assert [t for t, id_, _ in frames if id_ == 0x200] == [k * 100_000_000 for k in range(300)]
    # Due together, they leave the ECU's port in the order the tasks started.
    assert [id_ for t, id_, _ in frames if t == 0] == [0x100, 0x200]
    assert fieldhub_hub.stats()["time"]["now_ns"] == 60 * NS


def run_tester_and_ecu():
    """A tester asks every 10 ms, an ECU answers; both synchronised, in
    threads of their own. Returns what the tester received. Both join before
    either steps, so bus time waits for both from 0 on."""
    with fieldhub.Hub('[[channel]]\nname = "can0"\n', time="virtual") as hub:
        tester = can.Bus(interface="fieldhub", channel="can0", hub=hub.url, port_name="tester", synchronized=True)
        ecu = can.Bus(interface="fieldhub", channel="can0", hub=hub.url, port_name="ecu", synchronized=True)
        received = []

        def run_tester():
            for k in range(200):
                tester.send(can.Message(arbitration_id=0x7E0, data=[k % 256], is_extended_id=False))
                tester.step(0.01)
                received.extend(frames_of(tester))

        def run_ecu():
            while ecu.now < 2.0:
                ecu.step(0.004)
                for _, _, data in frames_of(ecu):
                    ecu.send(can.Message(arbitration_id=0x7E8, data=[data[0], 0x40], is_extended_id=False))

        threads = [threading.Thread(target=run_tester), threading.Thread(target=run_ecu)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        tester.shutdown()
        ecu.shutdown()
    return received


def test_two_participants_in_threads_give_the_same_frames_at_the_same_bus_times_every_run():
    first = run_tester_and_ecu()
    assert first == run_tester_and_ecu()
    # The ECU sees a request at its next 4 ms boundary and answers from there.
    assert len(first) == 200
    assert first[0] == (4_000_000, 0x7E8, bytes([0, 0x40]))


FAILING_TEST = """
    import can, pytest

    @pytest.mark.fieldhub_config(time="virtual")
    def test_no_answer_is_late(fieldhub_hub):
        ecu = fieldhub_hub.bus("can0", synchronized=True)
        tester = fieldhub_hub.bus("can0")
        fieldhub_hub.add_fault(channel="can0", at="bus", id=0x7E8, mask=0x7FF,
                               action={"type": "drop"}, probability=0.01, seed=7)
        ecu.send_periodic(can.Message(arbitration_id=0x7E8, data=[0], is_extended_id=False), 0.01)
        ecu.step(60.0)
        tester.flush_tx_buffer()
        times = []
        while (m := tester.recv(0)) is not None:
            times.append(round(m.timestamp * 1000))
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert max(gaps) <= 10, f"answer late at {times[gaps.index(max(gaps))]} ms"
"""


def test_a_failing_test_fails_the_same_way_on_every_run(tmp_path):
    failures = []
    for run in range(2):
        directory = tmp_path / f"run{run}"
        directory.mkdir()
        code, output = run_pytest(directory, FAILING_TEST)
        assert code == 1, output
        failures.append([line for line in output.splitlines() if line.startswith("E ")])
    assert failures[0] == failures[1]
    assert any("answer late at" in line for line in failures[0]), failures[0]


@pytest.mark.fieldhub_config(time="virtual")
def test_the_control_api_holds_and_steps_virtual_time(fieldhub_hub):
    assert fieldhub_hub.time()["mode"] == "virtual"
    fieldhub_hub.run_until(1.5)
    observer = fieldhub_hub.bus("can0")
    fieldhub_hub.bus("can0").send(can.Message(arbitration_id=0x10, is_extended_id=False))
    observer.flush_tx_buffer()
    status = fieldhub_hub.time()
    assert (status["now_ns"], status["limit"]["state"]) == (1_500_000_000, "paused")
    fieldhub_hub.resume()
    # An observer's frame joins the next advance, at the bus time of then.
    fieldhub_hub.run_until(2.0)
    message = observer.recv(5)
    assert message is not None and message.timestamp == 1.5


def counted(k):
    return can.Message(arbitration_id=0x200, data=k.to_bytes(2, "little"), is_extended_id=False)


def drain(ecu, observer, step, count):
    """Step ``ecu`` until ``observer`` has ``count`` frames (at most 2,000
    steps); returns them with whether ``ecu.tx_queue_full`` held after each step."""
    frames, full = [], []
    for _ in range(2000):
        ecu.step(step)
        full.append(ecu.tx_queue_full)
        observer.flush_tx_buffer()
        frames += frames_of(observer)
        if len(frames) >= count:
            break
    return frames, full


SLOW_BUS = '[[channel]]\nname = "can0"\ntiming = "timed"\nbitrate = 125000\n'


@pytest.mark.fieldhub_config(SLOW_BUS, time="virtual")
def test_ten_thousand_frames_sent_in_one_step_go_out_in_order_over_the_following_steps(fieldhub_hub):
    ecu = fieldhub_hub.bus("can0", synchronized=True, port_name="ecu")
    observer = fieldhub_hub.bus("can0")
    for k in range(10_000):
        ecu.send(counted(k))
    ecu.step(0.01)
    # About 18 frames fit in 10 ms at 125 kbit/s: the participant hears
    # that its queue is full, and a send that must not wait says so.
    assert ecu.tx_queue_full
    with pytest.raises(can.CanOperationError, match="queue_full"):
        ecu.send(counted(0), timeout=0)
    frames, full = drain(ecu, observer, 0.01, 10_000)
    # The run went on: every frame on the bus, in the order sent, one after
    # another over 5.3 s of bus time.
    assert [int.from_bytes(data, "little") for _, _, data in frames] == list(range(10_000))
    times = [t for t, _, _ in frames]
    assert times == sorted(set(times)) and times[-1] > 4 * NS
    assert ecu.now_ns == (len(full) + 1) * 10_000_000
    # Told while more than 256 waited, and no longer once the queue drained.
    assert full[0] and not full[-1] and full == sorted(full, reverse=True)
    ecu.send(counted(10_000), timeout=0)
    assert fieldhub_hub.port("ecu")["tx_dropped"] == 0


@pytest.mark.fieldhub_config(SLOW_BUS.replace("125000", "500000"), time="virtual")
def test_frames_past_what_the_hub_holds_of_a_participant_are_refused_and_reported_as_queue_full(fieldhub_hub):
    ecu = fieldhub_hub.bus("can0", synchronized=True, port_name="ecu")
    observer = fieldhub_hub.bus("can0")
    for k in range(20_000):
        ecu.send(counted(k))
    # Nothing leaves the queue during a step: the first 16,384 are held, the
    # rest refused as they came — each flush raises one report of them.
    refused = 0
    for _ in range(3617):
        try:
            ecu.flush_tx_buffer()
            break
        except can.CanOperationError as e:
            report = re.fullmatch(r"(\d+) frame\(s\) sent on port \d+ refused: 16384 frames of this participant .*", str(e))
            assert report, e
            refused += int(report[1])
    assert refused == 3616
    assert fieldhub_hub.port("ecu")["tx_dropped_by_reason"] == {"queue_full": 3616}
    frames, _ = drain(ecu, observer, 0.01, 16_384)
    assert [int.from_bytes(data, "little") for _, _, data in frames] == list(range(16_384))


@pytest.mark.fieldhub_config(time="virtual")
def test_a_participant_stepping_ahead_is_woken_only_by_what_its_filters_match(fieldhub_hub):
    """A sender places ten numbered frames and a request for later bus times
    with ``send_at`` and ends 100 steps of 1 ms at once; a responder ends its
    100 steps at once too, woken only by the request, which it answers; the
    answer wakes the sender. A frame reaches the others with the step that
    ends after it, as when every participant steps each millisecond."""
    sender = fieldhub_hub.bus("can0", port_name="sender", synchronized=True, ahead=True)
    responder = fieldhub_hub.bus("can0", port_name="responder", synchronized=True, ahead=True)
    woken = {}
    got = {"sender": [], "responder": []}

    def run_sender():
        for k in range(1, 11):
            sender.send_at(can.Message(arbitration_id=0x100, data=[k], is_extended_id=False), (k * 10 - 5) / 1000)
        sender.send_at(can.Message(arbitration_id=0x7DF, data=[0x3E], is_extended_id=False), 0.033)
        answers = [{"can_id": 0x7E8, "can_mask": 0x7FF, "extended": False}]
        woken["sender"] = sender.step_ahead(0.1, 0.001, wake_on=answers)
        got["sender"] += frames_of(sender)
        assert sender.step_ahead(0.1 - sender.now, 0.001, wake_on=answers) == pytest.approx(0.1)
        got["sender"] += frames_of(sender)

    def run_responder():
        requests = [{"can_id": 0x7DF, "can_mask": 0x7FF}]
        woken["responder"] = responder.step_ahead(0.1, 0.001, wake_on=requests)
        got["responder"] += frames_of(responder)
        responder.send(can.Message(arbitration_id=0x7E8, data=[0x7E], is_extended_id=False))
        assert responder.step_ahead(0.1 - responder.now, 0.001, wake_on=requests) == pytest.approx(0.1)
        got["responder"] += frames_of(responder)

    threads = [threading.Thread(target=run) for run in (run_sender, run_responder)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert woken == {"responder": pytest.approx(0.034), "sender": pytest.approx(0.035)}
    ms = 1_000_000
    numbered = [(((k * 10) - 5) * ms, 0x100, bytes([k])) for k in range(1, 11)]
    assert got["responder"] == numbered[:3] + [(33 * ms, 0x7DF, b"\x3e")] + numbered[3:]
    assert got["sender"] == [(34 * ms, 0x7E8, b"\x7e")]


@pytest.mark.fieldhub_config(time="virtual")
def test_stepping_ahead_refuses_what_it_cannot_do(fieldhub_hub):
    with pytest.raises(can.CanInitializationError, match="synchronized=True"):
        fieldhub_hub.bus("can0", ahead=True)
    plain = fieldhub_hub.bus("can0", port_name="plain", synchronized=True)
    with pytest.raises(can.CanOperationError, match="ahead"):
        plain.send_at(can.Message(arbitration_id=0x100, data=[1], is_extended_id=False), 0.005)
    with pytest.raises(can.CanOperationError, match="ahead"):
        plain.step_ahead(0.01, 0.001)
    plain.shutdown()
    ahead = fieldhub_hub.bus("can0", port_name="ahead", synchronized=True, ahead=True)
    with pytest.raises(can.CanOperationError, match="at most 32"):
        ahead.step_ahead(0.01, 0.001, wake_on=[{"can_id": k, "can_mask": 0x7FF} for k in range(33)])
    with pytest.raises(ValueError, match="not negative"):
        ahead.send_at(can.Message(arbitration_id=0x100, data=[1], is_extended_id=False), -1.0)
    task = ahead.send_periodic(can.Message(arbitration_id=0x100, data=[1], is_extended_id=False), 0.01)
    with pytest.raises(can.CanOperationError, match="send_periodic"):
        ahead.step_ahead(0.01, 0.001)
    task.stop()
