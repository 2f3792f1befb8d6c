#!/usr/bin/env bash
# soak-cluster.sh — the slow variant of the cluster fault tests: many kill -9 rounds.
#
#   scripts/soak-cluster.sh [BUILD_DIR [ROUNDS [REPEATS]]]     (defaults: build 50 1)
#
# Runs tests/fault/server/test_cluster_kill.c's program with RL_KILL_ROUNDS=ROUNDS, REPEATS times
# (each with a fresh seed, printed; replay one with RL_SEED=N). Every cluster it starts is stopped
# by recorded pid by the test fixture, also when a run fails or is interrupted. Not part of
# `make check` (CI runs the same program with 3 rounds, without idle gaps).
#
# Idle gaps (docs/design.md §5, versions advance while nothing commits): every round ends with SOAK_IDLE_MS (default 1500) ms in which nothing
# commits, longer than the cluster's MVCC window of SOAK_WINDOW_VERSIONS (default 1000000: 1 s)
# versions; after each gap a read-then-write transaction must commit at once and the read
# version must have moved with the idle time (RL_KILL_IDLE_MS, RL_KILL_WINDOW_VERSIONS of the
# program). SOAK_IDLE_MS=0 turns the gaps off (the cluster then runs the servers' default window).
set -euo pipefail
build=${1:-build}
rounds=${2:-50}
repeats=${3:-1}
idle_ms=${SOAK_IDLE_MS:-1500}
window=${SOAK_WINDOW_VERSIONS:-1000000}
if [ "$idle_ms" = 0 ]; then window=0; fi
prog="$build/fault_server_test_cluster_kill"
if [ ! -x "$prog" ]; then
  echo "soak-cluster: $prog is not built (make build BUILD=$build)" >&2
  exit 2
fi
for i in $(seq 1 "$repeats"); do
  echo "== soak run $i of $repeats: $rounds kill -9 rounds, idle gaps of $idle_ms ms (window $window versions)"
  RL_KILL_ROUNDS="$rounds" RL_KILL_IDLE_MS="$idle_ms" RL_KILL_WINDOW_VERSIONS="$window" \
    CMOCKA_MESSAGE_OUTPUT=stdout "$prog"
done
