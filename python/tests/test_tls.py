"""The python-can interface over TLS (``tls://HOST:PORT``) and mutual TLS:
the ``tls_ca``, ``tls_cert`` and ``tls_key`` keyword arguments, and errors
that say what to set. The certificates are made by the Rust test kit's
``fieldhub-test-certs`` (crates/fieldhub-testkit): the test venv has no
certificate library, and no test skips for want of one."""

import os
import shutil
import subprocess

import can
import pytest

from fieldhub import Hub

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def make_certs(directory):
    """Write ca.crt, other-ca.crt, hub.crt/.key and client.crt/.key into
    ``directory``: with the program ``FIELDHUB_TEST_CERTS`` names, else
    built and run by cargo from this repository."""
    program = os.environ.get("FIELDHUB_TEST_CERTS")
    if program:
        command = [program, str(directory)]
    elif shutil.which("cargo"):
        command = ["cargo", "run", "--locked", "--quiet", "-p", "fieldhub-testkit", "--bin", "fieldhub-test-certs",
                   "--", str(directory)]
    else:
        pytest.fail("the TLS tests' certificates are made by fieldhub-test-certs: set FIELDHUB_TEST_CERTS to it "
                    "(cargo build -p fieldhub-testkit --bin fieldhub-test-certs) or install Rust's cargo")
    made = subprocess.run(command, cwd=REPO, capture_output=True, text=True)
    assert made.returncode == 0, f"{' '.join(command)} failed: {made.stderr}"


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("certs")
    make_certs(directory)
    return directory


@pytest.fixture(scope="module")
def mutual_hub(certs):
    """A hub whose TCP port speaks TLS and wants a certificate of ca.crt."""
    tls = dict(tls_ca=str(certs / "ca.crt"), tls_cert=str(certs / "client.crt"), tls_key=str(certs / "client.key"))
    hub = Hub(**tls, config=f"""
[hub]
tls_cert = "{certs / 'hub.crt'}"
tls_key = "{certs / 'hub.key'}"
tls_client_ca = "{certs / 'ca.crt'}"

[[channel]]
name = "can0"
""")
    yield hub
    hub.stop()


def tls_url(hub):
    return hub.url.replace("tcp://", "tls://", 1)


def test_buses_with_a_client_certificate_exchange_frames_in_order(mutual_hub, certs):
    tls = dict(tls_ca=certs / "ca.crt", tls_cert=str(certs / "client.crt"), tls_key=str(certs / "client.key"))
    sender = can.Bus(interface="fieldhub", channel="can0", hub=tls_url(mutual_hub), **tls)
    receiver = can.Bus(interface="fieldhub", channel="can0", hub=tls_url(mutual_hub), block_on_overflow=True, **tls)
    try:
        for n in range(500):
            sender.send(can.Message(arbitration_id=0x100, data=n.to_bytes(2, "little"), is_extended_id=False))
        got = [receiver.recv(10) for _ in range(500)]
        assert [int.from_bytes(m.data, "little") for m in got] == list(range(500))
    finally:
        sender.shutdown()
        receiver.shutdown()


def test_the_hub_class_speaks_to_a_tls_hub_over_tls_and_https(mutual_hub):
    assert mutual_hub.url.startswith("tls://127.0.0.1:")
    assert [c["name"] for c in mutual_hub.channels()] == ["can0"]
    stranger = Hub.attach(mutual_hub.url, tls_ca=mutual_hub.tls["tls_ca"])
    with pytest.raises(Exception, match="(?i)certificate"):
        stranger.channels()


def test_a_bus_without_a_certificate_is_refused_saying_what_to_set(mutual_hub, certs):
    with pytest.raises(can.CanInitializationError) as refused:
        can.Bus(interface="fieldhub", channel="can0", hub=tls_url(mutual_hub), tls_ca=str(certs / "ca.crt"))
    assert "FIELDHUB_TLS_CERT" in str(refused.value)


def test_a_bus_that_does_not_trust_the_hub_is_refused_saying_to_set_the_ca(mutual_hub, certs):
    with pytest.raises(can.CanInitializationError) as refused:
        can.Bus(
            interface="fieldhub", channel="can0", hub=tls_url(mutual_hub), tls_ca=str(certs / "other-ca.crt"),
            tls_cert=str(certs / "client.crt"), tls_key=str(certs / "client.key"),
        )
    assert "FIELDHUB_TLS_CA" in str(refused.value)
