# Sourced by the Wine tests (wine_cli.sh, wine_hub.sh) after they set NAME
# (their name, for messages) and HERE (this directory): Wine's programs,
# a run directory RUN with a Wine prefix of its own (nothing of the user's
# Wine set-up is used or changed) and the test-only bcryptprimitives.dll
# Wine 8 lacks (processprng_shim.c, never shipped), removed at exit with
# every process named in pids; `fail`, `wait_for` and `ping_echo`.

fail() { echo "$NAME: FAIL: $*" >&2; exit 1; }
# Debian puts Wine's 64-bit programs beside each other, not on PATH.
WINE=$(command -v wine64 || echo /usr/lib/wine/wine64)
WINESERVER=$(command -v wineserver || echo "$(dirname "$WINE")/wineserver64")
[ -x "$WINE" ] || fail "wine64 missing (make deps installs it)"
command -v x86_64-w64-mingw32-gcc >/dev/null || fail "x86_64-w64-mingw32-gcc missing (gcc-mingw-w64-x86-64: make deps installs it)"

RUN=$(mktemp -d "${TMPDIR:-/tmp}/fh-$NAME.XXXXXX")
pids=""
cleanup() {
    for p in $pids; do kill "$p" 2>/dev/null || true; done
    # The prefix's wineserver writes the registry as it exits: stop it, wait, then remove.
    WINEPREFIX="$RUN/prefix" "$WINESERVER" -k 2>/dev/null || true
    WINEPREFIX="$RUN/prefix" "$WINESERVER" -w 2>/dev/null || true
    rm -rf "$RUN"
}
trap cleanup EXIT INT TERM
# wait_for WHAT COMMAND...: up to 60 s (a hang guard, not a measure).
wait_for() {
    what=$1
    shift
    for _ in $(seq 600); do "$@" && return 0; sleep 0.1; done
    fail "timed out waiting for $what"
}

# ping_echo URL HUBLOG: fieldhub.exe bench echo answers fieldhub.exe bench
# ping's 2,000 round trips (after 200 that warm up) on can0 of the hub at
# URL, whose log is HUBLOG. ping stops with an error at the first answer
# missing or out of order, so its success says every one came back in
# order; it must print its percentiles. Run from RUN (with the caller's
# `win` for ping).
ping_echo() {
    # Wine itself, not `win`: a function in the background is a subshell,
    # and killing that would leave the echo answering.
    "$WINE" fieldhub.exe bench echo --hub "$1" --channel can0 >wecho.out 2>&1 &
    wecho=$!
    pids="$pids $wecho"
    wait_for "fieldhub.exe bench echo's port" grep -q "port=bench-echo" "$2"
    win bench ping --hub "$1" --channel can0 --samples 2000 >wping.out 2>wping.err ||
        fail "fieldhub.exe bench ping on $1: $(cat wping.out wping.err)"
    kill "$wecho" 2>/dev/null || true
    wait "$wecho" 2>/dev/null || true
    percentiles=$(tr -d '\r' <wping.out | awk '
        /\(2000 samples, / { told = 1 }
        $1 == "p50" && $4 == "p99" { header = NR }
        header && NR == header + 1 && NF == 8 { p50 = $1; p99 = $4 }
        END { if (!told || p50 == "") exit 1; printf "p50 %s us, p99 %s us", p50, p99 }') ||
        fail "fieldhub.exe bench ping printed no percentiles of 2000 samples: $(cat wping.out)"
    echo "$NAME: fieldhub.exe bench ping -> fieldhub.exe bench echo on $1: 2000 round trips in order, $percentiles"
}

x86_64-w64-mingw32-gcc -shared -O2 -o "$RUN/bcryptprimitives.dll" "$HERE/processprng_shim.c" -ladvapi32
export WINEPREFIX="$RUN/prefix" WINEDEBUG=-all
