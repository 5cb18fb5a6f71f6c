# Check a candump log (`fieldhub dump -L`) for the frame family BASE of
# frames.awk: all n frames, in order, unchanged; frames of other ids are
# ignored. Prints one line; exit status 1 on the first wrong frame or a
# short count.
#
#   awk -v n=COUNT -v base=BASE_DECIMAL -f check.awk DUMP.log
BEGIN {
    ids[sprintf("%03X", base)] = 1; ids[sprintf("%08X", 520093696 + base)] = 1; ids[sprintf("%03X", base + 1)] = 1
}
{
    split($3, part, "#"); id = part[1]
    if (!(id in ids)) next
    data = (substr($3, length(id) + 2, 1) == "#") ? substr($3, length(id) + 4) : part[2]
    k = got % 3
    want_id = (k == 0) ? sprintf("%03X", base) : (k == 1) ? sprintf("%08X", 520093696 + base) : sprintf("%03X", base + 1)
    want_len = (k == 0) ? 8 : (k == 1) ? 64 : 12
    want = sprintf("%08X", got)
    for (j = 4; j < want_len; j++) want = want sprintf("%02X", (got + j) % 256)
    if (id != want_id || data != want) { printf "frame %d: got %s, want %s#%s\n", got, $3, want_id, want; bad = 1; exit }
    if (got == 0) { first = substr($1, 2) + 0 }
    last = substr($1, 2) + 0; got++
}
END {
    if (bad) exit 1
    if (got != n) { printf "received %d of %d frames\n", got, n; exit 1 }
    span = last - first
    printf "received %d frames in order in %.3f s (%.0f frames/s)\n", got, span, (span > 0) ? got / span : 0
}
