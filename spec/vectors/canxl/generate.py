"""Writes frames.json beside this script and ../raw/frames.json: the vectors of the
`canxl` and `raw` frame kinds (spec/protocol.md 4, 4.1.2, 4.1.3), built from the
spec's layouts independently of any implementation's encoder. Each vector also says
what a peer that does not implement the kind answers (`without_kind`: the error met
first when the record's kind is unknown, spec/protocol.md 4.4). Run it after
changing those sections; the implementations are tested against the files."""
import json
import os
import struct

KIND = {"can": 0, "canfd": 1, "error": 2, "lin": 3, "canxl": 4, "raw": 5}
FLAG = {
    "canxl": {"sec": 0x01, "rrs": 0x02, "echo": 0x10},
    "raw": {"echo": 0x10},
    "can": {"extended": 0x01, "remote": 0x02, "echo": 0x10},
    "canfd": {"extended": 0x01, "brs": 0x04, "esi": 0x08, "echo": 0x10},
}
CODE = {
    "truncated": "malformed", "trailing_bytes": "malformed", "reserved_not_zero": "malformed",
    "unknown_frame_kind": "invalid_frame", "reserved_flags": "invalid_frame",
    "record_too_long": "invalid_frame", "invalid_frame": "invalid_frame",
}


def record(r, flag_bits=None, reserved=0):
    """A record's bytes: the 32-byte header, a canxl record's af, the data."""
    flags = sum(FLAG[r["kind"]][f] for f in r["flags"]) if flag_bits is None else flag_bits
    head = struct.pack("<HBBIQQIHBB", r["port"], KIND[r["kind"]], flags, r["id"], r["seq"],
                       r["timestamp_ns"], r["sender"], r["len"], r["len8_dlc"], reserved)
    af = struct.pack("<I", r["af"]) if r["kind"] == "canxl" else b""
    return head + af + bytes.fromhex(r["data"])


def frames(body_records):
    body = struct.pack("<BHB", 0x20, len(body_records), 0) + b"".join(body_records)
    return struct.pack("<I", len(body)) + body


def xl(port=1, prio=0x123, vcid=0, flags=(), sdt=0, af=0, data="a5", seq=0, ts=0, sender=0):
    return {"port": port, "kind": "canxl", "flags": list(flags), "id": prio | vcid << 16,
            "seq": seq, "timestamp_ns": ts, "sender": sender, "len": len(data) // 2,
            "len8_dlc": sdt, "af": af, "data": data}


def raw(port=1, id=0, flags=(), data="", seq=0, ts=0, sender=0):
    return {"port": port, "kind": "raw", "flags": list(flags), "id": id, "seq": seq,
            "timestamp_ns": ts, "sender": sender, "len": len(data) // 2, "len8_dlc": 0,
            "data": data}


def pattern(n):
    return bytes(i % 251 for i in range(n)).hex()


def refusal(error):
    return {"error": error, "code": CODE[error]}


def valid(name, records, note=None):
    v = {"name": name, "valid": True, "hex": frames([record(r) for r in records]).hex(),
         "message": {"type": "frames", "records": records},
         "without_kind": refusal("unknown_frame_kind")}
    if note:
        v["note"] = note
    return v


def invalid(name, body, error, without, note):
    return {"name": name, "valid": False, "hex": body.hex(), "error": error, "code": CODE[error],
            "without_kind": refusal(without), "note": note}


CLASSIC = {"port": 1, "kind": "can", "flags": [], "id": 0x124, "seq": 0, "timestamp_ns": 0,
           "sender": 0, "len": 2, "len8_dlc": 0, "data": "0102"}
FD = {"port": 1, "kind": "canfd", "flags": ["brs"], "id": 0x122, "seq": 0, "timestamp_ns": 0,
      "sender": 0, "len": 12, "len8_dlc": 0, "data": pattern(12)}

