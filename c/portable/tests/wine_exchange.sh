#!/bin/sh
# The portable C client built for Windows with mingw-w64 (its Winsock
# stream) and run under Wine exchanges 10,000 numbered frames each way with
# a Linux hub and the Rust CLI over TCP (exchange.sh does the exchange).
#
#   wine_exchange.sh FIELDHUB_BIN [COUNT]
#
# Needs x86_64-w64-mingw32-gcc (gcc-mingw-w64-x86-64) and wine64 (wine64):
# make deps installs both.
set -eu
FIELDHUB=$1
COUNT=${2:-10000}
HERE=$(cd "$(dirname "$0")" && pwd)
PORTABLE=$(dirname "$HERE")
# Debian puts Wine's 64-bit programs beside each other, not on PATH.
WINE=$(command -v wine64 || echo /usr/lib/wine/wine64)
WINESERVER=$(command -v wineserver || echo "$(dirname "$WINE")/wineserver64")
command -v x86_64-w64-mingw32-gcc >/dev/null ||
    { echo "wine_exchange: x86_64-w64-mingw32-gcc missing (gcc-mingw-w64-x86-64: make deps installs it)" >&2; exit 1; }
[ -x "$WINE" ] || { echo "wine_exchange: wine64 missing (make deps installs it)" >&2; exit 1; }
RUN=$(mktemp -d "${TMPDIR:-/tmp}/fhp-wine.XXXXXX")
cleanup() {
    # The prefix's wineserver writes the registry as it exits: stop it, wait, then remove.
    WINEPREFIX="$RUN/prefix" "$WINESERVER" -k 2>/dev/null || true
    WINEPREFIX="$RUN/prefix" "$WINESERVER" -w 2>/dev/null || true
    rm -rf "$RUN"
}
trap cleanup EXIT INT TERM

x86_64-w64-mingw32-gcc -std=c99 -O2 -Wall -Wextra -Werror -pedantic -static -I"$PORTABLE" -o "$RUN/fhp_seq.exe" \
    "$HERE/fhp_seq.c" "$PORTABLE/fieldhub_portable.c" "$PORTABLE/fieldhub_portable_io.c" -lws2_32
# A prefix of its own: nothing of the user's Wine set-up is used or changed.
export WINEPREFIX="$RUN/prefix" WINEDEBUG=-all
sh "$HERE/exchange.sh" "$FIELDHUB" "$RUN/fhp_seq.exe" "$COUNT" "$WINE"
