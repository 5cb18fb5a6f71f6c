"""Independent reference for the CAN XL bit-timing vectors: builds the explicit
on-wire bit stream of a CAN XL data frame, field by field with its real values
(CRCs left as placeholders: fixed stuffing makes the length independent of
them), inserts the stuff bits one at a time, and counts.

    python3 reference_xl.py write                     # (re)write canxl_bit_timing.json
    python3 reference_xl.py check COUNT SEED [fieldhub]  # compare random frames with `fieldhub frame-bits`

The layout and its sources are in crates/fieldhub-proto/src/bits/xl.rs and
spec/protocol.md 4.1.2: SOF, priority (11), RRS, IDE, FDF, XLF with dynamic
stuffing; resXL, ADH at the nominal rate; DH1, DH2, then DL1 SDT SEC DLC(11)
SBC(3) PCRC(13) VCID AF(32) data FCRC(32) with a fixed stuff bit after every
tenth bit, then FCP(4), all at the XL data rate; DAH AH1 AL1 AH2, ACK slot,
ACK delimiter, EOF(7) and the intermission(3) at the nominal rate."""
import json, random, subprocess, sys, os

def bits_of(value, width):
    return [(value >> i) & 1 for i in range(width - 1, -1, -1)]

def encode(prio, rrs, sec, vcid, sdt, af, data):
    """(total, stuff, nominal, xl) bits of the frame."""
    wire = []  # (bit, is_stuff, at_xl_rate)
    last, run = None, 0
    for b in [0] + bits_of(prio, 11) + [rrs, 0, 1, 1]:
        wire.append((b, False, False))
        run = run + 1 if b == last else 1
        last = b
        if run == 5:
            wire.append((1 - b, True, False))
            last, run = 1 - b, 1
    wire += [(0, False, False), (1, False, False)]  # resXL, ADH
    wire += [(1, False, True), (1, False, True)]    # DH1, DH2
    stretch = [0] + bits_of(sdt, 8) + [sec] + bits_of(len(data) - 1, 11)
    stretch += [0, 1, 0] + bits_of(0, 13)            # SBC, PCRC placeholders
    stretch += bits_of(vcid, 8) + bits_of(af, 32)
    for byte in data:
        stretch += bits_of(byte, 8)
    stretch += bits_of(0, 32)                         # FCRC placeholder
    for k, b in enumerate(stretch):
        wire.append((b, False, True))
        if (k + 1) % 10 == 0 and k + 1 < len(stretch):
            wire.append((1 - b, True, True))
    wire += [(b, False, True) for b in (1, 1, 0, 0)]                 # FCP
    wire += [(b, False, False) for b in (1, 1, 0, 1)]                # DAH AH1 AL1 AH2
    wire += [(b, False, False) for b in [0, 1] + [1] * 7 + [1] * 3]  # ACK, EOF, intermission
    total = len(wire)
    stuff = sum(1 for w in wire if w[1])
    xl = sum(1 for w in wire if w[2])
    return total, stuff, total - xl, xl

def text(prio, rrs, sec, vcid, sdt, af, data):
    """can-utils' CAN XL form: VVPPP#FF:SS:AAAAAAAA#data."""
    flags = 0x80 | (0x01 if sec else 0) | (0x02 if rrs else 0)
    return f"{vcid:02X}{prio:03X}#{flags:02X}:{sdt:02X}:{af:08X}#" + "".join(f"{b:02X}" for b in data)

def duration_ns(nominal_bits, xl_bits, bitrate, xl_bitrate):
    return nominal_bits * 1_000_000_000 // bitrate + xl_bits * 1_000_000_000 // xl_bitrate

