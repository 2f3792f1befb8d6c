#!/bin/bash
# bench-at-commits.sh — build rlbench at each given commit and run the embedded figures of
# docs/benchmarks.md there (issue "embedded speed": which change cost what). Not run by CI.
#
#   scripts/bench-at-commits.sh OUT COMMIT...
#
# For each commit (in the order given; give them oldest first so the one build directory rebuilds
# little between neighbours): a detached worktree at OUT/wt, a build in OUT/build (the commit's own
# CMake defaults), then
#   rlbench micro --keys 100000 --seconds 0.3 --repeats 3 --seed 42   > OUT/SHA.micro.txt
#   rlbench query --seconds 0.3 --repeats 3                           > OUT/SHA.query.txt
# A commit whose results exist is skipped (rerun by deleting them). Run it on a quiet machine: the
# figures are ratios within each run (reclayer against LMDB and SQLite), but the machine's load
# moves them. The worktree is removed at the end (git worktree prune keeps the repository clean).
set -u
out=${1:?usage: bench-at-commits.sh OUT COMMIT...}
shift
repo=$(git -C "$(dirname "$0")" rev-parse --show-toplevel) || exit 1
mkdir -p "$out" || exit 1
out=$(cd "$out" && pwd)
[ -d "$out/wt" ] || git -C "$repo" worktree add --detach "$out/wt" HEAD >/dev/null || exit 1
for c in "$@"; do
    s=$(git -C "$repo" rev-parse --short "$c") || continue
    [ -s "$out/$s.query.txt" ] && continue
    git -C "$out/wt" checkout -q --detach "$s" || { echo "$s: checkout failed"; continue; }
    mkdir -p "$out/build"
    if ! (cmake -S "$out/wt" -B "$out/build" >/dev/null 2>&1 && make -C "$out/build" -j2 rlbench >"$out/$s.build.log" 2>&1); then
        echo "$s: build failed (see $out/$s.build.log)"
        continue
    fi
    b=$(find "$out/build" -name rlbench -type f -perm -u+x | head -1)
    "$b" micro --keys 100000 --seconds 0.3 --repeats 3 --seed 42 >"$out/$s.micro.txt" 2>&1
    "$b" query --seconds 0.3 --repeats 3 >"$out/$s.query.txt" 2>&1
    echo "$s: done $(date +%T)"
done
git -C "$repo" worktree remove --force "$out/wt" >/dev/null 2>&1
git -C "$repo" worktree prune
