"""A LIN channel configured from an LDF (``[channel.lin] ldf``) is what the
third-party ``ldfparser`` reads from the same file: the speed, every frame
(identifier, length, publishers, checksum model), the chosen schedule
table's entries and delays, and the event-triggered frames (identifier,
frames, collision-resolving table) and sporadic frames, as the hub reports
them (``GET /api/v1/channels``, what ``fieldhub ctl channels`` prints)."""

from pathlib import Path

import ldfparser
import pytest
from ldfparser.frame import LinSporadicFrame
from ldfparser.schedule import LinFrameEntry, MasterRequestEntry, SlaveResponseEntry

from fieldhub import Hub

LDF_DIR = Path(__file__).resolve().parents[2] / "crates" / "fieldhub-ldf" / "tests" / "files"


def ldfparser_frames(ldf):
    """Every frame as (name, length, publishers, checksum), by identifier."""
    def protocol(node):
        if node == ldf.master.name:
            return str(ldf.protocol_version)
        return str(ldf.get_slave(node).lin_protocol)

    def checksum(frame_id, publisher):
        return "classic" if frame_id >= 0x3C or protocol(publisher).startswith("1.") else "enhanced"

    frames = {f.frame_id: (f.name, f.length, [f.publisher.name], checksum(f.frame_id, f.publisher.name))
              for f in ldf.get_unconditional_frames()}
    if ldf.master_request_frame is not None:
        request = ldf.master_request_frame
        frames[request.frame_id] = (request.name, request.length, [ldf.master.name], "classic")
    if ldf.slave_response_frame is not None:
        response = ldf.slave_response_frame
        frames[response.frame_id] = (response.name, response.length, [s.name for s in ldf.slaves], "classic")
    return frames


def ldfparser_slots(table):
    """A table's entries as (identifier, sporadic frame's name, delay in ms)."""
    def slot(entry):
        if isinstance(entry, MasterRequestEntry):
            return 0x3C, None
        if isinstance(entry, SlaveResponseEntry):
            return 0x3D, None
        assert isinstance(entry, LinFrameEntry), entry
        if isinstance(entry.frame, LinSporadicFrame):
            return None, entry.frame.name
        return entry.frame.frame_id, None
    return [(*slot(e), round(e.delay * 1000)) for e in table.schedule]


def ldfparser_schedule(ldf, table):
    """The chosen table's slots (the first without a name)."""
    return ldfparser_slots(ldf.get_schedule_table(table) if table else next(iter(ldf.get_schedule_tables())))


def ldfparser_events(ldf):
    """Event-triggered frames as (name, identifier, frames' identifiers,
    collision-resolving slots), and sporadic frames as (name, frames'
    identifiers)."""
    def resolving(event):
        table = event.collision_resolving_schedule_table
        return ldfparser_slots(table) if table is not None else []
    events = [(e.name, e.frame_id, [f.frame_id for f in e.frames], resolving(e))
              for e in ldf.get_event_triggered_frames()]
    sporadic = [(s.name, [f.frame_id for f in s.frames]) for s in ldf.get_sporadic_frames()]
    return events, sporadic


def hub_slots(slots):
    return [(s.get("id"), s.get("sporadic"), s["delay_ms"]) for s in slots]


@pytest.mark.parametrize("file,table", [
    ("body.ldf", None), ("body.ldf", "Diagnostics"), ("mixed.ldf", "Fast"), ("mixed.ldf", "All"),
    ("events.ldf", None), ("events.ldf", "DoorCollision"),
])
def test_an_ldf_configured_lin_channel_is_what_ldfparser_reads(file, table):
    path = LDF_DIR / file
    ldf = ldfparser.parse_ldf(str(path))
    chosen = f'schedule_table = "{table}"\n' if table else ""
    config = f'[[channel]]\nname = "lin"\nprotocol = "lin"\n\n[channel.lin]\nldf = "{path}"\n{chosen}'
    with Hub(config) as hub:
        channel = next(c for c in hub.channels() if c["name"] == "lin")
    assert channel["bitrate"] == ldf.baudrate
    lin = channel["lin"]
    hub_frames = {f["id"]: (f["name"], f["length"], f["publishers"], f["checksum"]) for f in lin["frames"]}
    assert hub_frames == ldfparser_frames(ldf)
    assert hub_slots(lin["schedule"]) == ldfparser_schedule(ldf, table)
    events = [(e["name"], e["id"], e["frames"], hub_slots(e.get("collision_schedule", [])))
              for e in lin.get("event_triggered", [])]
    sporadic = [(s["name"], s["frames"]) for s in lin.get("sporadic", [])]
    assert (events, sporadic) == ldfparser_events(ldf)
