#!/bin/sh
# Builds the C tests with nothing but what the installed fieldhub.pc says
# (found through PKG_CONFIG_PATH), linked shared and static as
# docs/c-api.md shows, and runs a test with each.
# Usage: pkg_config_build.sh PKG_CONFIG CC SOURCE_DIR BUILD_DIR SOURCE...
# (BUILD_DIR absolute; the SOURCEs are file names in SOURCE_DIR: CMakeLists.txt's
# list of the tests' sources, so this build and CMake's cannot differ)
set -eu
pkg_config=$1 cc=$2 src=$3 out=$4
shift 4
[ $# -gt 0 ] || { echo "pkg_config_build.sh: no test sources given (CMakeLists.txt passes them)" >&2; exit 2; }
mkdir -p "$out"
cflags=$("$pkg_config" --cflags fieldhub)
libs=$("$pkg_config" --libs fieldhub)
libdir=$("$pkg_config" --variable=libdir fieldhub)
private=$("$pkg_config" --static --libs-only-l fieldhub | sed 's/-lfieldhub//')
echo "pkg-config fieldhub: cflags '$cflags' libs '$libs' static system libs '$private'"
cd "$src"
# shellcheck disable=SC2086 # the flags are word lists
"$cc" -std=c11 -Wall -Wextra -Werror $cflags -o "$out/fh_c_tests_pc" "$@" $libs -lpthread
# shellcheck disable=SC2086
"$cc" -std=c11 -Wall -Wextra -Werror $cflags -o "$out/fh_c_tests_pc_static" "$@" \
    "$libdir/libfieldhub.a" $private -lpthread
cd "$out"
LD_LIBRARY_PATH="$libdir" ./fh_c_tests_pc socketcan_frames_pass_unchanged
# The static build needs no libfieldhub.so at run time.
env -u LD_LIBRARY_PATH ./fh_c_tests_pc_static filters_select_frames_like_socketcan
