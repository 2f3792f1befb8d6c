#!/usr/bin/env bash
# bench-topologies.sh — the cluster's performance figures on the reports' two topologies
# (docs/benchmarks.md, "The cluster, part 2: the reports' two topologies"). Not run by CI.
#
#   scripts/bench-topologies.sh [BUILD_DIR [OUT_DIR]]        (defaults: build, a new mktemp dir)
#
#   (a) phase C3: one storage server, 0.5 ms injected RTT (--delay-us 250);
#   (b) phase M2: three hosts x three storage servers on 127.0.0.1-3, double replication, 0.5 ms
#       RTT between hosts and to the client, each dataset's index on team 1,4 and its records on
#       teams 7,2 / 8,5 / 9,3 (rl placement place: no record team shares a server with the index
#       team), once per secondary strategy (individual, grouped).
# Each runs `rlbench query --db cluster:... --only rows1000/forward --stats` (1,000 small and 1,000
# split Orders, SCAN_AND_FETCH and both remote fetch methods) and keeps its output in OUT_DIR.
# Environment: BENCH_SECONDS (per round, default 1), BENCH_REPEATS (rounds, default 3),
# BENCH_ONLY (the case filter, default rows1000/forward), BENCH_PARTS ("a b", default both).
# Every cluster is stopped with `rl cluster down` (by the pids it recorded), also on failure or ^C.
set -euo pipefail
build=${1:-build}
out=${2:-$(mktemp -d /tmp/bench-topologies.XXXXXX)}
secs=${BENCH_SECONDS:-1}
reps=${BENCH_REPEATS:-3}
only=${BENCH_ONLY:-rows1000/forward}
parts=${BENCH_PARTS:-a b}
rl="$build/rl"
rlbench="$build/rlbench"
for p in "$rl" "$rlbench" "$build/rlkvd"; do
  if [ ! -x "$p" ]; then
    echo "bench-topologies: $p is not built (make build)" >&2
    exit 2
  fi
done
mkdir -p "$out"
up_dirs=()
down_all() {
  for d in "${up_dirs[@]:-}"; do
    [ -n "$d" ] && [ -f "$d/pids.json" ] && "$rl" cluster down --dir "$d" >/dev/null 2>&1 || true
  done
}
trap down_all EXIT
trap 'exit 130' INT TERM

bench() { # bench DB LABEL [rlbench options...]
  local db=$1 label=$2
  shift 2
  echo "== $label: rlbench query --db $db --only $only --seconds $secs --repeats $reps --stats $*"
  "$rlbench" query --db "$db" --only "$only" --seconds "$secs" --repeats "$reps" --stats "$@" \
    --json "$out/$label.json" 2>&1 | tee "$out/$label.txt"
}

echo "bench-topologies: output in $out; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
git -C "$(dirname "$0")/.." log -1 --format='commit %h %s' 2>/dev/null || true

# goals_a OUT — goal (a) (round trips against the injected delay) from the run's own figures: the
# round trip is the mean of the
# p50 pings to the storage server just before and just after the benchmark (client connections,
# delay included); remote fetch of 1,000 small rows in RTTs of wall time (goal <= 4), and
# SCAN_AND_FETCH against its floor = the traced critical round trips (1 read version + the index
# pages + one load round per 10 records at depth 10) x RTT (goal <= 1.2).
goals_a() {
  python3 - "$1" <<'PY'
import json, sys
out = sys.argv[1]
p50 = lambda f: json.load(open(f))["targets"][0]["p50_us"]
rtt = (p50(out + "/a-ping-before.json") + p50(out + "/a-ping-after.json")) / 2
res = {(r["dataset"], r["system"]): r for r in json.load(open(out + "/a-c3.json"))["results"]}
print(f"goal (a): round trip p50 {rtt:.0f} us (storage 1, mean of before/after)")
for ds in ("small", "split"):
    rem, scan = res.get((ds, "remote")), res.get((ds, "scan"))
    if not rem or not scan or rem["failed"] or scan["failed"]:
        continue
    rem_rtt = rem["median_ns_per_op"] / 1e3 / rtt
    floor_us = scan["trace"]["critical_round_trips"] * rtt
    ratio = scan["median_ns_per_op"] / 1e3 / floor_us
    note = " (goal <= 4)" if ds == "small" else ""
    note2 = " (goal <= 1.2)" if ds == "small" else ""
    print(f"  {ds}: remote {rem['median_ns_per_op']/1e6:.2f} ms = {rem_rtt:.1f} RTT{note}; "
          f"scan {scan['median_ns_per_op']/1e6:.1f} ms vs floor "
          f"{scan['trace']['critical_round_trips']} RTT = {floor_us/1e3:.1f} ms: {ratio:.2f}x{note2}")
PY
}

if [[ " $parts " == *" a "* ]]; then
  d="$out/c3"
  up_dirs+=("$d")
  "$rl" cluster up --dir "$d" --storage 1 --delay-us 250 --no-sync
  db="cluster:$d/reclayer.cluster"
  "$rl" ping --db "$db" -n 200 | tee "$out/a-ping.txt"
  "$rl" ping --db "$db" --to storage:1 -n 500 --json >"$out/a-ping-before.json"
  bench "$db" a-c3
  "$rl" ping --db "$db" --to storage:1 -n 500 --json >"$out/a-ping-after.json"
  "$rl" cluster down --dir "$d"
  goals_a "$out" | tee "$out/a-goals.txt"
fi

if [[ " $parts " == *" b "* ]]; then
  d="$out/m2"
  up_dirs+=("$d")
  "$rl" cluster up --dir "$d" --hosts 3 --storage-per-host 3 --host-addresses --replication double \
    --delay-us 250 --no-sync
  db="cluster:$d/reclayer.cluster"
  "$rl" ping --db "$db" -n 200 | tee "$out/b-ping.txt"
  # rlbench clears and reloads ("bench","orders",DATASET) with order_id 1..1000; placement is by key
  # range, so place the same ids first (small records: the ranges are what matters) and it holds.
  for ds in small split; do
    store="[\"bench\",\"orders\",\"$ds\"]"
    "$rl" load --db "$db" --store "$store" --count 1000
    "$rl" placement place --db "$db" --store "$store" --index price_idx --index-team 1,4 \
      --records-team '7,2;8,5;9,3'
  done
  for s in individual grouped; do
    bench "$db" "b-m2-$s" --secondary "$s"
  done
  for ds in small split; do
    "$rl" placement show --db "$db" --store "[\"bench\",\"orders\",\"$ds\"]" --index price_idx \
      | tee "$out/b-show-$ds.txt"
  done
  "$rl" cluster down --dir "$d"
fi
echo "bench-topologies: done; output in $out"
