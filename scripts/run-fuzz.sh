#!/usr/bin/env bash
# run-fuzz.sh BUILD_DIR SECONDS — run every libFuzzer target in BUILD_DIR for SECONDS each, seeded
# from tests/fuzz/corpus/<target>/ when that exists. Exits non-zero if any target finds a crash.
set -euo pipefail
build=$1
secs=$2
root=$(cd "$(dirname "$0")/.." && pwd)
status=0
shopt -s nullglob
targets=("$build"/fuzz_*)
if [ ${#targets[@]} -eq 0 ]; then
  echo "run-fuzz: no fuzz targets built in $build" >&2
  exit 1
fi
for t in "${targets[@]}"; do
  [ -x "$t" ] || continue
  name=$(basename "$t")
  work="$build/corpus/$name"
  mkdir -p "$work"
  seeds=()
  [ -d "$root/tests/fuzz/corpus/$name" ] && seeds+=("$root/tests/fuzz/corpus/$name")
  echo "run-fuzz: $name for ${secs}s"
  if ! "$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -print_final_stats=0 \
      -artifact_prefix="$build/" "$work" "${seeds[@]}" > "$build/$name.log" 2>&1; then
    echo "run-fuzz: $name FAILED — see $build/$name.log" >&2
    tail -40 "$build/$name.log" >&2
    status=1
  else
    grep -E "^#[0-9]+.*DONE" "$build/$name.log" | tail -1 || true
  fi
done
exit $status
