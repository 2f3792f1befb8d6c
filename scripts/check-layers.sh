#!/bin/sh
# check-layers.sh — the layer check of docs/design.md §1: every #include "MODULE/…" in src/ and
# tools/ must name the file's own module or one the table below lets it use, and no file outside
# a module may include that module's private headers (`*_int.h`). Tests are not checked (they
# test internals on purpose). Public headers ("reclayer/…") and generated protobuf headers
# (no directory) are allowed everywhere.
#
#   scripts/check-layers.sh [ROOT]     ROOT: the source tree (default: the script's parent)
#
# Prints every violation as FILE:LINE: reason, and exits 1 if there is any, 0 otherwise; 2 on
# usage errors. Run by ctest as `layer_check` (and `layer_check_catches` runs it on a tree with
# known violations, which must fail).
set -eu
root=${1:-$(dirname "$0")/..}
[ -d "$root/src" ] || { echo "check-layers: $root has no src/" >&2; exit 2; }

# module: the modules it may include (besides itself). Keep in step with docs/design.md §1.
allowed() {
    case $1 in
        base) echo "" ;;
        tuple) echo "base" ;;
        storage) echo "base tuple" ;;
        commit) echo "base tuple storage" ;;
        net) echo "base" ;;
        kv) echo "base tuple storage commit net" ;;
        server) echo "base tuple storage commit net kv" ;;
        record) echo "base tuple" ;;
        query) echo "base tuple kv record" ;;
        bench) echo "base tuple net kv server record query" ;;
        fdbc) echo "base" ;;
        rl | rlbench | rlkvd) echo "base tuple storage commit net kv server record query bench fdbc" ;;
        *) echo "?" ;;
    esac
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
find "$root/src" "$root/tools" -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null | sort |
while IFS= read -r f; do
    rel=${f#"$root"/}
    mod=$(echo "$rel" | cut -d/ -f2)
    ok=$(allowed "$mod")
    if [ "$ok" = "?" ]; then
        echo "$rel:1: module '$mod' is not in the layer table (scripts/check-layers.sh)" >>"$tmp"
        continue
    fi
    grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[A-Za-z0-9_]*/' "$f" |
    while IFS= read -r line; do
        n=${line%%:*}
        inc=$(echo "$line" | sed 's/.*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/')
        dep=${inc%%/*}
        [ "$dep" = reclayer ] && continue
        if [ "$dep" = "$mod" ]; then continue; fi
        case $inc in
            *_int.h) echo "$rel:$n: includes $inc, private to src/$dep/" >>"$tmp"; continue ;;
        esac
        case " $ok " in
            *" $dep "*) ;;
            *) echo "$rel:$n: includes $inc, but $mod may only use: ${ok:-nothing}" >>"$tmp" ;;
        esac
    done
done
if [ -s "$tmp" ]; then
    cat "$tmp"
    echo "check-layers: $(wc -l <"$tmp") violation(s) (docs/design.md §1)" >&2
    exit 1
fi
echo "check-layers: ok"
