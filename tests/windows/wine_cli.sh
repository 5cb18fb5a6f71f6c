#!/bin/sh
# fieldhub.exe (the Windows build of the CLI, x86_64-pc-windows-gnu) under
# Wine against a Linux hub, over TCP and then TLS:
#   - fieldhub.exe gen sends 10,000 numbered frames (incrementing data) and
#     fieldhub.exe send one more; a Linux `fieldhub dump` gets them in order;
#   - a Linux `fieldhub replay` sends 10,000 numbered frames
#     (tests/vm/seq/frames.awk) and fieldhub.exe dump gets them in order
#     (tests/vm/seq/check.awk);
#   - fieldhub.exe ctl unplugs and plugs a Linux client's port: the frame
#     sent while it was unplugged never reaches it, the next one does;
#   - a C program built with mingw against fieldhub.dll (its import library
#     and include/fieldhub.h), tests/windows/fh_seq.c, exchanges 10,000
#     numbered frames each way with a Linux dump and replay;
#   - fieldhub.exe record, replay, stats and frame-bits do their jobs;
#   - fieldhub.exe bench ping gets 2,000 round trips from fieldhub.exe bench
#     echo, in order, and prints their percentiles (over TCP);
#   - fieldhub.exe bridge and bench latency say they are Linux-only, and
#     shm:// gets a clear error.
# (The hub on Windows, fieldhub.exe hub: wine_hub.sh.)
#
#   wine_cli.sh FIELDHUB_LINUX WINDOWS_DIR [COUNT]
#
# WINDOWS_DIR is the Windows build's output: fieldhub.exe, fieldhub.dll and
# its import library libfieldhub.dll.a.
#
# Needs wine64, x86_64-w64-mingw32-gcc (to build the test-only
# bcryptprimitives.dll Wine 8 lacks: tests/windows/processprng_shim.c,
# never shipped) and openssl (the TLS certificates); make deps installs them.
set -eu
FIELDHUB=$1
WINDIR=$2
COUNT=${3:-10000}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
NAME=wine_cli
. "$HERE/wine_prefix.sh"
command -v openssl >/dev/null || fail "openssl missing (make deps installs it)"
for f in fieldhub.exe fieldhub.dll libfieldhub.dll.a; do
    [ -f "$WINDIR/$f" ] || fail "$WINDIR/$f missing (cargo build --target x86_64-pc-windows-gnu -p fieldhub-cli -p fieldhub-ffi; the target: rustup target add x86_64-pc-windows-gnu, which make deps does)"
done

cp "$WINDIR/fieldhub.exe" "$WINDIR/fieldhub.dll" "$RUN/"
x86_64-w64-mingw32-gcc -std=c99 -O2 -Wall -Wextra -Werror -pedantic -I"$ROOT/include" -o "$RUN/fh_seq.exe" \
    "$HERE/fh_seq.c" -L"$WINDIR" -lfieldhub.dll
# Run from the run directory: the certificates are then relative paths,
# the same under Wine as on Linux.
win() { (cd "$RUN" && "$WINE" fieldhub.exe "$@"); }

cd "$RUN"
key="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
openssl req -x509 $key -keyout ca.key -out ca.crt -days 2 -subj "/CN=wine test CA" >/dev/null 2>&1
openssl req $key -keyout hub.key -out hub.csr -subj "/CN=localhost" >/dev/null 2>&1
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >hub.ext
openssl x509 -req -in hub.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile hub.ext -out hub.crt >/dev/null 2>&1
cat >hub.toml <<TOML
[[channel]]
name = "can0"
protocol = "canfd"
TOML

# start_hub NAME [ARGS...]: a Linux hub on a free loopback port; prints its URL.
start_hub() {
    name=$1
    shift
    FIELDHUB_LOG=info "$FIELDHUB" hub --config hub.toml --listen 127.0.0.1:0 --no-shm \
        --ready-file "$name.json" "$@" >"$name.log" 2>&1 &
    pids="$pids $!"
    wait_for "the $name hub" test -s "$name.json"
}

