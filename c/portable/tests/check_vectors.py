#!/usr/bin/env python3
"""Run every wire vector of spec/vectors/*.json through the portable C client's
codec (vector_tool) and check it as spec/README.md says: a valid vector
decodes to its message and encodes back to exactly its bytes; an invalid one
fails with its error kind and wire code; an AUTH vector's MAC is what
fhp_auth_mac computes from its `auth` field (token, challenge, hello). The
portable client implements neither the `canxl` nor the `raw` kind, so each
vector of spec/vectors/canxl/ and spec/vectors/raw/ fails with the error its
`without_kind` names (spec/protocol.md 4.1). It does not step ahead either, so
of vectors/ahead/ it must refuse cleanly what spec/protocol.md 3.1 and 3.11a
say a peer without AHEAD refuses — a HELLO with AHEAD as reserved_options,
STEP_AHEAD as unknown_type — and read the rest (a frame record stamped with a
bus time) as the vector says. Nor does it implement the `lin` kind: of
vectors/lin/frames.json every FRAMES message fails at its first record's kind
(unknown_frame_kind: each header is whole and short, spec/protocol.md 4.4)
and PORT_OPENED of a LIN channel reads without the LIN flag, a channel flag
it does not know and ignores.

    check_vectors.py SPEC_VECTORS_DIR VECTOR_TOOL_COMMAND...

The command may start with a runner (qemu-s390x-static for a big-endian build).
"""
import glob
import json
import os
import struct
import subprocess
import sys


def str8(text):
    data = text.encode("utf-8")
    return bytes([len(data)]) + data


def message_hex(shape):
    """The wire bytes of a CHALLENGE or HELLO shape (spec/README.md)."""
    if shape["type"] == "challenge":
        body = b"\x04" + bytes.fromhex(shape["nonce"]) + str8(shape["hub_name"])
    else:
        options = 1 if shape.get("options") == ["synchronized"] else 0
        body = b"\x01FHUB" + struct.pack("<H", shape["version"]) + str8(shape["name"])
        body += struct.pack("<I", options) if options else b""
    return (struct.pack("<I", len(body)) + body).hex()


# Frame kinds of spec/protocol.md 4.1 this client does not implement; their
# vectors are in folders of these names.
UNIMPLEMENTED_KINDS = ("canxl", "raw")


def refused_without_ahead(v):
    """What a peer without AHEAD makes of a vector of vectors/ahead/."""
    body = bytes.fromhex(v["hex"])[4:]
    if body[:1] == b"\x72":
        return {**v, "valid": False, "error": "unknown_type", "code": "malformed"}
    if v["valid"] and v["message"]["type"] == "hello":
        return {**v, "valid": False, "error": "reserved_options", "code": "malformed", "limit": "hello"}
    return v


def refused_without_lin(v):
    """What a peer without the lin kind makes of a vector of vectors/lin/:
    FRAMES fails at its first record's kind; PORT_OPENED decodes with the
    LIN channel flag, a bit it does not know, ignored (spec 3)."""
    if bytes.fromhex(v["hex"])[4:5] == b"\x20":
        return {**v, "valid": False, "error": "unknown_frame_kind", "code": "invalid_frame"}
    if v["valid"] and v["message"]["type"] == "port_opened":
        flags = [f for f in v["message"]["channel_flags"] if f != "lin"]
        return {**v, "message": {**v["message"], "channel_flags": flags}}
    return v


def main():
    folder, tool = sys.argv[1], sys.argv[2:]
    files = sorted(glob.glob(os.path.join(folder, "*.json")) + glob.glob(os.path.join(folder, "ahead", "*.json")))
    # vectors/lin/arithmetic.json holds no wire messages.
    files.append(os.path.join(folder, "lin", "frames.json"))
    unimplemented = [p for kind in UNIMPLEMENTED_KINDS for p in sorted(glob.glob(os.path.join(folder, kind, "*.json")))]
    if not files or len({os.path.dirname(p) for p in unimplemented}) != len(UNIMPLEMENTED_KINDS):
        sys.exit(f"no vector files in {folder} or in its folders {UNIMPLEMENTED_KINDS}")
    cases = []
    for path in unimplemented:
        with open(path, encoding="utf-8") as f:
            for v in json.load(f)["vectors"]:
                v = dict(v, valid=False, **v["without_kind"])
                cases.append((os.path.relpath(path, folder), v, "message"))
    for path in files:
        with open(path, encoding="utf-8") as f:
            for v in json.load(f)["vectors"]:
                if os.path.basename(os.path.dirname(path)) == "ahead":
                    v = refused_without_ahead(v)
                if os.path.basename(os.path.dirname(path)) == "lin":
                    v = refused_without_lin(v)
                is_hello = v.get("limit") == "hello" or (v["valid"] and v["message"]["type"] == "hello")
                cases.append((os.path.basename(path), v, "hello" if is_hello else "message"))
                if "auth" in v:
                    a = v["auth"]
                    args = f"{a['token'].encode('utf-8').hex()} {message_hex(a['challenge'])} {message_hex(a['hello'])}"
                    cases.append((os.path.basename(path), v, "auth " + args))
    stdin = "".join(f"{limit} {v['hex']}\n" if not limit.startswith("auth") else f"{limit}\n"
                    for _, v, limit in cases)
    run = subprocess.run(tool, input=stdin, capture_output=True, text=True, check=False)
    if run.returncode != 0:
        sys.exit(f"{tool} failed with status {run.returncode}: {run.stderr}")
    lines = run.stdout.splitlines()
    if len(lines) != len(cases):
        sys.exit(f"{tool} answered {len(lines)} lines for {len(cases)} vectors")
    failures = []
    for (file, v, limit), line in zip(cases, lines):
        got = json.loads(line)
        where = f"{file}: {v['name']}"
        if limit.startswith("auth"):
            if got["mac"] != v["message"]["mac"]:
                failures.append(f"{where}: MAC {got['mac']}, want {v['message']['mac']}")
        elif v["valid"]:
            if not got["valid"]:
                failures.append(f"{where}: rejected with {got['error']}")
            elif got["message"] != v["message"]:
                failures.append(f"{where}: decoded {got['message']}, want {v['message']}")
            elif got["encoded"] != v["hex"]:
                failures.append(f"{where}: encoded {got['encoded']}, want {v['hex']}")
            elif got["rest"] != 0:
                failures.append(f"{where}: {got['rest']} bytes left after the message")
        elif got["valid"]:
            failures.append(f"{where}: accepted, want the error {v['error']}")
        elif (got["error"], got["code"]) != (v["error"], v["code"]):
            failures.append(f"{where}: error {got['error']}/{got['code']}, want {v['error']}/{v['code']}")
    for failure in failures:
        print(failure)
    print(f"{len(cases) - len(failures)} of {len(cases)} vectors of {len(files) + len(unimplemented)} files pass")
    sys.exit(1 if failures else 0)


main()
