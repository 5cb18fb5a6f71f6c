"""The python-can interface over TLS (``tls://HOST:PORT``) and mutual TLS:
the ``tls_ca``, ``tls_cert`` and ``tls_key`` keyword arguments, and errors
that say what to set. The certificates are made with the openssl command."""

import shutil
import subprocess

import can
import pytest

from fieldhub import Hub

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="the certificates are made with openssl")

MAKE_CERTS = """
set -e
key="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
openssl req -x509 $key -keyout ca.key -out ca.crt -days 2 -subj "/CN=fieldhub test CA"
openssl req -x509 $key -keyout other-ca.key -out other-ca.crt -days 2 -subj "/CN=another CA"
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\n' > hub.ext
openssl req $key -keyout hub.key -out hub.csr -subj "/CN=localhost"
openssl x509 -req -in hub.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out hub.crt -days 2 -extfile hub.ext
openssl req $key -keyout client.key -out client.csr -subj "/CN=python"
printf 'extendedKeyUsage=clientAuth\\n' > client.ext
openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2 -extfile client.ext
"""


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("certs")
    subprocess.run(["sh", "-c", MAKE_CERTS], cwd=directory, check=True, capture_output=True)
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
