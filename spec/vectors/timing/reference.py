"""Independent reference for the bit-timing vectors: builds the explicit
on-wire bit stream of a frame (ISO 11898-1:2015) and compares its counts with
what `fieldhub frame-bits --json` says, for random frames.

    python3 reference.py COUNT SEED [PATH/TO/fieldhub]

(The fieldhub binary defaults to `fieldhub` on PATH.)"""
import json, random, subprocess, sys

FD_LENGTHS = [0,1,2,3,4,5,6,7,8,12,16,20,24,32,48,64]

def bits_of(value, width):
    return [(value >> i) & 1 for i in range(width - 1, -1, -1)]

def crc(bits, poly, width, init):
    reg = init
    top = 1 << (width - 1)
    mask = (1 << width) - 1
    for b in bits:
        fb = b ^ (1 if reg & top else 0)
        reg = (reg << 1) & mask
        if fb:
            reg ^= poly
    return reg

def encode(fd, ext, rtr, brs, esi, ident, dlc, data):
    """Returns (wire bits list of (bit, kind, phase)), kinds: 'f' field, 'd' dynamic stuff, 'x' fixed stuff."""
    raw = [0]
    if ext:
        raw += bits_of(ident >> 18, 11) + [1, 1] + bits_of(ident & 0x3FFFF, 18)
        raw += [0 if fd else rtr]
        raw += [1, 0] if fd else [0, 0]  # FDF/r1 , res/r0
    else:
        raw += bits_of(ident, 11) + [0 if fd else rtr, 0]
        raw += [1, 0] if fd else [0]      # FDF, res | r0
    brs_index = None
    if fd:
        brs_index = len(raw)
        raw += [brs, esi]
    raw += bits_of(dlc, 4)
    for byte in data:
        raw += bits_of(byte, 8)
    if not fd:
        raw += bits_of(crc(raw, 0x4599, 15, 0), 15)
    # dynamic stuffing, explicit
    wire = []  # (bit, kind, raw_index or None)
    last, run = None, 0
    for i, b in enumerate(raw):
        wire.append((b, 'f', i))
        run = run + 1 if b == last else 1
        last = b
        if run == 5:
            s = 1 - b
            wire.append((s, 'd', None))
            last, run = s, 1
    if fd:
        dyn = sum(1 for w in wire if w[1] == 'd')
        g = (dyn % 8) ^ ((dyn % 8) >> 1)
        sc = bits_of(g, 3)
        sc.append(sum(sc) % 2)
        n = len(data)
        if n <= 16:
            c = crc([w[0] for w in wire] + sc, 0x1685B, 17, 1 << 16)
            cbits = bits_of(c, 17)
        else:
            c = crc([w[0] for w in wire] + sc, 0x102899, 21, 1 << 20)
            cbits = bits_of(c, 21)
        field = sc + cbits
        # fixed stuff bit first, unless the last wire bit already is a (dynamic) stuff bit
        if wire[-1][1] != 'd':
            wire.append((1 - wire[-1][0], 'x', None))
        else:
            wire[-1] = (wire[-1][0], 'x', None)  # that stuff bit serves as the fixed one
        for k, b in enumerate(field):
            wire.append((b, 'f', 'crc'))
            if (k + 1) % 4 == 0 and k + 1 < len(field):
                wire.append((1 - b, 'x', None))
    tail = [1, 1, 1] + [1] * 7 + [1] * 3
    total = len(wire) + len(tail)
    stuff = sum(1 for w in wire if w[1] in 'dx')
    if fd and brs:
        # position of BRS bit in the wire stream
        pos = next(k for k, w in enumerate(wire) if w[2] == brs_index)
        nominal = pos + 1 + len(tail)
        data_bits = len(wire) - pos - 1
    else:
        nominal, data_bits = total, 0
    return total, stuff, nominal, data_bits

def rand_data(rng, n):
    mode = rng.random()
    if mode < 0.3:
        return [rng.choice([0x00, 0xFF, 0x0F, 0xF0, 0x1F, 0xF8, 0x80, 0x7F, 0x01, 0xFE]) for _ in range(n)]
    if mode < 0.5:
        b = rng.choice([0, 0xFF]); return [b] * n
    return [rng.randrange(256) for _ in range(n)]

def cansend(fd, ext, rtr, brs, esi, ident, dlc, data):
    i = f"{ident:08X}" if ext else f"{ident:03X}"
    if fd:
        flags = (1 if brs else 0) | (2 if esi else 0)
        return f"{i}##{flags:X}" + "".join(f"{b:02X}" for b in data)
    if rtr:
        return f"{i}#R{dlc:X}" if dlc else f"{i}#R"
    s = f"{i}#" + "".join(f"{b:02X}" for b in data)
    if dlc > 8:
        s += f"_{dlc:X}"
    return s

def main(count, seed, binary):
    rng = random.Random(seed)
    cases = []
    for _ in range(count):
        fd = rng.random() < 0.5
        ext = rng.random() < 0.5
        ident = rng.choice([0, (1 << (29 if ext else 11)) - 1, rng.randrange(1 << (29 if ext else 11)),
                            0x155 if not ext else 0x15555555, 0x0F0])
        ident &= (1 << (29 if ext else 11)) - 1
        if fd:
            dlc = rng.randrange(16); n = FD_LENGTHS[dlc]
            brs, esi = rng.random() < 0.5, rng.random() < 0.5
            cases.append((True, ext, 0, int(brs), int(esi), ident, dlc, rand_data(rng, n)))
        else:
            rtr = rng.random() < 0.2
            dlc = rng.randrange(16) if rng.random() < 0.2 and not rtr else rng.randrange(9)
            n = 0 if rtr else min(dlc, 8)
            cases.append((False, ext, int(rtr), 0, 0, ident, dlc, rand_data(rng, n)))
    lines = [cansend(*c) for c in cases]
    bad = 0
    for c, line in zip(cases, lines):
        answer = json.loads(subprocess.run([binary, "frame-bits", line, "--json"],
                                           capture_output=True, text=True, check=True).stdout)
        got = (answer["bits"], answer["stuff_bits"], answer["nominal_bits"], answer["data_bits"])
        want = encode(*c)
        if got != want:
            bad += 1
            if bad < 15:
                print("MISMATCH", line, "rust", got, "reference", want)
    print(f"{len(cases)} frames, {bad} mismatches")

if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3] if len(sys.argv) > 3 else "fieldhub")
