#!/usr/bin/env bash
# Installs the pinned npm packages of tests/mcp (the MCP SDK, the reference MCP servers, the
# openai client), from the npm cache when it can. npm ci empties node_modules first, so it is
# skipped when the tree already matches the lockfile. Used by run.sh and by scripts/test.sh
# before the e2e tests that start the reference servers.
set -euo pipefail
cd "$(dirname "$0")"
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
        npm ci --prefer-offline --no-audit --no-fund --loglevel=error
fi
