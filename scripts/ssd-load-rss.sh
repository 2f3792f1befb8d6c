#!/usr/bin/env bash
# ssd-load-rss.sh — the ssd engine's large load (not in CI): `rl load` of N Orders
# (default 1,000,000) with PADDING bytes of padding each (default 1000: about 1 GB) into a new
# file:DIR?engine=ssd database, sampling the loader's RssAnon from /proc every 0.5 s. Prints
# the elapsed time, the load rate, the peak RssAnon and the directory's size; exits 1 if the
# peak RssAnon reached LIMIT_MIB (default 512). The directory is removed at the end.
#
#   scripts/ssd-load-rss.sh [N] [PADDING]        (BUILD=build, LIMIT_MIB=512, TMPDIR honoured;
#                                                 FLUSH_BYTES=N: the URL's checkpoint_bytes;
#                                                 TRACE=1: RssAnon every 10 s)
set -euo pipefail
N=${1:-1000000}
PAD=${2:-1000}
BUILD=${BUILD:-build}
LIMIT=${LIMIT_MIB:-512}
DIR=$(mktemp -d "${TMPDIR:-/tmp}/rl-ssd-load-XXXXXX")
trap 'rm -rf "$DIR"' EXIT
start=$(date +%s.%N)
URL="file:$DIR?engine=ssd${FLUSH_BYTES:+&checkpoint_bytes=$FLUSH_BYTES}"
"$BUILD/rl" load --db "$URL" --count "$N" --padding "$PAD" >"$DIR.out" 2>&1 &
pid=$!
peak=0
i=0
while kill -0 "$pid" 2>/dev/null; do
  a=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
  [ -n "$a" ] && [ "$a" -gt "$peak" ] && peak=$a
  # TRACE=1: RssAnon every 10 s
  if [ -n "${TRACE:-}" ] && [ $((i % 20)) -eq 0 ]; then echo "t=$((i / 2)) s RssAnon $((a / 1024)) MiB"; fi
  i=$((i + 1))
  sleep 0.5
done
wait "$pid"
rc=$?
end=$(date +%s.%N)
secs=$(echo "$end - $start" | bc)
size=$(du -sm "$DIR" | cut -f1)
cat "$DIR.out"
rm -f "$DIR.out"
echo "loaded $N Orders (padding $PAD) in ${secs} s: $(echo "$N / $secs" | bc) records/s;" \
     "peak RssAnon $((peak / 1024)) MiB; directory ${size} MiB"
[ "$rc" -eq 0 ] || exit "$rc"
[ $((peak / 1024)) -lt "$LIMIT" ] || { echo "peak RssAnon over ${LIMIT} MiB"; exit 1; }
