#!/usr/bin/env bash
# The real MCP servers tests/mcp.rs and tests/sdk/test_mcp_sdk.py run against, in a cache
# directory (default ~/.cache/shardgate-mcp, or $SHARDGATE_MCP_HOME): the npm package
# @modelcontextprotocol/server-everything, and a venv with the PyPI `mcp` package for
# tools/mcp/pyserver.py. Each is installed once; a second run only checks.
# Prints the cache directory.
set -euo pipefail
home="${SHARDGATE_MCP_HOME:-$HOME/.cache/shardgate-mcp}"
mkdir -p "$home"
if [ ! -f "$home/npm/node_modules/@modelcontextprotocol/server-everything/package.json" ]; then
  mkdir -p "$home/npm"
  npm install --prefix "$home/npm" --no-audit --no-fund --silent @modelcontextprotocol/server-everything@2025.11.25 >&2
fi
if [ ! -x "$home/venv/bin/python" ] || ! "$home/venv/bin/python" -c "import mcp" 2>/dev/null; then
  python3 -m venv "$home/venv"
  "$home/venv/bin/pip" install -q "mcp==1.23.1" >&2
fi
echo "$home"
