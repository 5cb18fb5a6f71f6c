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
#   - fieldhub.exe bench ping gets 2,000 round trips from fieldhub.exe bench
#     echo through it, in order, and prints their percentiles;
#   - on its TLS port, plaintext clients (the Linux and the Windows
#     fieldhub, and curl's HTTP) get their refusal in plaintext, naming
#     tls:// (https://), and the hub serves TLS clients after them: 1,000
#     numbered frames from fieldhub.exe gen reach a Linux dump in order;
#   - what is Linux-only is refused naming the platform: --shm, and a hub
#     with no token (Windows cannot tell which user a local client is).
#
#   wine_hub.sh FIELDHUB_LINUX WINDOWS_DIR [COUNT]
#
# WINDOWS_DIR is the Windows build's output (fieldhub.exe), the same build
# wine_cli.sh uses. Needs wine64, x86_64-w64-mingw32-gcc (the test-only
# bcryptprimitives.dll Wine 8 lacks: tests/windows/processprng_shim.c, never
# shipped), curl and openssl (the TLS certificates); make deps installs them.
set -eu
FIELDHUB=$1
WINDIR=$2
COUNT=${3:-10000}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
NAME=wine_hub
. "$HERE/wine_prefix.sh"
command -v curl >/dev/null || fail "curl missing (make deps installs it)"
command -v openssl >/dev/null || fail "openssl missing (make deps installs it)"
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
# gen's family: id 321, its 8 bytes a little-endian counter; other ids are
# ignored. gen_check [N]: N frames (default COUNT).
gen_check() {
    awk -v n="${1:-$COUNT}" '
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

ping_echo "$URL" hub.log

# The Windows hub with TLS: plaintext on its port is refused in plaintext.
key="-newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes"
openssl req -x509 $key -keyout ca.key -out ca.crt -days 2 -subj "/CN=wine test CA" >/dev/null 2>&1
openssl req $key -keyout tls.key -out tls.csr -subj "/CN=localhost" >/dev/null 2>&1
printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' >tls.ext
openssl x509 -req -in tls.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile tls.ext -out tls.crt >/dev/null 2>&1
FIELDHUB_LOG=info "$WINE" fieldhub.exe hub --config hub.toml --listen 127.0.0.1:0 --token-file token \
    --tls-cert tls.crt --tls-key tls.key --ready-file tls.json >tls.log 2>&1 &
pids="$pids $!"
wait_for "fieldhub.exe hub with TLS" test -s tls.json
TLS_PORT=$(sed 's/.*"tcp":\["[^"]*:\([0-9]*\)".*/\1/' tls.json)
refusal="this port speaks TLS: connect with tls://HOST:PORT"
if "$FIELDHUB" send --hub "tcp://127.0.0.1:$TLS_PORT" can0 123#00 >lplain.out 2>&1; then
    fail "the Linux fieldhub sent in plaintext to the Windows hub's TLS port"
fi
grep -q "$refusal" lplain.out || fail "the Linux plaintext client's refusal: $(cat lplain.out)"
if win send --hub "tcp://127.0.0.1:$TLS_PORT" can0 123#00 >wplain.out 2>&1; then
    fail "fieldhub.exe sent in plaintext to the Windows hub's TLS port"
fi
grep -q "$refusal" wplain.out || fail "fieldhub.exe's plaintext refusal: $(cat wplain.out)"
curl -s "http://127.0.0.1:$TLS_PORT/api/v1/stats" >http.out || true
grep -q "this port speaks TLS: use https://" http.out || fail "plaintext HTTP on the TLS port: $(cat http.out)"
echo "wine_hub: plaintext on the Windows hub's TLS port (Linux and Windows clients, HTTP) is refused naming tls:// and https://"
TLS_URL="tls://localhost:$TLS_PORT"
FIELDHUB_TLS_CA=ca.crt "$FIELDHUB" dump --hub "$TLS_URL" -L --lossless --port tls-dump -n 1000 can0 >tdump.log 2>tdump.err &
tdump=$!
pids="$pids $tdump"
wait_for "the Linux TLS dump's port" grep -q port=tls-dump tls.log
FIELDHUB_TLS_CA=ca.crt win gen --hub "$TLS_URL" -g 0 -I 321 -L 8 -D i -n 1000 can0 >tgen.out 2>&1 ||
    fail "fieldhub.exe gen over TLS after the plaintext clients: $(cat tgen.out)"
wait "$tdump" || fail "Linux dump over TLS after the plaintext clients: $(cat tdump.err)"
tls=$(gen_check 1000 <tdump.log) || fail "the Linux TLS dump did not get fieldhub.exe gen's frames in order: $tls"
echo "wine_hub: after them the TLS port serves: fieldhub.exe gen -> Linux dump over TLS: $tls"
echo "wine_hub: ok"
