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
        app) echo "base tuple storage commit net kv server record query" ;;
        bench) echo "base tuple net kv server record query app" ;;
        fdbc) echo "base" ;;
        rl | rlbench | rlkvd) echo "base tuple storage commit net kv server record query app bench fdbc" ;;
        *) echo "?" ;;
    esac
}

tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
# One awk pass over every file (a shell loop per include line took seconds under load).
table=""
for m in base tuple storage commit net kv server record query app bench fdbc rl rlbench rlkvd; do
    table="$table$m:$(allowed "$m");"
done
find "$root/src" "$root/tools" -type f \( -name '*.c' -o -name '*.h' \) 2>/dev/null | sort |
    awk -v root="$root/" -v table="$table" '
    BEGIN {
        n = split(table, rows, ";")
        for (i = 1; i <= n; i++) {
            if (rows[i] == "") continue
            split(rows[i], kv, ":")
            known[kv[1]] = 1
            ok[kv[1]] = kv[2]
        }
    }
    {
        f = $0
        rel = substr(f, length(root) + 1)
        split(rel, parts, "/")
        mod = parts[2]
        if (!(mod in known)) {
            printf "%s:1: module %s is not in the layer table (scripts/check-layers.sh)\n", rel, mod
            next
        }
        line = 0
        while ((getline l < f) > 0) {
            line++
            if (l !~ /^[ \t]*#[ \t]*include[ \t]*"[A-Za-z0-9_]*\//) continue
            inc = l
            sub(/^[^"]*"/, "", inc)
            sub(/".*$/, "", inc)
            dep = inc
            sub(/\/.*$/, "", dep)
            if (dep == "reclayer" || dep == mod) continue
            if (inc ~ /_int\.h$/) {
                printf "%s:%d: includes %s, private to src/%s/\n", rel, line, inc, dep
                continue
            }
            if ((" " ok[mod] " ") !~ (" " dep " ")) {
                printf "%s:%d: includes %s, but %s may only use: %s\n", rel, line, inc, mod, (ok[mod] == "" ? "nothing" : ok[mod])
            }
        }
        close(f)
    }' >"$tmp"
if [ -s "$tmp" ]; then
    cat "$tmp"
    echo "check-layers: $(wc -l <"$tmp") violation(s) (docs/design.md §1)" >&2
    exit 1
fi
echo "check-layers: ok"
