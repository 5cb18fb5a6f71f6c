"""Nested multiplexing in a rest-bus simulation (issue 41): in
``nested_mux.dbc`` the multiplexor ``Page`` (``m1M``) is itself selected by
``Service`` 1 and selects ``Voltage`` (0) or ``Current`` (1-2) through
``SG_MUL_VAL_``. For each selector combination set from pytest, the frame
the simulation sends at the next cycle decodes with ``cantools`` to exactly
the values set — the signals the whole chain selects and no other — and a
DBC whose multiplexors select each other in a circle is refused naming its
line."""

import pathlib

import cantools
import pytest

import fieldhub

DATA = pathlib.Path(__file__).resolve().parents[2] / "crates" / "fieldhub-rbs" / "tests" / "data"
NESTED = DATA / "nested_mux.dbc"
DIAG = 0x500

CONFIG = f"""
[[channel]]
name = "can0"

[[rbs]]
dbc = "{NESTED}"
channel = "can0"
except = ["DUT"]
"""

COMBINATIONS = [
    {"Service": 1, "Page": 0, "Voltage": 13.5, "Flags": 1},
    {"Service": 1, "Page": 1, "Current": -5.5, "Flags": 2},
    {"Service": 1, "Page": 2, "Current": 250, "Flags": 3},
    {"Service": 2, "Status": 7, "Flags": 4},
]


def last_diag(bus):
    """The payload of the last Diag frame waiting for ``bus``."""
    last = None
    while (message := bus.recv(0)) is not None:
        if message.arbitration_id == DIAG:
            last = bytes(message.data)
    assert last is not None, "no Diag frame in this step"
    return last


def test_every_selector_combination_decodes_with_cantools_to_exactly_the_values_set():
    diag = cantools.database.load_file(NESTED).get_message_by_name("Diag")
    with fieldhub.Hub(CONFIG, time="virtual") as hub:
        bus = hub.bus("can0", synchronized=True)
        try:
            bus.step(0.01)
            start = diag.decode(last_diag(bus), decode_choices=False)
            assert start == {"Service": 1, "Page": 0, "Voltage": 12.0, "Flags": 165}, "the start values"
            for values in COMBINATIONS:
                hub.rbs().set("Diag", **values)
                bus.step(0.01)
                decoded = diag.decode(last_diag(bus), decode_choices=False)
                assert decoded == pytest.approx(values), f"set {values}, decoded {decoded}"
                assert decoded.keys() == values.keys()
        finally:
            bus.shutdown()


def test_a_circular_chain_of_multiplexors_is_refused_naming_its_line(tmp_path):
    circular = tmp_path / "circular.dbc"
    circular.write_text(NESTED.read_text().replace("SG_MUL_VAL_ 1280 Page Service 1-1;",
                                                   "SG_MUL_VAL_ 1280 Page Current 1-1;"))
    with fieldhub.Hub('[[channel]]\nname = "can0"\n') as hub:
        with pytest.raises(fieldhub.HubError, match=r"circular.dbc: line 26: the DBC file does not parse: "
                                                     r"circular multiplexing in message Diag: Page by Current, "
                                                     r"Current by Page; a multiplexor cannot select itself") as refused:
            hub.start_rbs(circular, "can0")
        assert refused.value.status == 400
