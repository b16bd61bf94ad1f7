#!/usr/bin/env bash
# Regenerates src/gen from proto/ and fails when the committed code differs.
set -euo pipefail
cd "$(dirname "$0")/.."
npm run --silent gen
if ! git diff --quiet --exit-code -- src/gen || [ -n "$(git ls-files --others --exclude-standard -- src/gen)" ]; then
  echo "src/gen is stale: run 'npm run gen' and commit the result" >&2
  git status --short -- src/gen >&2
  exit 1
fi
echo "generated code is current"
