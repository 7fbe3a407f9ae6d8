#!/usr/bin/env bash
# The newcomer's first command: installs what is missing, builds airlock, reports what the
# kernel offers, and runs code in a sandbox. Needs root (airlock maps unique host uids and
# manages cgroups); re-runs itself with sudo when started as another user.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
        exec sudo --preserve-env=PATH "$0" "$@"
fi

scripts/deps.sh
[ -f build/build.ninja ] || meson setup build --buildtype=debugoptimized >/dev/null
ninja -C build >/dev/null
airlock=build/src/cli/airlock

echo "== airlock doctor"
$airlock doctor
echo
echo "== a pandas cell in the data-science profile, as JSON"
echo 'import pandas as pd; pd.DataFrame({"a":[1,2]}).a.sum()' | $airlock run -p data-science --json -
echo
echo "== examples/hello.py, streamed"
$airlock run examples/hello.py