canxl = [
    valid("canxl_one_byte", [xl()], "the shortest XL frame: 1 data byte, SDT, VCID and AF 0"),
    valid("canxl_vcid_sdt_af_sec", [xl(prio=0x7FF, vcid=0xAB, flags=["sec"], sdt=0x03, af=0x12345678, data=pattern(16))],
          "id 0xAB07FF: VCID 0xAB in bits 16..23 as in canxl_frame.prio; SDT in len8_dlc; AF after the header"),
    valid("canxl_rrs_echo_from_hub", [xl(port=2, prio=0, vcid=0xFF, flags=["rrs", "echo"], sdt=0xFF, af=0xFFFFFFFF,
                                         data=pattern(64), seq=9, ts=1700000000123456789, sender=7)],
          "hub to client: the sender's own frame confirmed, every header field at its largest"),
    valid("canxl_2048_bytes", [xl(prio=0x100, data=pattern(2048))], "the longest XL frame: 36 + 2048 record bytes"),
    valid("canxl_between_fd_and_classic", [FD, xl(prio=0x123, vcid=1, sdt=0x01, af=0x00000100, data=pattern(65)), CLASSIC],
          "one batch of a canxl channel's three kinds; records follow each other at 32 + len, 36 + len for canxl"),
]
one = xl(data="a5")
head_af = record(one)[:36]
canxl += [
    invalid("canxl_len_0", frames([record(xl(data=""))]), "invalid_frame", "unknown_frame_kind",
            "an XL frame carries 1..2048 data bytes"),
    invalid("canxl_len_2049", frames([record(xl(data=pattern(2049)))]), "record_too_long", "record_too_long",
            "checked before the kind: a peer without canxl reports the same"),
    invalid("canxl_id_bit_11", frames([record(xl(prio=0x800))]), "invalid_frame", "unknown_frame_kind",
            "the priority identifier has 11 bits"),
    invalid("canxl_id_bit_24", frames([record(xl(prio=0x123 | 1 << 24))]), "invalid_frame", "unknown_frame_kind",
            "only bits 0..10 (priority) and 16..23 (VCID) of id may be set"),
    invalid("canxl_flag_0x04", frames([record(one, flag_bits=0x04)]), "invalid_frame", "unknown_frame_kind",
            "0x04 (BRS on canfd) means nothing on canxl and must be 0"),
    invalid("canxl_reserved_flag", frames([record(one, flag_bits=0x20)]), "reserved_flags", "unknown_frame_kind",
            "0x20 is reserved on every kind"),
    invalid("canxl_reserved_byte", frames([record(one, reserved=1)]), "reserved_not_zero", "unknown_frame_kind",
            "the record's byte 31"),
    invalid("canxl_af_cut", frames([head_af[:34]]), "truncated", "unknown_frame_kind",
            "the body ends inside the acceptance field: a peer without canxl stops at the kind"),
    invalid("canxl_data_cut", frames([head_af]), "truncated", "unknown_frame_kind",
            "AF present, the 1 data byte missing"),
    invalid("canxl_len_counts_af", frames([record(xl(data=pattern(4)))[:36] + b"\xa5"]), "truncated", "unknown_frame_kind",
            "len 4 for 1 data byte after the AF: len is the payload alone"),
    invalid("canxl_trailing_byte", frames([record(one) + b"\x00"]), "trailing_bytes", "unknown_frame_kind",
            "one byte after the last record"),
]

raws = [
    valid("raw_empty", [raw(id=0)], "a generic frame may carry no data (a token, a poll)"),
    valid("raw_any_id", [raw(id=0xFFFFFFFF, data="010306")], "id is the access rule's: every u32 is valid"),
    valid("raw_echo_from_hub", [raw(port=3, id=0x11, flags=["echo"], data=pattern(256), seq=1, ts=5, sender=2)],
          "hub to client: the sender's own frame confirmed"),
    valid("raw_2048_bytes", [raw(id=7, data=pattern(2048))], "the longest generic frame"),
]
r1 = raw(id=5, data="0a0b")
raws += [
    invalid("raw_len8_dlc", frames([record(dict(r1, len8_dlc=1))]), "invalid_frame", "unknown_frame_kind",
            "len8_dlc is 0 on raw"),
    invalid("raw_flag_extended", frames([record(r1, flag_bits=0x01)]), "invalid_frame", "unknown_frame_kind",
            "only ECHO is allowed on raw"),
    invalid("raw_len_2049", frames([record(raw(data=pattern(2049)))]), "record_too_long", "record_too_long",
            "checked before the kind"),
    invalid("raw_data_cut", frames([record(r1)[:33]]), "truncated", "unknown_frame_kind",
            "1 of 2 data bytes"),
    invalid("raw_header_cut", frames([record(r1)[:20]]), "truncated", "truncated",
            "the header is read before its kind: every peer reports the short header"),
]

here = os.path.dirname(os.path.abspath(__file__))
for path, description, vectors in [
    (os.path.join(here, "frames.json"),
     "FRAMES with canxl records (spec/protocol.md 4.1.2): priority, VCID, SDT, SEC, RRS, AF, 1..2048 bytes, "
     "mixed with canfd and can records; without_kind is what a peer that does not implement canxl answers",
     canxl),
    (os.path.join(here, "..", "raw", "frames.json"),
     "FRAMES with raw records (spec/protocol.md 4.1.3): any id, 0..2048 bytes; without_kind is what a peer "
     "that does not implement raw answers",
     raws),
]:
    with open(path, "w", encoding="utf-8") as f:
        json.dump({"description": description, "vectors": vectors}, f, indent=2)
        f.write("\n")
