#!/usr/bin/env bash
# install-node-binding.sh — install FoundationDB's Node.js binding (npm `foundationdb`, the version
# pinned by tests/binding/node/package-lock.json) for the binding test (cmake/node-binding.sh):
# `npm ci --ignore-scripts` into tests/binding/node/node_modules. The package ships a prebuilt
# N-API addon that links libfdb_c.so by name; the test points it at reclayer's library. Its install
# script is skipped: it would try the addon against whatever libfdb_c.so the system has, and build
# from source (FoundationDB's headers) when that fails. Never fails the build: without node/npm or
# the registry the binding test skips and says why.
set -uo pipefail
dir="$(cd "$(dirname "$0")/.." && pwd)/tests/binding/node"
if [ -f "$dir/node_modules/foundationdb/package.json" ]; then
  echo "install-node-binding: present"
  exit 0
fi
if ! command -v npm >/dev/null 2>&1; then
  echo "install-node-binding: npm is not installed: the binding test will be skipped"
  exit 0
fi
if (cd "$dir" && timeout 300 npm ci --ignore-scripts --no-audit --no-fund --loglevel=error); then
  echo "install-node-binding: installed foundationdb into $dir/node_modules"
else
  echo "install-node-binding: npm ci failed: the binding test will be skipped"
fi
exit 0
