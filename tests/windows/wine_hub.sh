#!/bin/sh
# The hub on Windows: fieldhub.exe hub (x86_64-pc-windows-gnu) under Wine
# serves a Linux client (the native fieldhub, over TCP) and a Windows client
# (fieldhub.exe under Wine) at once:
#   - fieldhub.exe gen sends 10,000 numbered frames (incrementing data) and a
#     Linux `fieldhub dump` gets them in order, while a Linux `fieldhub replay`
#     sends 10,000 numbered frames (tests/vm/seq/frames.awk) that
#     fieldhub.exe dump gets in order (tests/vm/seq/check.awk);
#   - the control API answers: `fieldhub ctl channels` lists the channel and
#     `curl /api/v1/stats` counts both directions' frames;
#   - what is Linux-only is refused naming the platform: --shm, and a hub
#     with no token (Windows cannot tell which user a local client is).
#
#   wine_hub.sh FIELDHUB_LINUX WINDOWS_DIR [COUNT]
#
# WINDOWS_DIR is the Windows build's output (fieldhub.exe), the same build
# wine_cli.sh uses. Needs wine64, x86_64-w64-mingw32-gcc (the test-only
# bcryptprimitives.dll Wine 8 lacks: tests/windows/processprng_shim.c, never
# shipped) and curl; make deps installs them.
set -eu
FIELDHUB=$1
WINDIR=$2
COUNT=${3:-10000}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
NAME=wine_hub
. "$HERE/wine_prefix.sh"
command -v curl >/dev/null || fail "curl missing (make deps installs it)"
[ -f "$WINDIR/fieldhub.exe" ] || fail "$WINDIR/fieldhub.exe missing (cargo build --target x86_64-pc-windows-gnu -p fieldhub-cli; the target: rustup target add x86_64-pc-windows-gnu, which make deps does)"

cp "$WINDIR/fieldhub.exe" "$RUN/"
cd "$RUN"
win() { "$WINE" fieldhub.exe "$@"; }

cat >hub.toml <<TOML
[[channel]]
name = "can0"
protocol = "canfd"
TOML
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' >token
chmod 600 token

# What a hub on Windows cannot serve is refused, naming the platform.
if win hub --config hub.toml --listen 127.0.0.1:0 --token-file token --shm x >shm.out 2>&1; then
    fail "fieldhub.exe hub served shared memory"
fi
grep -q "shared memory (shm://) is Linux-only; a hub on windows" shm.out || fail "fieldhub.exe hub --shm: $(cat shm.out)"
if win hub --config hub.toml --listen 127.0.0.1:0 >notoken.out 2>&1; then fail "fieldhub.exe hub ran without a token"; fi
grep -q "a hub on windows cannot tell which user a local client is" notoken.out ||
    fail "fieldhub.exe hub without a token: $(cat notoken.out)"
echo "wine_hub: fieldhub.exe hub refuses --shm and a hub without a token, naming windows"

# The Windows hub on a free loopback port, with a token.
FIELDHUB_LOG=info "$WINE" fieldhub.exe hub --config hub.toml --listen 127.0.0.1:0 --token-file token \
    --ready-file hub.json >hub.log 2>&1 &
pids="$pids $!"
wait_for "fieldhub.exe hub" test -s hub.json
ADDR=$(sed 's/.*"tcp":\["\([^"]*\)".*/\1/' hub.json)
URL="tcp://$ADDR"
export FIELDHUB_TOKEN_FILE="$RUN/token"
# The Windows client cannot tell the loopback hub's user either: it is told to trust it.
export FIELDHUB_HUB_USER=any

# Both clients attach, then both send at once; each dump gets both
# families, COUNT frames each.
"$FIELDHUB" dump --hub "$URL" -L --lossless --port linux-dump -n $((2 * COUNT)) can0 >ldump.log 2>ldump.err &
ldump=$!
pids="$pids $ldump"
win dump --hub "$URL" -L --lossless --port windows-dump -n $((2 * COUNT)) can0 >wdump.log 2>wdump.err &
wdump=$!
pids="$pids $wdump"
wait_for "both dumps' ports" sh -c 'grep -q port=linux-dump hub.log && grep -q port=windows-dump hub.log'
awk -v n="$COUNT" -v base=512 -v channel=can0 -f "$ROOT/tests/vm/seq/frames.awk" >frames.log
win gen --hub "$URL" -g 0 -I 321 -L 8 -D i -n "$COUNT" can0 >wgen.out 2>&1 &
wgen=$!
pids="$pids $wgen"
"$FIELDHUB" replay --hub "$URL" -t frames.log >replay.out 2>&1 || fail "Linux replay: $(cat replay.out)"
wait "$wgen" || fail "fieldhub.exe gen: $(cat wgen.out)"
wait "$ldump" || fail "Linux dump: $(cat ldump.err)"
wait "$wdump" || fail "fieldhub.exe dump: $(cat wdump.err)"
# gen's family: id 321, its 8 bytes a little-endian counter; other ids are ignored.
gen_check() {
    awk -v n="$COUNT" '
        $3 !~ /^321#/ { next }
        {
            want = ""; v = got
            for (j = 0; j < 8; j++) { want = want sprintf("%02X", v % 256); v = int(v / 256) }
            if ($3 != "321#" want) { printf "frame %d: got %s, want 321#%s\n", got, $3, want; bad = 1; exit }
            got++
        }
        END { if (bad) exit 1; if (got != n) { printf "received %d of %d frames\n", got, n; exit 1 }
              printf "received %d frames in order\n", got }'
}
lgen=$(gen_check <ldump.log) || fail "the Linux dump did not get fieldhub.exe gen's frames in order: $lgen"
lrep=$(awk -v n="$COUNT" -v base=512 -f "$ROOT/tests/vm/seq/check.awk" ldump.log) ||
    fail "the Linux dump did not get the Linux replay's frames in order: $lrep"
wrep=$(tr -d '\r' <wdump.log | awk -v n="$COUNT" -v base=512 -f "$ROOT/tests/vm/seq/check.awk") ||
    fail "fieldhub.exe dump did not get the Linux replay's frames in order: $wrep"
wgen=$(tr -d '\r' <wdump.log | gen_check) || fail "fieldhub.exe dump did not get fieldhub.exe gen's frames in order: $wgen"
echo "wine_hub: Windows -> Linux through the Windows hub: fieldhub.exe gen -> Linux dump: $lgen"
echo "wine_hub: Linux -> Windows through the Windows hub: Linux replay -> fieldhub.exe dump: $wrep"
echo "wine_hub: and each dump the other family: Linux replay -> Linux dump: $lrep; fieldhub.exe gen -> fieldhub.exe dump: $wgen"

# The control API of the Windows hub: ctl from Linux, the stats over HTTP.
"$FIELDHUB" ctl --hub "$URL" channels >channels.out 2>&1 || fail "fieldhub ctl channels: $(cat channels.out)"
grep -q can0 channels.out || fail "fieldhub ctl channels does not list can0: $(cat channels.out)"
curl -sf -H "Authorization: Bearer $(cat token)" "http://$ADDR/api/v1/stats" >stats.json ||
    fail "curl /api/v1/stats of the Windows hub failed"
grep -q '"can0"' stats.json || fail "/api/v1/stats names no can0: $(cat stats.json)"
echo "wine_hub: the Windows hub's control API answers fieldhub ctl channels and GET /api/v1/stats"
echo "wine_hub: ok"