CASES = [
    # (prio, rrs, sec, vcid, sdt, af, data, bitrate, xl_data_bitrate)
    (0x123, 0, 0, 0, 0, 0, [0x55], 500_000, 10_000_000),
    (0x123, 0, 0, 0, 0, 0, [0x55], 1_000_000, 10_000_000),
    (0x000, 0, 0, 0, 0, 0, [0x00], 500_000, 10_000_000),
    (0x7FF, 1, 0, 0, 0, 0, [0xFF], 500_000, 10_000_000),
    (0x7FF, 0, 0, 0, 0, 0, [0xFF], 500_000, 10_000_000),
    (0x0F0, 0, 1, 0x42, 0x03, 0x1234_5678, list(range(8)), 500_000, 8_000_000),
    (0x0F0, 0, 0, 0, 0, 0, list(range(64)), 1_000_000, 5_000_000),
    (0x400, 0, 0, 0x01, 0x07, 0xFFFF_FFFF, [0xA5] * 100, 500_000, 20_000_000),
    (0x3E0, 0, 0, 0, 0, 0, [0x00] * 512, 1_000_000, 10_000_000),
    (0x123, 0, 0, 0, 0, 0, [0x55] * 2048, 1_000_000, 10_000_000),
    (0x001, 0, 0, 0, 0, 0, [0x00] * 2048, 500_000, 2_000_000),
    (0x555, 0, 0, 0xAA, 0x55, 0xAAAA_AAAA, [0x55] * 1500, 500_000, 10_000_000),
]

def write():
    vectors = []
    for prio, rrs, sec, vcid, sdt, af, data, rate, xl_rate in CASES:
        total, stuff, nominal, xl = encode(prio, rrs, sec, vcid, sdt, af, data)
        vectors.append({
            "frame": text(prio, rrs, sec, vcid, sdt, af, data),
            "bitrate": rate,
            "xl_data_bitrate": xl_rate,
            "bits": total,
            "stuff_bits": stuff,
            "nominal_bits": nominal,
            "data_bits": xl,
            "duration_ns": duration_ns(nominal, xl, rate, xl_rate),
        })
    doc = {
        "description": "Exact on-wire lengths of CAN XL data frames (ISO 11898-1:2024 as described by the public sources "
                       "named in crates/fieldhub-proto/src/bits/xl.rs and spec/protocol.md 4.1.2): bits from SOF through "
                       "the 3-bit intermission, stuff bits (dynamic ones in SOF..XLF, a fixed one after every tenth bit "
                       "of DL1..FCRC), bits at the nominal rate (SOF..ADH, DAH..intermission) and at the XL data rate "
                       "(DH1..FCP), and the duration at `bitrate` and `xl_data_bitrate`. Written by reference_xl.py in "
                       "this folder, which builds the stuffed bit stream explicitly (python3 reference_xl.py check "
                       "COUNT SEED compares random frames with the fieldhub command). Frames are in can-utils' CAN XL "
                       "text form.",
        "vectors": vectors,
    }
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "canxl_bit_timing.json")
    with open(path, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")

def check(count, seed, binary):
    rng = random.Random(seed)
    bad = 0
    for _ in range(count):
        n = rng.choice([1, 2, 7, 8, 64, rng.randrange(1, 2049)])
        case = (rng.choice([0, 0x7FF, 0x400, rng.randrange(0x800)]), rng.randrange(2), rng.randrange(2),
                rng.randrange(256), rng.randrange(256), rng.randrange(1 << 32),
                [rng.choice([0, 0xFF, rng.randrange(256)]) for _ in range(n)])
        answer = json.loads(subprocess.run([binary, "frame-bits", text(*case), "--json"],
                                           capture_output=True, text=True, check=True).stdout)
        got = (answer["bits"], answer["stuff_bits"], answer["nominal_bits"], answer["data_bits"])
        want = encode(*case)
        if got != want:
            bad += 1
            if bad < 15:
                print("MISMATCH", text(*case)[:40], "rust", got, "reference", want)
    print(f"{count} frames, {bad} mismatches")
    return bad

if __name__ == "__main__":
    if sys.argv[1:2] == ["write"]:
        write()
    else:
        sys.exit(1 if check(int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else "fieldhub") else 0)
