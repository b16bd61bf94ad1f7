#!/usr/bin/env bash
# Regenerates the sealing vectors with the published Go client
# (github.com/siderolabs/discovery-client, version pinned in go.mod):
#   1. vectors.json: blobs the Go client sealed (go run . generate; its AES-GCM
#      nonces are random, so the data blobs change on every run);
#   2. blobs our client seals from the same plaintexts (seal.ts, Node 24 via npm);
#   3. opened-by-go.json: what the Go client opened from ours (go run . verify);
#      fails when Go does not read back the plaintexts we sealed.
# Needs Go (see go.mod) and the module proxy; run from anywhere.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

cd "$here"
go run . generate >"$tmp/vectors.json"
mv "$tmp/vectors.json" vectors.json
(cd "$root" && npm exec --silent -- node test/interop/vectors/seal.ts) >"$tmp/sealed-by-us.json"
go run . verify "$tmp/sealed-by-us.json" >"$tmp/opened-by-go.json"
mv "$tmp/opened-by-go.json" opened-by-go.json
# the project's formatter owns the layout of committed JSON (values are unchanged)
(cd "$root" && npm exec --silent -- biome format --write test/interop/vectors/vectors.json test/interop/vectors/opened-by-go.json)
echo "wrote $here/vectors.json and $here/opened-by-go.json"
