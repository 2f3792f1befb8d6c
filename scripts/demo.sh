#!/usr/bin/env bash
# demo.sh BUILD_DIR — the main job (`make demo`, after deps and build):
#   1. round-trip a few tuples through `rl tuple`;
#   2. load a small Order store (200 records, the first 20 rewritten with 150,000 bytes of padding so
#      they are split in two chunks) into a temporary file: database, check it with `rl check`;
#   3. run one index query with each fetch method through `rl query --stats` and print the counters
#      side by side;
#   4. the quick benchmark campaign (`rlbench campaign --quick`: the reference reports' design on the
#      embedded topology, with the SQLite peer, and on a local single-server cluster at 250 us), into BUILD_DIR/campaign-YYYYMMDD-HHMMSS/, ending in
#      the report's main table and where the report, results, plots and manifest are.
# Needs only bash, grep and sed besides the built programs; about three and a half minutes.
set -euo pipefail
build="${1:-build}"
rl="$build/rl"
rlbench="$build/rlbench"

echo "== rl tuple: encode, decode and print a few tuples"
for t in '[{"int":"1"},{"string":"a"},{"bytes":"00"},{"null":true}]' \
         '[{"int":"-1180591620717411303424"},{"double":"3ff0000000000000"},{"bool":true}]' \
         '[{"tuple":[{"null":true},{"string":"nested"}]},{"uuid":"000102030405060708090a0b0c0d0e0f"}]'; do
  hex=$("$rl" tuple encode "$t")
  back=$("$rl" tuple decode "$hex")
  human=$("$rl" tuple print "$hex")
  printf '%s\n  hex   %s\n  json  %s\n  human %s\n' "$t" "$hex" "$back" "$human"
done

dir=$(mktemp -d "${TMPDIR:-/tmp}/rl-demo.XXXXXX")
trap 'rm -rf "$dir"' EXIT
db="file:$dir"

echo
echo "== rl load: 200 Orders into $db, then orders 1-20 again with 150,000 bytes of padding (split)"
"$rl" load --db "$db" --count 200 2>/dev/null
"$rl" load --db "$db" --count 20 --padding 150000 2>/dev/null

echo
echo "== rl check"
"$rl" check --db "$db" | tail -n 3

# One query, each fetch method: rows, then the --stats line's counters.
query=(--index price_idx --ge 100 --limit 10)
methods=(scan remote remote-fallback)
counters=(rows_returned index_entries_read reads_range reads_mapped_range mapped_range_requests
          record_loads kv_bytes_received allocs alloc_bytes fallbacks)
declare -A val
for m in "${methods[@]}"; do
  out=$("$rl" query --db "$db" "${query[@]}" --fetch "$m" --stats)
  stats=$(printf '%s\n' "$out" | grep '^{"stats"')
  for c in "${counters[@]}"; do
    val[$m.$c]=$(printf '%s' "$stats" | grep -o "\"$c\": *[0-9]*" | sed 's/.*: *//')
  done
  val[$m.split]=$(printf '%s\n' "$out" | grep -c '"chunks":[1-9]' || true)
  val[$m.reason]=$(printf '%s' "$stats" | grep -o '"no_next_reason": *"[a-z_]*"' | sed 's/.*: *"//; s/"$//')
  val[$m.ids]=$(printf '%s\n' "$out" | grep -o '"pk":"([0-9]*,)"' | sed 's/.*(//; s/,)"//' | tr '\n' ' ')
done

echo
echo "== rl query ${query[*]}, with each fetch method (rl query --stats)"
printf '%-24s' "counter"
for m in "${methods[@]}"; do printf ' %16s' "$m"; done
printf '\n'
for c in "${counters[@]}" split reason; do
  label=$c
  case $c in
    rows_returned) label="rows" ;;
    index_entries_read) label="index entries read" ;;
    reads_range) label="client range reads" ;;
    reads_mapped_range) label="client mapped reads" ;;
    mapped_range_requests) label="mapped-range requests" ;;
    record_loads) label="records loaded by client" ;;
    kv_bytes_received) label="bytes received" ;;
    allocs) label="allocations" ;;
    alloc_bytes) label="bytes allocated" ;;
    fallbacks) label="fallbacks" ;;
    split) label="split records returned" ;;
    reason) label="end reason" ;;
  esac
  printf '%-24s' "$label"
  for m in "${methods[@]}"; do printf ' %16s' "${val[$m.$c]}"; done
  printf '\n'
done
if [ "${val[scan.ids]}" = "${val[remote.ids]}" ] && [ "${val[scan.ids]}" = "${val[remote-fallback.ids]}" ]; then
  echo "same rows from every method: order_id ${val[scan.ids]}"
else
  echo "demo: the fetch methods returned different rows!" >&2
  exit 1
fi

out="$build/campaign-$(date +%Y%m%d-%H%M%S)"
echo
echo "== rlbench campaign --quick --out $out (progress on stderr; about three minutes)"
"$rlbench" campaign --quick --out "$out"
