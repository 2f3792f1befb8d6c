#!/bin/sh
# test-examples.sh — ctest integ_examples_installed: install the build into a scratch prefix
# (with DESTDIR, as a packager would), build examples/ there with its Makefile — pkg-config and
# nothing else, no path into the source or build tree — and run each program: kv_hello on a
# file: database (and once more linked statically, `pkg-config --static`), records on mem:, and
# cluster_client on a fresh one-server cluster (rl_with_cluster starts and stops it). Also checks
# the installed layout: the SONAME, libfdb_c.so only under lib/reclayer, the man pages, and that
# `make uninstall`'s manifest removes every file.
#   usage: test-examples.sh SOURCE_DIR BUILD_DIR RL_WITH_CLUSTER
set -eu
src=$1 build=$2 runner=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/rl-examples.XXXXXX")
# cmake --install rewrites BUILD/install_manifest.txt: keep the user's (make uninstall reads it).
manifest="$build/install_manifest.txt"
[ -e "$manifest" ] && cp "$manifest" "$tmp/manifest.saved"
restore() { if [ -e "$tmp/manifest.saved" ]; then cp "$tmp/manifest.saved" "$manifest"; else rm -f "$manifest"; fi; rm -rf "$tmp"; }
trap restore EXIT
fail() { echo "test-examples: FAIL: $*"; exit 1; }

prefix=/opt/reclayer-test
DESTDIR="$tmp/dest" cmake --install "$build" --prefix "$prefix" >"$tmp/install.log" || { cat "$tmp/install.log"; fail "cmake --install"; }
root="$tmp/dest$prefix"
for f in include/reclayer/kv.h include/reclayer/tuple.h include/reclayer/version.h lib/libreclayer.a \
         lib/pkgconfig/reclayer.pc lib/reclayer/libfdb_c.so bin/rl bin/rlkvd bin/rlbench; do
    [ -e "$root/$f" ] || fail "not installed: $f"
done
[ ! -e "$root/lib/libfdb_c.so" ] || fail "libfdb_c.so installed beside libreclayer (would shadow FoundationDB's client)"
so=$(ls "$root"/lib/libreclayer.so.*.*.* 2>/dev/null | head -1)
[ -n "$so" ] || fail "no versioned libreclayer.so"
soname=$(objdump -p "$so" | awk '/SONAME/ {print $2}')
major=$(sed -n 's/^#define RL_VERSION_MAJOR \([0-9]*\).*/\1/p' "$src/include/reclayer/version.h")
[ "$soname" = "libreclayer.so.$major" ] || fail "SONAME is '$soname', want libreclayer.so.$major"
if command -v help2man >/dev/null; then
    for p in rl rlkvd rlbench; do [ -s "$root/share/man/man1/$p.1" ] || fail "no man page $p.1"; done
fi
"$root/bin/rl" --version | grep -q "^reclayer [0-9]" || fail "rl --version"

# The examples, copied out of the source tree so that nothing but pkg-config can point back.
cp -r "$src/examples" "$tmp/ex"
export PKG_CONFIG_PATH="$root/lib/pkgconfig"
export LD_LIBRARY_PATH="$root/lib"
inc=$(pkg-config --variable=includedir reclayer)
[ "$(cd "$inc" && pwd -P)" = "$(cd "$root/include" && pwd -P)" ] || fail "pkg-config's includedir is $inc, not the install's"
make -s -C "$tmp/ex" CFLAGS="-O1 -g -Wall -Wextra -Werror" >"$tmp/make.log" 2>&1 || { cat "$tmp/make.log"; fail "make examples"; }

mkdir "$tmp/db"
out=$("$tmp/ex/kv_hello" "file:$tmp/db") || fail "kv_hello: $out"
echo "$out"
echo "$out" | grep -q '("greeting", 1) = hello, reclayer' || fail "kv_hello printed: $out"
# The static library: the same program linked with pkg-config --static.
cc -O1 -Wall -Werror $(pkg-config --cflags reclayer) "$tmp/ex/kv_hello.c" -o "$tmp/kv_hello_static" \
    -Wl,-Bstatic -lreclayer -Wl,-Bdynamic $(pkg-config --static --libs reclayer | sed 's/-lreclayer//') \
    || fail "static link"
objdump -p "$tmp/kv_hello_static" | grep -q 'NEEDED.*libreclayer' && fail "kv_hello_static needs libreclayer.so"
"$tmp/kv_hello_static" mem: | grep -q 'hello, reclayer' || fail "kv_hello (static)"

out=$("$tmp/ex/records" mem:) || fail "records: $out"
echo "$out"
echo "$out" | grep -q '^3 rows$' || fail "records printed: $out"

out=$("$runner" --storage 1 -- sh -c "'$tmp/ex/cluster_client' \"\$RL_TEST_URL\"") || fail "cluster_client: $out"
echo "$out"
echo "$out" | grep -q 'returns 100$' || fail "cluster_client printed: $out"

# Uninstall as `make uninstall DESTDIR=...` does: every file the manifest lists (paths without
# DESTDIR) goes, and nothing but directories is left.
make -s -C "$src" BUILD="$build" DESTDIR="$tmp/dest" uninstall >/dev/null || fail "make uninstall"
left=$(find "$tmp/dest" -type f | head -5)
[ -z "$left" ] || fail "left after uninstall: $left"
echo "test-examples: ok"
