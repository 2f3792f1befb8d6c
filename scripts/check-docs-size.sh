#!/bin/sh
# check-docs-size.sh — the tree stays source, not a lab archive: the files under docs/ total at
# most 10 MB (10,000,000 bytes) and docs/benchmarks.md, the current figures, has at most 800
# lines. Benchmark runs beyond the newest of each protocol belong in the git history
# (docs/benchmarks.md says where the kept runs are; docs/design.md §8.7, Outputs).
#
#   scripts/check-docs-size.sh [ROOT]     ROOT: the source tree (default: the script's parent)
#
# The files counted are those git tracks under docs/ when ROOT is the top of a git work tree (their
# sizes on disk; untracked files and build outputs do not count), else every file under docs/.
# Prints the totals; on a violation, each violation and the largest files, and exits 1; 0 when
# within both bounds; 2 on usage errors. Run by ctest as `docs_size_check`.
#   scripts/check-docs-size.sh --catches   the check itself: on scratch trees with too many bytes
#                                          and too many lines it must exit 1 naming both, and in a
#                                          scratch git work tree an untracked file must not count
#                                          (ctest `docs_size_check_catches`)
set -eu
MAX_BYTES=10000000
MAX_LINES=800

if [ "${1:-}" = "--catches" ]; then
    self=$(cd "$(dirname "$0")" && pwd)/check-docs-size.sh
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    fail() { echo "check-docs-size --catches: $*"; exit 1; }
    # A tree (not a git work tree) over both bounds.
    mkdir -p "$tmp/plain/docs/campaigns/run"
    head -c $((MAX_BYTES + 1)) /dev/zero >"$tmp/plain/docs/campaigns/run/results.json"
    i=0
    while [ $i -le $MAX_LINES ]; do echo "line $i"; i=$((i + 1)); done >"$tmp/plain/docs/benchmarks.md"
    rc=0
    out=$(sh "$self" "$tmp/plain") || rc=$?
    echo "$out"
    [ "$rc" -eq 1 ] || fail "a tree over both bounds passed (exit $rc)"
    echo "$out" | grep -q "more than $MAX_BYTES" || fail "the byte total was not reported"
    echo "$out" | grep -q "docs/campaigns/run/results.json" || fail "the largest file was not named"
    echo "$out" | grep -q "$((MAX_LINES + 1)) lines" || fail "benchmarks.md's lines were not reported"
    # In a git work tree only tracked files count.
    if command -v git >/dev/null 2>&1; then
        mkdir -p "$tmp/git/docs"
        echo "# Benchmarks" >"$tmp/git/docs/benchmarks.md"
        head -c $((MAX_BYTES + 1)) /dev/zero >"$tmp/git/docs/untracked.bin"
        git -C "$tmp/git" init -q
        git -C "$tmp/git" add docs/benchmarks.md
        sh "$self" "$tmp/git" >/dev/null || fail "an untracked file was counted"
        git -C "$tmp/git" add docs/untracked.bin
        rc=0
        sh "$self" "$tmp/git" >/dev/null || rc=$?
        [ "$rc" -eq 1 ] || fail "a tracked file over the bound passed (exit $rc)"
    else
        echo "check-docs-size --catches: no git: the work-tree case not checked"
    fi
    echo "check-docs-size --catches: ok (both violations reported; only tracked files count in git)"
    exit 0
fi

root=${1:-$(dirname "$0")/..}
[ -d "$root/docs" ] || { echo "check-docs-size: $root has no docs/" >&2; exit 2; }
root=$(cd "$root" && pwd -P)

list=$(mktemp)
sizes=$(mktemp)
trap 'rm -f "$list" "$sizes"' EXIT
top=""
if command -v git >/dev/null 2>&1; then
    top=$(git -C "$root" rev-parse --show-toplevel 2>/dev/null || true)
    [ -n "$top" ] && top=$(cd "$top" && pwd -P)
fi
if [ -n "$top" ] && [ "$top" = "$root" ]; then
    what="tracked files under docs/"
    git -C "$root" -c core.quotepath=off ls-files -- docs >"$list"
else
    what="files under docs/ (not a git work tree)"
    (cd "$root" && find docs -type f) >"$list"
fi
while IFS= read -r f; do
    [ -f "$root/$f" ] || continue # tracked but deleted in the work tree
    printf '%s %s\n' "$(wc -c <"$root/$f" | tr -d ' ')" "$f"
done <"$list" >"$sizes"
n=$(wc -l <"$sizes" | tr -d ' ')
total=$(awk '{ s += $1 } END { printf "%d", s }' "$sizes")
lines=0
[ -f "$root/docs/benchmarks.md" ] && lines=$(wc -l <"$root/docs/benchmarks.md" | tr -d ' ')

bad=0
if [ "$total" -gt "$MAX_BYTES" ]; then
    echo "check-docs-size: $n $what hold $total bytes, more than $MAX_BYTES (keep the newest run of each protocol; older ones live in git history)"
    bad=1
fi
if [ "$lines" -gt "$MAX_LINES" ]; then
    echo "check-docs-size: docs/benchmarks.md has $lines lines, more than $MAX_LINES (current figures only; the change log a few lines per change)"
    bad=1
fi
if [ "$bad" -ne 0 ]; then
    echo "check-docs-size: the largest:"
    sort -rn "$sizes" | head -10 | awk '{ printf "  %12d  %s\n", $1, substr($0, index($0, " ") + 1) }'
    exit 1
fi
echo "check-docs-size: ok ($n $what: $total of $MAX_BYTES bytes; docs/benchmarks.md $lines of $MAX_LINES lines)"
