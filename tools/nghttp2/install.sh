#!/usr/bin/env bash
# The nghttp2 client tools (nghttp, h2load) that tests/h2_clients.rs runs against the gateway's
# HTTP/2 (h2c and TLS), from Debian's nghttp2-client package; nothing is done when both are
# already on PATH.
set -euo pipefail
if command -v nghttp >/dev/null && command -v h2load >/dev/null; then
  exit 0
fi
sudo=""
[ "$(id -u)" = 0 ] || sudo=sudo
$sudo apt-get install -y nghttp2-client || { $sudo apt-get update && $sudo apt-get install -y nghttp2-client; }
