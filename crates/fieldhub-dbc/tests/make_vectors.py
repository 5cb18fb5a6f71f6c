"""Write vectors.json: python cantools' decoding of random frames of
vectors.dbc, which tests/cantools.rs checks fieldhub-dbc against.

    python make_vectors.py            # rewrite vectors.json
    python make_vectors.py --check    # exit 1 if vectors.json differs

The frames are random (seeded, so the file is stable) with a few chosen
multiplexor values, so every multiplexed branch is decoded. Values are
compared by tests/cantools.rs with a relative tolerance, so the exact float
printing here does not matter.
"""

import json
import math
import random
import sys
from pathlib import Path

import cantools

HERE = Path(__file__).resolve().parent
FRAMES_PER_MESSAGE = 40


def frames(db):
    rng = random.Random(22)
    for message in db.messages:
        for i in range(FRAMES_PER_MESSAGE):
            data = bytearray(rng.randrange(256) for _ in range(message.length))
            if message.name == "Muxed":
                data[0] = (1, 2)[i % 2]
            if message.name == "ExtMux":
                data[0] = (0x21, 0x03, 0x04, 0x05, 0x06, 0x09)[i % 6]
            yield message, bytes(data)


def vectors():
    db = cantools.database.load_file(str(HERE / "vectors.dbc"))
    out = []
    for message, data in frames(db):
        decoded = message.decode(data, decode_choices=False, scaling=True)
        if not all(math.isfinite(value) for value in decoded.values()):
            continue  # JSON has no NaN or infinity; random floats rarely are
        out.append({
            "id": message.frame_id,
            "extended": message.is_extended_frame,
            "data": data.hex().upper(),
            "signals": {name: float(value) for name, value in decoded.items()},
        })
    return out


def main():
    text = json.dumps(vectors(), indent=1) + "\n"
    target = HERE / "vectors.json"
    if "--check" in sys.argv:
        if target.read_text() != text:
            print("vectors.json is not cantools' decoding of vectors.dbc; run make_vectors.py")
            sys.exit(1)
        return
    target.write_text(text)


if __name__ == "__main__":
    main()
