"""A LIN channel configured from an LDF (``[channel.lin] ldf``) is what the
third-party ``ldfparser`` reads from the same file: the speed, every frame
(identifier, length, publishers, checksum model) and the chosen schedule
table's entries and delays, as the hub reports them (``GET /api/v1/channels``,
what ``fieldhub ctl channels`` prints)."""

from pathlib import Path

import ldfparser
import pytest
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


def ldfparser_schedule(ldf, table):
    """The table's entries as (identifier, delay in ms)."""
    chosen = ldf.get_schedule_table(table) if table else next(iter(ldf.get_schedule_tables()))
    def frame_id(entry):
        if isinstance(entry, MasterRequestEntry):
            return 0x3C
        if isinstance(entry, SlaveResponseEntry):
            return 0x3D
        assert isinstance(entry, LinFrameEntry), entry
        return entry.frame.frame_id
    return [(frame_id(e), round(e.delay * 1000)) for e in chosen.schedule]


@pytest.mark.parametrize("file,table", [
    ("body.ldf", None), ("body.ldf", "Diagnostics"), ("mixed.ldf", "Fast"), ("mixed.ldf", "All"),
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
    assert [(s["id"], s["delay_ms"]) for s in lin["schedule"]] == ldfparser_schedule(ldf, table)
