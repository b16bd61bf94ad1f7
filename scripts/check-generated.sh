#!/usr/bin/env bash
# Regenerates the code of proto/ in a temporary folder and fails when src/gen differs from it
# (a changed, missing or extra file). The tree is left as it is.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
npx --no-install buf generate --output "$out"
if ! diff -r "$out/src/gen" src/gen >&2; then
  echo "src/gen is stale: run 'npm run gen' and commit the result" >&2
  exit 1
fi
echo "generated code is current"
