"""What programs with threads and a Ctrl-C meet: shutdown from another
thread while calls are blocked, KeyboardInterrupt during a blocking wait,
and a request timing out behind a full send queue."""

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time

import can
import pytest

# A channel so slow (50 bit/s, about 2 s a frame) that a sender fills every
# buffer between it and the bus within a few thousand frames.
SLOW = """
[[channel]]
name = "slow"
bitrate = 50
timing = "timed"
"""

# How long a test waits for something that should happen at once: a hang
# guard, not a measurement.
PATIENCE = 60


def _frame(n=0):
    return can.Message(arbitration_id=0x10, data=[n & 0xFF], is_extended_id=False)


def _fill(bus):
    """Send until the bus holds this sender back (a send finds no room)."""
    while True:
        try:
            bus.send(_frame(), timeout=0.25)
        except can.CanOperationError:
            return


def _wait_until(condition, what):
    """Poll ``condition`` until it holds; fail after PATIENCE seconds."""
    deadline = time.monotonic() + PATIENCE
    while not condition():
        assert time.monotonic() < deadline, f"waited in vain: {what}"
        time.sleep(0.005)


def _asleep(pid, tid=None):
    """Whether the process (or its thread ``tid``) sleeps in the kernel:
    state S in /proc, what a thread blocked in a call shows."""
    path = f"/proc/{pid}/task/{tid}/stat" if tid else f"/proc/{pid}/stat"
    try:
        with open(path) as f:
            stat = f.read()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] == "S"


# clock_nanosleep(2), where time.sleep() waits on Linux.
_CLOCK_NANOSLEEP = {"x86_64": 230, "aarch64": 115}[os.uname().machine]


