#!/usr/bin/env bash
# The newcomer's first command: installs what is missing, builds airlock, reports what the
# kernel offers, runs code once in a sandbox, then brings the daemon up and makes a first call
# to it. On a terminal the daemon keeps serving until Ctrl-C; otherwise it stops after the
# demo. Needs root (airlock maps unique host uids and manages cgroups); re-runs itself with
# sudo when started as another user.
#
#   AIRLOCK_LISTEN=127.0.0.1:8080   where the daemon listens
#   AIRLOCK_STATE_DIR=DIR           its state (token, session store); default /var/lib/airlock
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
        exec sudo --preserve-env=PATH,AIRLOCK_LISTEN,AIRLOCK_STATE_DIR "$0" "$@"
fi

scripts/deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
ninja -C build >/dev/null
airlock=$PWD/build/src/cli/airlock
listen=${AIRLOCK_LISTEN:-127.0.0.1:8080}
state=${AIRLOCK_STATE_DIR:-/var/lib/airlock}

echo "== airlock doctor"
$airlock doctor
echo
echo "== a pandas cell in the data-science profile, as JSON"
echo 'import pandas as pd; pd.DataFrame({"a":[1,2]}).a.sum()' | $airlock run -p data-science --json -
echo
echo "== examples/hello.py, streamed"
$airlock run examples/hello.py
echo

echo "== the daemon: airlock serve --listen $listen --state-dir $state"
log=$(mktemp /tmp/airlock-demo-XXXXXX.log)
$airlock serve --listen "$listen" --state-dir "$state" 2>"$log" &
daemon=$!
stop() {
        kill -TERM "$daemon" 2>/dev/null || true
        wait "$daemon" 2>/dev/null || true
        rm -f "$log"
}
trap stop EXIT INT TERM
for _ in $(seq 100); do
        grep -q "listening on" "$log" && break
        if ! kill -0 "$daemon" 2>/dev/null; then
                cat "$log" >&2
                echo "demo: the daemon did not start (is $listen in use? set AIRLOCK_LISTEN)" >&2
                exit 1
        fi
        sleep 0.1
done
cat "$log"
token=$(cat "$state/token")
url="http://$listen"

echo
echo "== a session over HTTP with curl: create, run x = 41, then x + 1"
auth="Authorization: Bearer $token"
sid=$(curl -sf -H "$auth" -X POST "$url/v1/sessions" -d '{"profile": "default"}' |
        /usr/bin/python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])')
echo "\$ curl -H 'Authorization: Bearer ...' -X POST $url/v1/sessions/$sid/execute -d '{\"code\": \"x = 41\"}'"
curl -sf -H "$auth" -X POST "$url/v1/sessions/$sid/execute" -d '{"code": "x = 41"}' >/dev/null
echo "\$ curl ... -d '{\"code\": \"x + 1\"}'"
curl -sf -H "$auth" -X POST "$url/v1/sessions/$sid/execute" -d '{"code": "x + 1"}'
echo
echo
echo "== the same daemon through the CLI: airlock exec -s $sid -"
echo 'print("x is still", x)' | AIRLOCK_URL=$url AIRLOCK_TOKEN=$token $airlock exec -s "$sid" -
echo
echo "== a cell written for Jupyter: a shell escape, a magic, display() (docs/IPYTHON.md)"
cell='!echo "bash in $(pwd)"
%time total = sum(range(x * 1000))
from IPython.display import Markdown
display(Markdown(f"**total** = {total}"))'
printf '%s\n' "$cell" | sed 's/^/    /'
printf '%s\n' "$cell" | AIRLOCK_URL=$url AIRLOCK_TOKEN=$token $airlock exec -s "$sid" -
echo

if [ -t 0 ] && [ -t 1 ]; then
        echo "The daemon is serving at $url (token in $state/token). Ctrl-C stops it."
        trap - EXIT
        trap stop INT TERM
        tail -n 0 -f "$log" &
        wait "$daemon" || true
        rm -f "$log"
else
        echo "Not on a terminal: stopping the daemon. Run 'airlock serve' to keep one up."
fi
