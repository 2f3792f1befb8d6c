#!/bin/sh
# fdb-real.sh — run a test program through the fdb: backend against a real FoundationDB cluster,
# or fail (exit 1) saying why. ctest registers the *_fdb_real tests only when configured with
# -DRL_TEST_FDB_CLUSTER=FILE, so a missing cluster or library here is a failure, not a skip.
#   RL_TEST_FDB_CLUSTER   the cluster file of a FoundationDB cluster the tests may write to: they
#                         clear the user keyspace ["", "\xff") and write and clear a few keys in
#                         "\xff/..." (use a throwaway cluster)
#   RL_TEST_FDB_LIBRARY   FoundationDB's libfdb_c.so (default: the dynamic linker finds libfdb_c.so)
#   usage: fdb-real.sh PROGRAM [ARGS...]
if [ -z "$RL_TEST_FDB_CLUSTER" ]; then
    echo "fdb-real.sh: RL_TEST_FDB_CLUSTER does not name a FoundationDB cluster file"
    exit 1
fi
if [ ! -r "$RL_TEST_FDB_CLUSTER" ]; then
    echo "fdb-real.sh: RL_TEST_FDB_CLUSTER=$RL_TEST_FDB_CLUSTER is not a readable file"
    exit 1
fi
lib="${RL_TEST_FDB_LIBRARY:-libfdb_c.so}"
case "$lib" in
*/*)
    if [ ! -r "$lib" ]; then
        echo "fdb-real.sh: RL_TEST_FDB_LIBRARY=$lib does not exist"
        exit 1
    fi ;;
*)
    if ! /sbin/ldconfig -p 2>/dev/null | grep -q "$lib "; then
        echo "fdb-real.sh: FoundationDB's client library ($lib) is not installed (foundationdb-clients 7.1 or later)"
        exit 1
    fi ;;
esac
echo "fdb-real.sh: FoundationDB cluster $RL_TEST_FDB_CLUSTER through $lib"
unset RL_FDBC_URL
RL_FDB_LIBRARY="$lib"
RL_TEST_URL="fdb:$RL_TEST_FDB_CLUSTER"
export RL_FDB_LIBRARY RL_TEST_URL
exec "$@"
