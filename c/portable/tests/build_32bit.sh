#!/bin/sh
# The portable C client built for a 32-bit target (gcc -m32: i386, where
# size_t and long are 32 bits) decodes and encodes every spec vector byte
# for byte, and its code size is printed (c/portable/README.md reports it).
#
#   build_32bit.sh SPEC_VECTORS_DIR
#
# Needs gcc-multilib (make deps installs it).
set -eu
VECTORS=$1
HERE=$(cd "$(dirname "$0")" && pwd)
PORTABLE=$(dirname "$HERE")
RUN=$(mktemp -d "${TMPDIR:-/tmp}/fhp-32.XXXXXX")
trap 'rm -rf "$RUN"' EXIT INT TERM
echo 'int main(void) { return 0; }' >"$RUN/probe.c"
gcc -m32 -o "$RUN/probe" "$RUN/probe.c" 2>/dev/null ||
    { echo "build_32bit: gcc -m32 cannot link (gcc-multilib: make deps installs it)" >&2; exit 1; }
gcc -m32 -std=c99 -O2 -Wall -Wextra -Werror -pedantic -Wconversion -I"$PORTABLE" -o "$RUN/vector_tool" \
    "$HERE/vector_tool.c" "$PORTABLE/fieldhub_portable.c"
python3 "$HERE/check_vectors.py" "$VECTORS" "$RUN/vector_tool"
gcc -m32 -std=c99 -Os -c -o "$RUN/client.o" "$PORTABLE/fieldhub_portable.c"
echo "fieldhub_portable.c, gcc -m32 -Os: $(size "$RUN/client.o" | awk 'NR == 2 { print $1 }') bytes of text"
