#!/usr/bin/env bash
# airlock's MCP server against real clients from npm: the official TypeScript SDK client
# (stdio and streamable HTTP) and the official conformance runner (server mode); with the
# same SDK client, the MCP servers the Glue is tested with (servers.test.mjs: the example CRM
# server and tests/e2e/mcp_fixture.py, which need no daemon); the chat-completions gateway
# against the openai client (openai-tools.test.mjs, which starts a daemon of its own pointed at
# a fake model on loopback and stops it by its pid); the Files and Containers APIs against the
# same client (containers.test.mjs, a daemon of its own too); and the Responses API against
# the openai client and the OpenAI Agents SDK (responses.test.mjs, a daemon of its own with a
# fake model); and airlock's own JavaScript client, clients/js (client-js.test.mjs, daemons of
# its own on TCP and on a unix socket; it also type-checks the client's declarations and
# examples/agent-loop.ts with the pinned TypeScript and runs the compiled example); and the
# official E2B SDK against /e2b (e2b.test.mjs, and e2b-data.test.mjs for results' data and
# charts: a daemon of its own each); and IPython cells through the E2B SDK, the MCP SDK client
# and the Responses API (ipython.test.mjs); and TypeScript cells and static imports through the
# E2B SDK and the MCP SDK client (typescript.test.mjs); and R cells through the E2B SDK and the
# MCP SDK client (r.test.mjs, an E2B daemon of its own). Installs
# the pinned packages (npm ci, from the npm cache when it can), starts a daemon on a free
# loopback port with a temporary state directory and the token it creates
# there, runs the node:test suites, then stops the daemon (by its pid) and removes what it made.
#
#   tests/mcp/run.sh              uses $AIRLOCK_BIN, else build/src/cli/airlock
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
bin=${AIRLOCK_BIN:-$root/build/src/cli/airlock}
if [ ! -x "$bin" ]; then
        echo "tests/mcp: no airlock binary at $bin (build it, or set AIRLOCK_BIN)" >&2
        exit 2
fi
export AIRLOCK_BIN=$bin

cd "$here"
./install.sh

tmp=$(mktemp -d "${TMPDIR:-/tmp}/airlock-mcp-tests.XXXXXX")
daemon_pid=
cleanup() {
        local status=$?
        if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
                kill -TERM "$daemon_pid"
                for _ in $(seq 100); do
                        kill -0 "$daemon_pid" 2>/dev/null || break
                        sleep 0.1
                done
                if kill -0 "$daemon_pid" 2>/dev/null; then
                        echo "tests/mcp: the daemon did not stop on SIGTERM; killing it" >&2
                        kill -KILL "$daemon_pid" || true
                        status=1
                fi
                # A daemon that exits non-zero (a sanitizer report, a failed teardown) fails
                # the run too.
                local daemon_status=0
                wait "$daemon_pid" 2>/dev/null || daemon_status=$?
                if [ $daemon_status -ne 0 ]; then
                        echo "tests/mcp: the daemon exited with status $daemon_status" >&2
                        status=1
                fi
        fi
        if [ $status -ne 0 ] && [ -f "$tmp/daemon.log" ]; then
                echo "---- daemon log (last 40 lines)" >&2
                tail -n 40 "$tmp/daemon.log" >&2
        fi
        rm -rf "$tmp"
        exit $status
}
trap cleanup EXIT INT TERM

# The conformance runner reaches the daemon through a token-adding proxy on this port, which
# the daemon must accept as a Host (see conformance.test.mjs).
proxy_port=$(node -e 'const s=require("net").createServer().listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})')

# The daemon makes its own token file in the fresh state directory.
env -u AIRLOCK_TOKEN "$bin" serve --listen 127.0.0.1:0 --state-dir "$tmp/state" --pool-size 1 \
        --allow-host "127.0.0.1:$proxy_port" >"$tmp/daemon.log" 2>&1 &
daemon_pid=$!
url=
for _ in $(seq 300); do
        url=$(sed -n 's/^airlock: listening on \(http:[^ ]*\).*/\1/p' "$tmp/daemon.log" | head -n 1)
        [ -n "$url" ] && break
        if ! kill -0 "$daemon_pid" 2>/dev/null; then
                echo "tests/mcp: the daemon exited before listening" >&2
                exit 1
        fi
        sleep 0.1
done
if [ -z "$url" ]; then
        echo "tests/mcp: the daemon did not start listening within 30 s" >&2
        exit 1
fi

export AIRLOCK_DAEMON_URL=$url
AIRLOCK_TOKEN=$(cat "$tmp/state/token")
export AIRLOCK_TOKEN
export AIRLOCK_PROXY_PORT=$proxy_port

node --test sdk.test.mjs transport.test.mjs conformance.test.mjs servers.test.mjs openai-tools.test.mjs \
        internal-tools.test.mjs containers.test.mjs responses.test.mjs client-js.test.mjs e2b.test.mjs \
        e2b-data.test.mjs e2b-contexts.test.mjs ipython.test.mjs typescript.test.mjs r.test.mjs
