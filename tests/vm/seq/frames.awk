# The sequence-numbered frame family of canseq.c as a candump log, for
# `fieldhub replay`: frame i (0 <= i < n), 200 us apart, by i % 3:
#   0: classic, id BASE, 8 bytes
#   1: CAN FD with BRS, extended id 0x1F000000 | BASE, 64 bytes
#   2: CAN FD, id BASE + 1, 12 bytes
# data[0..4] = i big-endian, data[k] = (i + k) & 0xff for k >= 4.
#
#   awk -v n=COUNT -v base=BASE_DECIMAL -v channel=can0 -f frames.awk
BEGIN {
    for (i = 0; i < n; i++) {
        k = i % 3; len = (k == 0) ? 8 : (k == 1) ? 64 : 12
        data = sprintf("%08X", i)
        for (j = 4; j < len; j++) data = data sprintf("%02X", (i + j) % 256)
        if (k == 0) frame = sprintf("%03X#", base) data
        else if (k == 1) frame = sprintf("%08X##1", 520093696 + base) data
        else frame = sprintf("%03X##0", base + 1) data
        printf "(%d.%06d) %s %s\n", i / 5000, (i % 5000) * 200, channel, frame
    }
}
