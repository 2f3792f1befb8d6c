#!/bin/sh
# check-format.sh — the C sources follow the formatter configuration (.clang-format, clang-format
# 14 from Debian): every *.c and *.h under src/, include/, tools/ and tests/ must come out of
# `clang-format --dry-run -Werror` unchanged. `make format` rewrites them in place.
#
#   scripts/check-format.sh [ROOT]      ROOT: the source tree (default: the script's parent)
#
# Prints the files that differ (with clang-format's first complaints) and exits 1 if any does, 0
# when all are formatted, 77 when no clang-format 14 is installed (ctest: skipped, saying so) —
# another version formats differently, so it is not used — and 2 on usage errors. Run by ctest as
# `format_check`.
#   scripts/check-format.sh --catches   the check itself: on a scratch tree with the project's
#                                       .clang-format and one misformatted file it must exit 1
#                                       (ctest `format_check_catches`; 77 without clang-format 14)
set -eu
if [ "${1:-}" = "--catches" ]; then
    self=$(cd "$(dirname "$0")" && pwd)/check-format.sh
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    cp "$(dirname "$self")/../.clang-format" "$tmp/"
    mkdir -p "$tmp/src"
    printf 'int  f( int x ){return x+1 ;}\n' >"$tmp/src/bad.c"
    rc=0
    sh "$self" "$tmp" || rc=$?
    [ "$rc" -eq 77 ] && exit 77
    [ "$rc" -eq 1 ] || { echo "check-format --catches: a misformatted file passed (exit $rc)"; exit 1; }
    echo "check-format --catches: ok (the misformatted file was reported)"
    exit 0
fi
root=${1:-$(dirname "$0")/..}
[ -f "$root/.clang-format" ] || { echo "check-format: $root has no .clang-format" >&2; exit 2; }
cf=""
for c in clang-format-14 clang-format; do
    if command -v "$c" >/dev/null 2>&1 && "$c" --version 2>/dev/null | grep -q 'version 14\.'; then
        cf=$c
        break
    fi
done
if [ -z "$cf" ]; then
    echo "check-format: skipped: clang-format 14 is not installed (apt-get install clang-format-14)"
    exit 77
fi
cd "$root"
bad=0
n=0
for f in $(find src include tools tests examples -name '*.[ch]' -not -path '*/node_modules/*' 2>/dev/null | sort); do
    n=$((n + 1))
    if ! out=$("$cf" --dry-run -Werror "$f" 2>&1); then
        echo "check-format: $f is not formatted (make format):"
        printf '%s\n' "$out" | head -6
        bad=$((bad + 1))
    fi
done
if [ "$bad" -gt 0 ]; then
    echo "check-format: $bad of $n files differ from .clang-format"
    exit 1
fi
echo "check-format: ok ($n files)"
