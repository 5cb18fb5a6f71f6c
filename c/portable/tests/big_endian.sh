#!/bin/sh
# The portable C client built for a big-endian target (s390x, run with
# qemu-user) passes every spec vector byte for byte, meets the hostile hub
# with error codes, and exchanges 10,000 numbered frames each way with a
# real (little-endian) hub and the Rust CLI over TCP: no struct overlay, no
# host byte order anywhere.
#
#   big_endian.sh FIELDHUB_BIN SPEC_VECTORS_DIR
#
# Needs s390x-linux-gnu-gcc (gcc-s390x-linux-gnu, libc6-dev-s390x-cross) and
# qemu-s390x-static (qemu-user-static): make deps installs them.
set -eu
FIELDHUB=$1
VECTORS=$2
HERE=$(cd "$(dirname "$0")" && pwd)
PORTABLE=$(dirname "$HERE")
command -v s390x-linux-gnu-gcc >/dev/null ||
    { echo "big_endian: s390x-linux-gnu-gcc missing (gcc-s390x-linux-gnu: make deps installs it)" >&2; exit 1; }
QEMU=$(command -v qemu-s390x-static || command -v qemu-s390x) ||
    { echo "big_endian: qemu-s390x-static missing (qemu-user-static: make deps installs it)" >&2; exit 1; }
RUN=$(mktemp -d "${TMPDIR:-/tmp}/fhp-be.XXXXXX")
trap 'rm -rf "$RUN"' EXIT INT TERM
build() {
    # getaddrinfo in a static program: glibc warns that it needs glibc's
    # shared NSS modules at run time; numeric addresses (the tests') do not.
    s390x-linux-gnu-gcc -static -std=c99 -O2 -D_POSIX_C_SOURCE=200809L -Wall -Wextra -Werror -pedantic \
        -I"$PORTABLE" -o "$RUN/$1" "$HERE/$1.c" "$PORTABLE/fieldhub_portable.c" "$PORTABLE/fieldhub_portable_io.c" \
        2>"$RUN/$1.ld" || { cat "$RUN/$1.ld" >&2; exit 1; }
}
build vector_tool
build fhp_tests
build fhp_seq
python3 "$HERE/check_vectors.py" "$VECTORS" "$QEMU" "$RUN/vector_tool"
"$QEMU" "$RUN/fhp_tests" hostile_hub_input_is_an_error_code
sh "$HERE/exchange.sh" "$FIELDHUB" "$RUN/fhp_seq" 10000 "$QEMU"