def _in_time_sleep(pid):
    """Whether the process's main thread waits inside time.sleep(). A
    SIGINT is acted on at once only there: one that arrives while the thread
    still waits for the GIL on its way (also state S) is handled only after
    the sleep it then begins, as in any Python program."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            return f.read().split()[0] == str(_CLOCK_NANOSLEEP)
    except OSError:
        return False


def _blocked_in_a_call(thread, name):
    """Whether ``thread`` sleeps in the kernel inside a Python function
    called ``name`` (``recv``, ``send``): blocked in that call — twice in a
    row, so not merely waiting for the GIL on its way."""
    def once():
        frame = sys._current_frames().get(thread.ident)
        while frame is not None and frame.f_code.co_name != name:
            frame = frame.f_back
        return frame is not None and _asleep(os.getpid(), thread.native_id)
    if not once():
        return False
    time.sleep(0.01)
    return once()


def _in_thread(call, name):
    """Run `call` in a thread; return it, once blocked in the function
    `name` that the call makes, and a list that gets its outcome."""
    outcome = []

    def run():
        try:
            outcome.append(call())
        except Exception as e:  # the outcome under test
            outcome.append(e)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    _wait_until(lambda: _blocked_in_a_call(thread, name) or not thread.is_alive(), "the thread blocks in the call")
    return thread, outcome


def test_shutdown_from_another_thread_ends_a_blocked_recv_with_an_operation_error(fieldhub_hub):
    bus = fieldhub_hub.bus("can0")
    thread, outcome = _in_thread(bus.recv, "recv")
    bus.shutdown()
    thread.join(PATIENCE)
    assert not thread.is_alive(), "recv() still blocked after shutdown()"
    assert isinstance(outcome[0], can.CanOperationError), outcome
    with pytest.raises(can.CanOperationError):
        bus.recv(0)


def test_shutdown_while_a_notifier_runs_reports_to_its_listener(fieldhub_hub):
    bus = fieldhub_hub.bus("can0")
    errors = []

    class Recorder(can.Listener):
        def on_message_received(self, msg):
            pass

        def on_error(self, exc):
            errors.append(exc)

    before = set(threading.enumerate())
    notifier = can.Notifier(bus, [Recorder()], timeout=30)
    # The notifier's thread is inside recv(30).
    (reader,) = set(threading.enumerate()) - before
    _wait_until(lambda: _blocked_in_a_call(reader, "recv"), "the notifier's thread blocks in recv")
    bus.shutdown()
    notifier.stop(PATIENCE)
    assert all(isinstance(e, can.CanOperationError) for e in errors), errors


@pytest.mark.fieldhub_config(SLOW)
def test_shutdown_from_another_thread_ends_a_send_blocked_on_a_held_bus(fieldhub_hub):
    bus = fieldhub_hub.bus("slow")
    _fill(bus)
    thread, outcome = _in_thread(lambda: bus.send(_frame()), "send")
    bus.shutdown()
    thread.join(PATIENCE)
    assert not thread.is_alive(), "send() still blocked after shutdown()"
    assert isinstance(outcome[0], can.CanOperationError), outcome


@pytest.mark.fieldhub_config(SLOW)
def test_flush_behind_a_full_tcp_send_queue_times_out_and_the_bus_stays_usable(fieldhub_hub):
    bus = can.Bus(interface="fieldhub", channel="slow", hub=fieldhub_hub.url, timeout=0.25)
    try:
        _fill(bus)
        with pytest.raises(can.CanOperationError, match="timed out") as info:
            bus.flush_tx_buffer()
        assert "closed" not in str(info.value)
        # Still connected: a send finds the queue full, not the connection closed.
        try:
            bus.send(_frame(), timeout=0)
        except can.CanOperationError as e:
            assert "could not be queued" in str(e), e
    finally:
        bus.shutdown()


BLOCKING_CALLS = {
    "recv()": "bus.recv()",
    "recv(60)": "bus.recv(60)",
    "send()": textwrap.dedent(
        """
        holder = hub.bus("can0", block_on_overflow=True)
        try:
            while True:
                bus.send(can.Message(arbitration_id=1), timeout=0.25)
        except can.CanOperationError:
            pass
        """
    ) + "\nprint('ready', flush=True)\nbus.send(can.Message(arbitration_id=1))",
}


@pytest.mark.parametrize("call", BLOCKING_CALLS)
def test_ctrl_c_interrupts_a_blocking_call(call):
    code = BLOCKING_CALLS[call]
    if "ready" not in code:
        code = "print('ready', flush=True)\n" + code
    script = "import can, fieldhub\nhub = fieldhub.Hub()\nbus = hub.bus('can0')\n" + code
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        # Blocked in the call: a signal before then proves nothing.
        _wait_until(lambda: _asleep(child.pid), "the child blocks in the call")
        child.send_signal(signal.SIGINT)
        _, stderr = child.communicate(timeout=PATIENCE)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode != 0
    assert "KeyboardInterrupt" in stderr, stderr


@pytest.mark.parametrize("ending", ["end of script", "uncaught Ctrl-C"])
def test_the_interpreter_exits_cleanly_while_notifier_threads_wait_in_recv(ending):
    # Issue 39: a thread coming back from recv() while the interpreter
    # finalized aborted the process (FATAL: exception not rethrown).
    # Eight notifiers, each with a thread inside recv(), make it likely.
    script = textwrap.dedent(
        """
        import time, can, fieldhub
        hub = fieldhub.Hub()
        buses = [hub.bus("can0") for _ in range(8)]
        notifiers = [can.Notifier(bus, [can.Printer()], timeout=0.01) for bus in buses]
        print("ready", flush=True)
        if ENDING == "uncaught Ctrl-C":
            time.sleep(PATIENCE)
        """
    ).replace("ENDING", repr(ending)).replace("PATIENCE", str(PATIENCE))
    for _ in range(3):
        child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            assert child.stdout.readline().strip() == "ready"
            if ending == "uncaught Ctrl-C":
                _wait_until(lambda: _in_time_sleep(child.pid), "the script sleeps in time.sleep()")
                child.send_signal(signal.SIGINT)
            _, stderr = child.communicate(timeout=PATIENCE)
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
        assert "FATAL" not in stderr and child.returncode != -signal.SIGABRT, stderr
        if ending == "end of script":
            assert child.returncode == 0, stderr
        else:
            # Python ends on an uncaught KeyboardInterrupt by SIGINT, as a shell expects.
            assert child.returncode == -signal.SIGINT and "KeyboardInterrupt" in stderr, stderr


# The longest a Ctrl-C may take to end a wait in step_ahead: the extension
# looks at Python's signal handlers every 50 ms; the rest is slack for a
# loaded machine.
INTERRUPT_BOUND_S = 1.0


@pytest.mark.fieldhub_config(time="virtual")
def test_ctrl_c_interrupts_step_ahead_and_the_step_runs_on_at_the_hub(fieldhub_hub):
    """A participant stepping ahead 10 s while another holds bus time at 0
    gets SIGINT: KeyboardInterrupt within INTERRUPT_BOUND_S. The hub runs its
    step on (docs: Ctrl-C stops the wait, not the step), so once the other
    participant lets time go, its next step starts at 10 s, and a frame it
    sends after that step reaches the other at 10.001 s."""
    holder = fieldhub_hub.bus("can0", port_name="holder", synchronized=True, ahead=True)
    script = textwrap.dedent(
        f"""
        import time, can
        bus = can.Bus(interface="fieldhub", channel="can0", hub={fieldhub_hub.url!r}, port_name="stepper",
                      synchronized=True, ahead=True)
        print("ready", flush=True)
        try:
            bus.step_ahead(10.0, 0.001, wake_on=[{{"can_id": 0x7FF, "can_mask": 0x7FF}}])
            print("not interrupted", flush=True)
        except KeyboardInterrupt:
            print("interrupted", flush=True)
        # The next step waits for the interrupted one's grant (10 s) and goes on from there.
        reached = bus.step(0.001)
        bus.send(can.Message(arbitration_id=0x123, data=[7], is_extended_id=False))
        print("stepped", reached, bus.step(0.001), flush=True)
        bus.shutdown()
        """
    )
    child = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline().strip() == "ready"
        _wait_until(lambda: _asleep(child.pid), "the child blocks in step_ahead")
        # Held at 0 by the holder, which has not stepped: the step cannot end.
        assert holder.now == 0.0
        signalled = time.monotonic()
        child.send_signal(signal.SIGINT)
        assert child.stdout.readline().strip() == "interrupted"
        assert time.monotonic() - signalled < INTERRUPT_BOUND_S
        # Let time go past the stepper's 10 s; a frame of 0x7FE alone would wake the holder.
        reached = holder.step_ahead(20.0, 0.001, wake_on=[{"can_id": 0x7FE, "can_mask": 0x7FF}])
        stdout, stderr = child.communicate(timeout=PATIENCE)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert child.returncode == 0, stderr
    assert stdout.split() == ["stepped", "10.001", "10.002"]
    assert reached == pytest.approx(20.0)
    got = holder.recv(0)
    assert (got.arbitration_id, bytes(got.data), got.timestamp) == (0x123, b"\x07", pytest.approx(10.001)), got
    holder.shutdown()
