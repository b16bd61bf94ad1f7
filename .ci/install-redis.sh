#!/usr/bin/env bash
# Installs Debian's redis-server (7.0) for the Redis backend's tests, which start
# their own servers on free loopback ports, when it is missing. Needs root (apt-get).
set -euo pipefail
if command -v redis-server >/dev/null && command -v redis-cli >/dev/null; then
  echo "redis: $(redis-server --version)"
  exit 0
fi
echo "== installing redis-server (Debian package)"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y redis-server
redis-server --version
