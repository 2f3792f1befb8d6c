#!/bin/sh
# node-binding.sh — run FoundationDB's Node.js binding (npm `foundationdb`, installed unmodified by
# scripts/install-node-binding.sh into tests/binding/node/node_modules) on reclayer's libfdb_c.so:
# tests/binding/node/workload.js with LD_LIBRARY_PATH pointing at the library's directory, so the
# binding's prebuilt addon binds reclayer's library. Used by cmake/fdbc-node.cmake.
#   usage: node-binding.sh SOURCE_DIR LIBFDB_C
# The database: the cluster file of RL_TEST_URL=cluster:FILE when set (behind rl_with_cluster), else
# an embedded mem: database (RL_FDBC_URL). Exits 77 (ctest: skipped), saying why, when node or the
# installed binding is missing; the workload's own exit code otherwise.
src=$1
lib=$2
dir="$src/tests/binding/node"
if ! command -v node >/dev/null 2>&1; then
    echo "node-binding.sh: skipped: node is not installed (the binding test needs Node.js)"
    exit 77
fi
if [ ! -f "$dir/node_modules/foundationdb/package.json" ]; then
    echo "node-binding.sh: skipped: the binding is not installed (run scripts/install-node-binding.sh, or make deps)"
    exit 77
fi
if [ ! -f "$lib" ]; then
    echo "node-binding.sh: $lib is not built" >&2
    exit 1
fi
case "$RL_TEST_URL" in
cluster:*) db=${RL_TEST_URL#cluster:} ;;
*) db=/nonexistent/fdb.cluster; RL_FDBC_URL=mem:; export RL_FDBC_URL ;;
esac
RL_FDBC_LIB=$lib
LD_LIBRARY_PATH=$(dirname "$lib")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export RL_FDBC_LIB LD_LIBRARY_PATH
echo "node-binding.sh: node $(node --version), foundationdb $(node -p "require('$dir/node_modules/foundationdb/package.json').version"), database ${RL_TEST_URL:-mem:}"
cd "$dir" && exec node workload.js "$db"
