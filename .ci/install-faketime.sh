#!/usr/bin/env bash
# Installs Debian's faketime (libfaketime) for the robustness run, which starts
# one instance with its clock offset, when it is missing. Needs root (apt-get).
set -euo pipefail
if [ -e /usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1 ]; then
  echo "faketime: present"
  exit 0
fi
echo "== installing faketime (Debian package)"
export DEBIAN_FRONTEND=noninteractive
apt-get update
apt-get install -y faketime