# exchange SCHEME HUBLOG: every check above against the hub at $URL.
exchange() {
    scheme=$1
    hublog=$2
    # Windows -> Linux: gen's COUNT frames (data: a little-endian counter) and one send.
    "$FIELDHUB" dump --hub "$URL" -L --lossless --port "linux-$scheme" -n $((COUNT + 1)) can0 \
        >"gen-$scheme.log" 2>"gen-$scheme.err" &
    dump=$!
    pids="$pids $dump"
    wait_for "the Linux dump's port" grep -q "port=linux-$scheme" "$hublog"
    win gen --hub "$URL" -g 0 -I 321 -L 8 -D i -n "$COUNT" can0 >"wgen-$scheme.out" 2>&1 ||
        fail "fieldhub.exe gen over $scheme: $(cat "wgen-$scheme.out")"
    win send --hub "$URL" can0 7FF#C0FFEE >"wsend-$scheme.out" 2>&1 ||
        fail "fieldhub.exe send over $scheme: $(cat "wsend-$scheme.out")"
    wait "$dump" || fail "Linux dump over $scheme: $(cat "gen-$scheme.err")"
    result=$(awk -v n="$COUNT" '
        $3 ~ /^321#/ {
            want = ""; v = got
            for (j = 0; j < 8; j++) { want = want sprintf("%02X", v % 256); v = int(v / 256) }
            if ($3 != "321#" want) { printf "frame %d: got %s, want 321#%s\n", got, $3, want; bad = 1; exit }
            got++; next
        }
        $3 == "7FF#C0FFEE" { if (got != n) { printf "the sent frame came after %d of %d\n", got, n; bad = 1; exit } sent = 1 }
        END { if (bad) exit 1; if (got != n || !sent) { printf "got %d of %d, sent frame %s\n", got, n, sent ? "seen" : "missing"; exit 1 }
              printf "received %d frames in order, then the sent one\n", got }' "gen-$scheme.log") ||
        fail "Linux dump did not get fieldhub.exe's frames in order over $scheme: $result"
    echo "$scheme: fieldhub.exe gen + send -> Linux dump: $result"

    # Linux -> Windows: replay's COUNT numbered frames into fieldhub.exe dump.
    win dump --hub "$URL" -L --lossless --port "windows-$scheme" -n "$COUNT" can0 >"wdump-$scheme.log" 2>"wdump-$scheme.err" &
    wdump=$!
    pids="$pids $wdump"
    wait_for "fieldhub.exe dump's port" grep -q "port=windows-$scheme" "$hublog"
    awk -v n="$COUNT" -v base=512 -v channel=can0 -f "$ROOT/tests/vm/seq/frames.awk" >"frames-$scheme.log"
    "$FIELDHUB" replay --hub "$URL" -t "frames-$scheme.log" >"replay-$scheme.out" 2>&1 ||
        fail "Linux replay over $scheme: $(cat "replay-$scheme.out")"
    wait "$wdump" || fail "fieldhub.exe dump over $scheme: $(cat "wdump-$scheme.err")"
    result=$(tr -d '\r' <"wdump-$scheme.log" | awk -v n="$COUNT" -v base=512 -f "$ROOT/tests/vm/seq/check.awk") ||
        fail "fieldhub.exe dump did not get the Linux frames in order over $scheme: $result"
    echo "$scheme: Linux replay -> fieldhub.exe dump: $result"

    # fieldhub.exe ctl drives the wiring: a port unplugged misses a frame, plugged again gets the next.
    "$FIELDHUB" dump --hub "$URL" -L --port "wired-$scheme" -n 1 can0 >"wired-$scheme.log" 2>"wired-$scheme.err" &
    wired=$!
    pids="$pids $wired"
    wait_for "the wired port" grep -q "port=wired-$scheme" "$hublog"
    win ctl --hub "$URL" unplug "wired-$scheme" >"ctl-$scheme.out" 2>&1 || fail "fieldhub.exe ctl unplug: $(cat "ctl-$scheme.out")"
    win ctl --hub "$URL" ports >"ports-$scheme.out" 2>&1 || fail "fieldhub.exe ctl ports: $(cat "ports-$scheme.out")"
    grep -q "wired-$scheme" "ports-$scheme.out" || fail "fieldhub.exe ctl ports does not list wired-$scheme: $(cat "ports-$scheme.out")"
    win send --hub "$URL" can0 100#01 >/dev/null 2>&1 || fail "fieldhub.exe send while unplugged"
    win ctl --hub "$URL" plug "wired-$scheme" can0 >"ctl-$scheme.out" 2>&1 || fail "fieldhub.exe ctl plug: $(cat "ctl-$scheme.out")"
    win send --hub "$URL" can0 100#02 >/dev/null 2>&1 || fail "fieldhub.exe send after plugging"
    wait "$wired" || fail "the wired port's dump: $(cat "wired-$scheme.err")"
    got=$(awk '{ print $3 }' "wired-$scheme.log")
    [ "$got" = "100#02" ] || fail "the port fieldhub.exe unplugged and plugged again got '$got', want only 100#02"
    echo "$scheme: fieldhub.exe ctl unplug/plug: the unplugged port missed 100#01 and got 100#02"

    # The other tools: record (Linux replay in), replay (into a Linux dump), stats, frame-bits.
    win record --hub "$URL" --port "wrec-$scheme" -n 30 -o "wrec-$scheme.log" can0 >"wrec-$scheme.out" 2>&1 &
    wrec=$!
    pids="$pids $wrec"
    wait_for "fieldhub.exe record's port" grep -q "port=wrec-$scheme" "$hublog"
    awk -v n=30 -v base=1280 -v channel=can0 -f "$ROOT/tests/vm/seq/frames.awk" >"rframes-$scheme.log"
    "$FIELDHUB" replay --hub "$URL" -t "rframes-$scheme.log" >/dev/null 2>&1 || fail "Linux replay to fieldhub.exe record"
    wait "$wrec" || fail "fieldhub.exe record over $scheme: $(cat "wrec-$scheme.out")"
    result=$(tr -d '\r' <"wrec-$scheme.log" | awk -v n=30 -v base=1280 -f "$ROOT/tests/vm/seq/check.awk") ||
        fail "fieldhub.exe record did not write the frames in order over $scheme: $result"
    "$FIELDHUB" dump --hub "$URL" -L --port "lrec-$scheme" -n 30 can0 >"lrec-$scheme.log" 2>"lrec-$scheme.err" &
    lrec=$!
    pids="$pids $lrec"
    wait_for "the Linux dump's port" grep -q "port=lrec-$scheme" "$hublog"
    awk -v n=30 -v base=1536 -v channel=can0 -f "$ROOT/tests/vm/seq/frames.awk" >"wframes-$scheme.log"
    win replay --hub "$URL" -t "wframes-$scheme.log" >"wreplay-$scheme.out" 2>&1 ||
        fail "fieldhub.exe replay over $scheme: $(cat "wreplay-$scheme.out")"
    wait "$lrec" || fail "Linux dump of fieldhub.exe replay over $scheme: $(cat "lrec-$scheme.err")"
    result=$(awk -v n=30 -v base=1536 -f "$ROOT/tests/vm/seq/check.awk" "lrec-$scheme.log") ||
        fail "fieldhub.exe replay's frames did not arrive in order over $scheme: $result"
    win stats --hub "$URL" >"wstats-$scheme.out" 2>&1 || fail "fieldhub.exe stats over $scheme: $(cat "wstats-$scheme.out")"
    grep -q can0 "wstats-$scheme.out" || fail "fieldhub.exe stats names no can0: $(cat "wstats-$scheme.out")"
    win frame-bits 123#DEADBEEF >"wbits.out" 2>&1 || fail "fieldhub.exe frame-bits: $(cat wbits.out)"
    grep -q "81 bits" wbits.out || fail "fieldhub.exe frame-bits: $(cat wbits.out)"
    echo "$scheme: fieldhub.exe record, replay (30 frames each, in order), stats and frame-bits"

    # fh_seq.exe (fieldhub.dll) <-> Linux dump and replay, the families 768 and 1024
    # (the dump sees both: COUNT of each).
    "$FIELDHUB" dump --hub "$URL" -L --lossless --port "cdump-$scheme" -n $((2 * COUNT)) can0 \
        >"cdump-$scheme.log" 2>"cdump-$scheme.err" &
    cdump=$!
    pids="$pids $cdump"
    wait_for "the Linux dump's port" grep -q "port=cdump-$scheme" "$hublog"
    (cd "$RUN" && "$WINE" fh_seq.exe "$URL" can0 "$COUNT" 768 1024) >"cseq-$scheme.out" 2>"cseq-$scheme.err" &
    cseq=$!
    pids="$pids $cseq"
    wait_for "fh_seq.exe's port" grep -q ready "cseq-$scheme.out"
    awk -v n="$COUNT" -v base=1024 -v channel=can0 -f "$ROOT/tests/vm/seq/frames.awk" >"cframes-$scheme.log"
    "$FIELDHUB" replay --hub "$URL" -t "cframes-$scheme.log" >"creplay-$scheme.out" 2>&1 ||
        fail "Linux replay to fh_seq.exe over $scheme: $(cat "creplay-$scheme.out")"
    wait "$cseq" || fail "fh_seq.exe (fieldhub.dll) over $scheme: $(cat "cseq-$scheme.err")"
    wait "$cdump" || fail "Linux dump of fh_seq.exe over $scheme: $(cat "cdump-$scheme.err")"
    result=$(awk -v n="$COUNT" -v base=768 -f "$ROOT/tests/vm/seq/check.awk" "cdump-$scheme.log") ||
        fail "Linux dump did not get fh_seq.exe's frames in order over $scheme: $result"
    echo "$scheme: fh_seq.exe (fieldhub.dll) -> Linux dump: $result; $(tr -d '\r' <"cseq-$scheme.out" | tail -1)"
}

