#!/usr/bin/env bash
# soak-cluster.sh — the slow variant of the cluster fault tests: many kill -9 rounds.
#
#   scripts/soak-cluster.sh [BUILD_DIR [ROUNDS [REPEATS]]]     (defaults: build 50 1)
#
# Runs tests/fault/server/test_cluster_kill.c's program with RL_KILL_ROUNDS=ROUNDS, REPEATS times
# (each with a fresh seed, printed; replay one with RL_SEED=N). Every cluster it starts is stopped
# by recorded pid by the test fixture, also when a run fails or is interrupted. Not part of
# `make check` (CI runs the same program with 3 rounds).
set -euo pipefail
build=${1:-build}
rounds=${2:-50}
repeats=${3:-1}
prog="$build/fault_server_test_cluster_kill"
if [ ! -x "$prog" ]; then
  echo "soak-cluster: $prog is not built (make build BUILD=$build)" >&2
  exit 2
fi
for i in $(seq 1 "$repeats"); do
  echo "== soak run $i of $repeats: $rounds kill -9 rounds"
  RL_KILL_ROUNDS="$rounds" CMOCKA_MESSAGE_OUTPUT=stdout "$prog"
done
