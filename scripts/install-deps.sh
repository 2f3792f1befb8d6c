#!/usr/bin/env bash
# install-deps.sh — install the Debian packages reclayer needs to build, test, fuzz and benchmark.
# Idempotent: installs only what is missing and says what it installs. Runs as root, or via sudo.
set -euo pipefail

PKGS=(
  cmake make gcc pkg-config         # build
  clang libclang-rt-14-dev          # libFuzzer and sanitizer runtimes
  libcmocka-dev                     # unit tests
  libxxhash-dev libzstd-dev         # checksums, compression (the campaign's results.json.zst)
  zstd                              # reading results.json.zst by hand and in scripts/adaptive-decompose.py
  liblmdb-dev                       # the ssd storage engine and the LMDB baseline
  libprotobuf-c-dev protobuf-c-compiler  # records
  libjansson-dev                    # JSON (tools, test vectors, benchmark results)
  libssl-dev                        # libcrypto: HMAC-SHA256 and nonces of the cluster handshake
  libsqlite3-dev                    # the SQLite peer baseline
  libedit-dev                       # rl shell's line editing and history
  gnuplot-nox                       # benchmark plots
  clang-format-14                   # the formatter check (scripts/check-format.sh)
  help2man                          # the man pages of rl, rlkvd and rlbench (from --help)
)

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PKGS[@]} packages present"
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
echo "install-deps: done"