# A loopback hub's user cannot be told on Windows: the client refuses it by default.
start_hub tcp
URL="tcp://$(sed 's/.*"tcp":\["\([^"]*\)".*/\1/' tcp.json)"
if win send --hub "$URL" can0 123#00 >refused.out 2>&1; then fail "fieldhub.exe talked to a loopback hub without FIELDHUB_HUB_USER=any"; fi
grep -q "FIELDHUB_HUB_USER=any" refused.out || fail "the loopback refusal does not say what to set: $(cat refused.out)"
FIELDHUB_HUB_USER=any exchange tcp tcp.log
FIELDHUB_HUB_USER=any ping_echo "$URL" tcp.log

start_hub tls --tls-cert hub.crt --tls-key hub.key
URL="tls://localhost:$(sed 's/.*"tcp":\["[^"]*:\([0-9]*\)".*/\1/' tls.json)"
FIELDHUB_TLS_CA=ca.crt exchange tls tls.log

# What is Linux-only says so.
if win bridge socketcan vcan0 can0 >bridge.out 2>&1; then fail "fieldhub.exe bridge ran"; fi
grep -q "fieldhub bridge is Linux-only" bridge.out || fail "fieldhub.exe bridge: $(cat bridge.out)"
if win bench latency --transport tcp >latency.out 2>&1; then fail "fieldhub.exe bench latency ran"; fi
grep -q "fieldhub bench latency is Linux-only" latency.out || fail "fieldhub.exe bench latency: $(cat latency.out)"
if win send --hub shm://default can0 123#00 >shm.out 2>&1; then fail "fieldhub.exe reached shm://default"; fi
grep -q "shared memory (shm://) is Linux-only" shm.out || fail "fieldhub.exe over shm://: $(cat shm.out)"
echo "wine_cli: ok"
