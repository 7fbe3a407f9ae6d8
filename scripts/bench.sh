#!/usr/bin/env bash
# The benchmarks behind the README's speed tables, run one after another from a release build of
# this tree (build-rel, made if missing) as one run, each printed under the command that ran it.
# Every daemon benchmark starts its own `airlock serve` on a free loopback port and stops it;
# run as root on a quiet machine (other load moves every figure).
#
#   scripts/bench.sh            the hot path, creates, one-shots, memory, lifecycle (~15 min)
#   scripts/bench.sh --soak     also bench-soak's 600 s storm (docs/PERFORMANCE.md, fairness)
#   scripts/bench.sh --microvm  also bench-microvm (a guest image; slow without KVM)
set -uo pipefail
cd "$(dirname "$0")/.."

soak=0 microvm=0
for arg in "$@"; do
        case $arg in
        --soak) soak=1 ;;
        --microvm) microvm=1 ;;
        *) echo "usage: scripts/bench.sh [--soak] [--microvm]" >&2; exit 2 ;;
        esac
done
if [ "$(id -u)" != 0 ]; then
        echo "scripts/bench.sh: the daemon benchmarks make sandboxes and cgroups: run as root" >&2
        exit 2
fi
[ -f build-rel/build.ninja ] || meson setup build-rel --buildtype=release >/dev/null || exit 1
ninja -C build-rel >/dev/null || exit 1

b=build-rel/bench a=build-rel/src/cli/airlock status=0
run() {
        echo
        echo "\$ $*"
        "$@" 2>&1 || { echo "(exit status $?)"; status=1; }
}
echo "$(date -u +%FT%TZ) $(git rev-parse --short HEAD 2>/dev/null) $(nproc) cores," \
     "load average $(cut -d' ' -f1-3 /proc/loadavg)"
run $b/bench-pagefault
run $b/bench-run $a 50
run $b/bench-execute $a 3000
run $b/bench-throughput $a
run $b/bench-create $a
run $b/bench-oneshot $a
run $b/bench-idle-memory $a
run $b/bench-scale $a --sessions 10,100,1000
run $b/bench-codemode $a
run $b/bench-responses $a
run $b/bench-json
run $b/bench-lifecycle $a -n 20 --pool-size 5
[ $soak = 1 ] && run $b/bench-soak $a
[ $microvm = 1 ] && [ -x $b/bench-microvm ] && run $b/bench-microvm $a
echo
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
exit $status
