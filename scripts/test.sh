#!/usr/bin/env bash
# The whole test suite: installs what is missing, builds with AddressSanitizer and UBSan, runs
# the unit tests (Criterion), the runner's cell tests, the end-to-end and hostile suites
# (pytest) inside an outer cgroup cap, and checks formatting. Needs root, like airlock itself.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
        exec sudo --preserve-env=PATH,CI "$0" "$@"
fi

scripts/deps.sh

build=build-test
if [ ! -f $build/build.ninja ]; then
        meson setup $build --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false >/dev/null
fi
ninja -C $build
export AIRLOCK_BIN=$PWD/$build/src/cli/airlock
export AIRLOCK_RUNNER=$PWD/$build/src/runner/airlock-runner
# The sanitizers watch airlock itself; the runner inside the sandbox is built without them.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
export PYTHONDONTWRITEBYTECODE=1
py=/usr/bin/python3

# The outer cap: everything below runs in a cgroup with a memory and pids ceiling, so a sandbox
# bug found by a fork or memory bomb fails a test instead of taking the machine down.
source scripts/outer-cap.sh
outer_cap_enter

status=0
run() {
        echo
        echo "==== $*"
        "$@" || status=1
}

# The microVM tier's guest image (`airlock profile build microvm`: the shared-library closure
# and mkfs.erofs, minutes) is built in the background while the unit tests run, where
# tests/e2e/test_microvm.py would build it (the build tree's vm-images, rebuilt when the runner
# or the guest's init is newer); the second lane waits for it before its microVM tests.
vm_kernel_dir=${AIRLOCK_VM_KERNEL_DIR:-/var/cache/airlock/vm-kernel}
prebuild_vm_image() {
        local images=$PWD/$build/vm-images root state rc=0
        root=$images/microvm/root.erofs
        command -v qemu-system-x86_64 mkfs.erofs cpio > /dev/null || return 0
        compgen -G "$vm_kernel_dir/boot/vmlinuz-*" > /dev/null || return 0
        if [ -f "$root" ] && [ "$root" -nt "$AIRLOCK_RUNNER" ] &&
                [ "$root" -nt "$build/src/vm/airlock-vm-init" ]; then
                return 0
        fi
        state=$(mktemp -d /tmp/airlock-e2e-vm-XXXXXX)
        env -u AIRLOCK_BIN -u AIRLOCK_RUNNER AIRLOCK_VM_IMAGES="$images" \
                AIRLOCK_VM_KERNEL_DIR="$vm_kernel_dir" \
                "$AIRLOCK_BIN" profile build microvm --state-dir "$state" || rc=$?
        rm -rf "$state"
        return $rc
}
vm_image_log=$(mktemp /tmp/airlock-test-vm-image.XXXXXX)
(
        rc=0
        prebuild_vm_image > "$vm_image_log" 2>&1 || rc=$?
        echo $rc > "$vm_image_log.rc"
) &

run meson test -C $build --suite unit --print-errorlogs --verbose --num-processes 2
run $py -m pytest -q -p no:cacheprovider tests/unit
# The e2e tests of internal tools start the reference MCP servers from npm.
run tests/mcp/install.sh

# Two lanes side by side (most of these tests wait on daemons and cells, not on the CPU): the
# end-to-end suite prints as it runs; the client, node, cluster and dashboard suites write to a
# log that is printed when the first lane is done, each with its runner's own summary. Each test
# starts its own daemons. The hostile suites run alone afterwards: their host guard checks the whole
# host (sandbox processes, cgroups, mounts, /tmp) for anything a test left behind.
lane_log=$(mktemp /tmp/airlock-test-lane.XXXXXX)
e2e_lane_b=(tests/e2e/test_microvm.py tests/e2e/test_microvm_hostile.py
        tests/e2e/test_microvm_surfaces.py tests/e2e/test_microvm_egress.py
        tests/e2e/test_cluster_node.py tests/e2e/test_kubernetes_manifests.py
        tests/e2e/test_lifecycle.py tests/e2e/test_fork_shared.py tests/e2e/test_data_stack.py
        tests/e2e/test_hub_faults.py)
lane_b() {
        local status=0
        # The Python client (clients/python) against its own daemons; it installs the package
        # offline with Debian's pip into a temporary directory.
        run $py -m pytest -q -p no:cacheprovider tests/clients/python
        run tests/mcp/run.sh
        # A cluster on one machine (scripts/cluster.sh): three nodes in network namespaces
        # behind nginx, the SDKs of tests/mcp through its front door (tests/mcp/cluster.test.mjs).
        run $py -m pytest -q -p no:cacheprovider tests/cluster
        # Some of tests/e2e, so that the two lanes take about as long: the microVM tier (its
        # guest image build and cold boots take minutes under QEMU's emulation where the host
        # has no KVM), the cluster's nodes and manifests, and the lifecycle.
        echo
        echo "==== the microVM guest image, built in the background since the unit tests"
        # (The lane is a subshell: the build is its sibling, so it waits for the status file.)
        while [ ! -s "$vm_image_log.rc" ]; do
                sleep 1
        done
        if [ "$(cat "$vm_image_log.rc")" = 0 ]; then
                echo "ready"
        else
                cat "$vm_image_log"
                echo "(failed: tests/e2e/test_microvm.py will try again and say why)"
        fi
        rm -f "$vm_image_log" "$vm_image_log.rc"
        run $py -m pytest -q -p no:cacheprovider "${e2e_lane_b[@]}"
        # The dashboard (/ui) in Debian's headless Chromium; its screenshot goes to
        # tests/ui/artefacts/.
        run $py -m pytest -q -p no:cacheprovider tests/ui
        return $status
}
lane_b > "$lane_log" 2>&1 &
lane_b_pid=$!
run $py -m pytest -q -p no:cacheprovider tests/e2e "${e2e_lane_b[@]/#/--ignore=}"
lane_b_status=0
wait $lane_b_pid || lane_b_status=$?
echo
echo "==== the second lane (Python client, node clients, cluster, part of e2e, dashboard), run beside the e2e suite"
cat "$lane_log"
rm -f "$lane_log"
[ $lane_b_status -eq 0 ] || status=1

run $py -m pytest -q -p no:cacheprovider tests/hostile
run env AIRLOCK_HOSTILE_VIA=daemon $py -m pytest -q -p no:cacheprovider tests/hostile

echo
echo "==== clang-format"
if git ls-files --cached --others --exclude-standard '*.c' '*.h' | xargs clang-format --dry-run --Werror; then
        echo "clang-format: all files formatted"
else
        echo "clang-format: the files above need formatting (clang-format -i FILE)"
        status=1
fi

outer_cap_leave
exit $status
