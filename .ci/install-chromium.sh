#!/usr/bin/env bash
# Installs Debian's Chromium for the browser test (test/adapters/http/browser.test.ts)
# when /usr/bin/chromium is missing. Playwright's own browser download cannot work here,
# so the test drives this binary through playwright-core. Needs root (apt-get).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  echo "chromium: $(/usr/bin/chromium --version 2>/dev/null || echo present) at /usr/bin/chromium"
  exit 0
fi
echo "== installing chromium (Debian package)"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y chromium
/usr/bin/chromium --version
