#!/bin/sh
# fdb-over.sh — run a test program through the fdb: backend over the database RL_TEST_URL names:
# reclayer's libfdb_c.so (RL_FDB_LIBRARY, set by ctest) opens RL_TEST_URL as its RL_FDBC_URL and
# the program sees RL_TEST_URL=fdb:. Used behind rl_with_cluster (cmake/fdbc.cmake: *_fdb_cluster1),
# which points RL_TEST_URL at a fresh local cluster.
#   usage: fdb-over.sh PROGRAM [ARGS...]
if [ -z "$RL_TEST_URL" ]; then
    echo "fdb-over.sh: RL_TEST_URL is not set" >&2
    exit 2
fi
RL_FDBC_URL="$RL_TEST_URL"
RL_TEST_URL=fdb:
export RL_FDBC_URL RL_TEST_URL
exec "$@"
