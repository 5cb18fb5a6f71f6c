"""Wiring, faults and recordings from the page, each checked by real clients
or on disk — never by what the page itself claims."""

import time

import can




def frames_within(bus, seconds):
    """Every frame ``bus`` receives in the next ``seconds``."""
    got, deadline = [], time.monotonic() + seconds
    while (left := deadline - time.monotonic()) > 0:
        message = bus.recv(timeout=left)
        if message is not None:
            got.append(message)
    return got


def wait_for(check, what, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_unplugging_a_port_from_the_page_stops_its_frames_reaching_others(hub, page):
    with hub.bus("can0", "sender") as sender, hub.bus("can0", "receiver") as receiver:
        page.click("nav button[data-tab=wiring]")
        page.click('#port-rows tr[data-port="sender"] button[data-action=unplug]')
        wait_for(lambda: not next(p for p in hub.api("GET", "/api/v1/ports") if p["name"] == "sender")["plugged"],
                 "the hub to unplug the port")
        sender.send(can.Message(arbitration_id=0x10, data=[1], is_extended_id=False))
        assert frames_within(receiver, 0.5) == [], "an unplugged port's frame reached another port"
        page.wait_for_selector('#wiring-picture g.port-box.unplugged[data-port="sender"]')

        page.click('#port-rows tr[data-port="sender"] button[data-action=plug]')
        wait_for(lambda: next(p for p in hub.api("GET", "/api/v1/ports") if p["name"] == "sender")["plugged"],
                 "the hub to plug the port in")
        sender.send(can.Message(arbitration_id=0x11, data=[2], is_extended_id=False))
        got = receiver.recv(timeout=2)
        assert got is not None and got.arbitration_id == 0x11


def test_a_fault_rule_added_from_the_form_drops_frames_and_is_removed(hub, page):
    with hub.bus("can0", "sender") as sender, hub.bus("can0", "receiver") as receiver:
        page.click("nav button[data-tab=wiring]")
        form = "#fault-form"
        page.select_option(f"{form} select[name=channel]", "can0")
        page.select_option(f"{form} select[name=at]", "bus")
        page.fill(f"{form} input[name=id]", "100")
        page.fill(f"{form} input[name=mask]", "7FF")
        page.select_option(f"{form} select[name=action]", "drop")
        page.click(f"{form} button[type=submit]")
        page.wait_for_selector("#fault-rows tr[data-fault]")
        for ident in (0x100, 0x101, 0x100):
            sender.send(can.Message(arbitration_id=ident, data=[], is_extended_id=False))
        got = frames_within(receiver, 0.5)
        assert [m.arbitration_id for m in got] == [0x101], "the rule drops 0x100 and nothing else"
        page.wait_for_function("document.querySelector('#fault-rows .fault-applied').textContent === '2'")
        page.click("#fault-rows button[data-action=remove-fault]")
        wait_for(lambda: hub.api("GET", "/api/v1/faults") == [], "the rule to go")
        sender.send(can.Message(arbitration_id=0x100, data=[], is_extended_id=False))
        got = receiver.recv(timeout=2)
        assert got is not None and got.arbitration_id == 0x100


def test_a_recording_started_from_the_page_produces_a_candump_log(hub, page):
    with hub.bus("can0", "sender") as sender:
        page.click("nav button[data-tab=wiring]")
        page.fill("#recording-form input[name=path]", "from-page.log")
        page.fill("#recording-form input[name=channels]", "can0")
        page.click("#recording-form button[type=submit]")
        page.wait_for_selector('#recording-rows tr[data-recording="from-page.log"] button[data-action=stop]')
        for i in range(5):
            sender.send(can.Message(arbitration_id=0x400 + i, data=[i, i], is_extended_id=False))
        sender.flush_tx_buffer()
        time.sleep(0.3)
        page.click('#recording-rows tr[data-recording="from-page.log"] button[data-action=stop]')
        wait_for(lambda: [r["state"] for r in hub.api("GET", "/api/v1/recordings") if r["name"] == "from-page.log"]
                 == ["stopped"], "the recording to stop")
        page.wait_for_selector('#recording-rows tr[data-recording="from-page.log"][data-state=stopped]')
        lines = (hub.recordings / "from-page.log").read_text().splitlines()
        assert [line.split(" ", 1)[1] for line in lines] == [f"can0 40{i}#{i:02X}{i:02X}" for i in range(5)]
        with page.expect_download() as download:
            page.click('#recording-rows tr[data-recording="from-page.log"] button[data-action=download]')
        assert open(download.value.path()).read().splitlines() == lines


def test_bridge_cut_and_short_buttons_act_on_the_bus(hub, page):
    with hub.bus("can0", "a") as a, hub.bus("can0", "b") as b, hub.bus("can1", "c") as c:
        page.click("nav button[data-tab=wiring]")
        page.select_option("#bridge-form select[name=from]", "can0")
        page.select_option("#bridge-form select[name=to]", "can1")
        page.click("#bridge-form button[type=submit]")
        wait_for(lambda: len(hub.api("GET", "/api/v1/routes")) == 1, "the bridge")
        a.send(can.Message(arbitration_id=0x50, data=[5], is_extended_id=False))
        got = c.recv(timeout=2)
        assert got is not None and got.arbitration_id == 0x50, "the bridge carries can0's frame to can1"
        assert b.recv(timeout=2).arbitration_id == 0x50
        # Cut b off: a's frames no longer reach it.
        page.check('#port-rows tr[data-port="b"] input.cut-choice')
        page.click('#channel-rows tr[data-channel="can0"] button[data-action=cut]')
        wait_for(lambda: hub.api("GET", "/api/v1/channels")[0]["cut"], "the cut")
        a.send(can.Message(arbitration_id=0x51, data=[], is_extended_id=False))
        assert frames_within(b, 0.5) == [], "a cut-off port hears nothing from the other segment"
        page.click('#channel-rows tr[data-channel="can0"] button[data-action=repair]')
        wait_for(lambda: not hub.api("GET", "/api/v1/channels")[0]["cut"], "the repair")
        page.click('#channel-rows tr[data-channel="can0"] button[data-action=short]')
        wait_for(lambda: hub.api("GET", "/api/v1/channels")[0]["shorted"], "the short")
        a.send(can.Message(arbitration_id=0x52, data=[], is_extended_id=False))
        assert [m for m in frames_within(b, 0.5) if not m.is_error_frame] == [], "a shorted bus carries no frame"
        page.click('#channel-rows tr[data-channel="can0"] button[data-action=unshort]')
        wait_for(lambda: not hub.api("GET", "/api/v1/channels")[0]["shorted"], "the short's end")
