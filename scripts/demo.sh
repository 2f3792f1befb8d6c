#!/usr/bin/env bash
# demo.sh BUILD_DIR — the main job (`make demo`). For now: round-trip a few tuples through
# `rl tuple`; later issues replace it with a quick benchmark campaign.
set -euo pipefail
rl="$1/rl"
echo "== rl tuple: encode, decode and print a few tuples"
for t in '[{"int":"1"},{"string":"a"},{"bytes":"00"},{"null":true}]' \
         '[{"int":"-1180591620717411303424"},{"double":"3ff0000000000000"},{"bool":true}]' \
         '[{"tuple":[{"null":true},{"string":"nested"}]},{"uuid":"000102030405060708090a0b0c0d0e0f"}]'; do
  hex=$("$rl" tuple encode "$t")
  back=$("$rl" tuple decode "$hex")
  human=$("$rl" tuple print "$hex")
  printf '%s\n  hex   %s\n  json  %s\n  human %s\n' "$t" "$hex" "$back" "$human"
done
