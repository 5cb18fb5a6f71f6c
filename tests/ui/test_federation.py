"""Federation in the page: two real hubs federated over loopback (Zenoh,
linked with a federation token file); the relay's page names the hub that
owns the shared channel and says it is reachable, the owner's page says it
owns it, and when the owner is killed the relay's page says the owner is
unreachable, with what the channel's clients were told."""

import os
import socket
import tempfile
from pathlib import Path

import can

from conftest import Page, RunningHub, screenshot


def free_port() -> int:
    """A loopback TCP port nobody listens on now, for a hub's Zenoh endpoint."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def config(name: str, token_file: Path, listen: int, connect: int = None, owner: str = None) -> str:
    connect_to = f'"tcp/127.0.0.1:{connect}"' if connect else ""
    owned_by = f'owner = "{owner}"\n' if owner else ""
    return f"""
[hub]
name = "{name}"

[federation]
listen = ["tcp/127.0.0.1:{listen}"]
connect = [{connect_to}]
token_file = "{token_file}"

[[channel]]
name = "body"
federated = true
{owned_by}
[[channel]]
name = "local"
"""


def test_the_page_shows_who_owns_a_federated_channel_and_when_the_owner_is_unreachable(browser):
    secrets = tempfile.TemporaryDirectory(prefix="fieldhub-ui-federation-")
    token = Path(secrets.name) / "federation.token"
    token.write_text("a secret both hubs share\n")
    os.chmod(token, 0o600)
    ports = free_port(), free_port()
    owner = RunningHub(config("rack1", token, ports[0]))
    relay = None
    try:
        relay = RunningHub(config("rack2", token, ports[1], connect=ports[0], owner="rack1"))
        on_relay = Page(browser, relay)
        on_owner = Page(browser, owner)
        try:
            page = on_relay.page
            reachable = page.wait_for_selector('#federation [data-channel="body"][data-state="reachable"]',
                                               timeout=15_000)
            assert reachable.inner_text() == "body: owner rack1, reachable"
            assert page.locator('#federation [data-channel="local"]').count() == 0, "a local channel is no one's"
            owned = on_owner.page.wait_for_selector('#federation [data-channel="body"][data-state="owner"]')
            assert owned.inner_text() == "body: owned by this hub (rack1)"

            # A frame from the owner's side reaches the relay's page.
            with owner.bus("body", "ecu") as bus:
                bus.send(can.Message(arbitration_id=0x321, data=[1, 2, 3], is_extended_id=False))
                page.wait_for_selector('.trace-row[data-id="321"]')
            assert page.inner_text('.trace-row[data-id="321"] .c-sender') == "remote hub"

            owner.process.kill()
            unreachable = page.wait_for_selector('#federation [data-channel="body"][data-state="unreachable"]',
                                                 timeout=15_000)
            text = unreachable.inner_text()
            assert text.startswith("body: owner rack1 unreachable — channel 'body' waits for an owner"), text
            body = next(c for c in relay.api("GET", "/api/v1/stats")["channels"] if c["name"] == "body")
            assert body["federation"]["waiting"] in text
            screenshot(page, "federation")
            assert on_relay.errors == []
        finally:
            on_relay.close()
            on_owner.close()
    finally:
        owner.stop()
        if relay:
            relay.stop()
        secrets.cleanup()
