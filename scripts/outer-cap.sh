# Sourced by test.sh: puts the calling shell (and so everything it starts) into a cgroup with a
# memory and pids ceiling, on cgroup v2 or on the v1 memory and pids hierarchies, and removes it
# again at exit. airlock creates its sandboxes' cgroups under the caller's own cgroup, so they
# nest inside this cap.

outer_cap_memory=${AIRLOCK_TEST_MEMORY:-12G}
outer_cap_pids=${AIRLOCK_TEST_PIDS:-8192}
outer_cap_dirs=()

outer_cap_enter() {
        local name="testcap-$$" fs
        fs=$(stat -fc %T /sys/fs/cgroup 2>/dev/null || true)
        if [ "$fs" = cgroup2fs ]; then
                local root=/sys/fs/cgroup
                local cap=$root/$name
                mkdir "$cap"
                echo "+memory +pids" > "$root/cgroup.subtree_control" 2>/dev/null || true
                echo "$outer_cap_memory" > "$cap/memory.max"
                echo "$outer_cap_pids" > "$cap/pids.max"
                # v2 allows processes only in leaves: the suite runs in one, sandboxes go
                # into a sibling that airlock is told about.
                mkdir "$cap/suite" "$cap/sandboxes"
                echo "+memory +pids +cpu" > "$cap/cgroup.subtree_control"
                echo "+memory +pids +cpu" > "$cap/sandboxes/cgroup.subtree_control" 2>/dev/null || true
                echo $$ > "$cap/suite/cgroup.procs"
                export AIRLOCK_CGROUP_PARENT="$name/sandboxes"
                outer_cap_dirs=("$cap/suite" "$cap/sandboxes" "$cap")
                echo "outer cap: cgroup v2 $cap (memory $outer_cap_memory, pids $outer_cap_pids)"
        elif [ -d /sys/fs/cgroup/memory ] && [ -d /sys/fs/cgroup/pids ]; then
                local c
                for c in memory pids cpu; do
                        [ -d /sys/fs/cgroup/$c ] || continue
                        local own
                        own=$(awk -F: -v c=$c '$2 ~ "(^|,)" c "(,|$)" {print $3}' /proc/self/cgroup)
                        local cap=/sys/fs/cgroup/$c${own%/}/$name
                        mkdir "$cap"
                        outer_cap_dirs+=("$cap")
                        case $c in
                        memory) echo "$outer_cap_memory" > "$cap/memory.limit_in_bytes" ;;
                        pids) echo "$outer_cap_pids" > "$cap/pids.max" ;;
                        esac
                        echo $$ > "$cap/cgroup.procs"
                done
                echo "outer cap: cgroup v1 .../$name (memory $outer_cap_memory, pids $outer_cap_pids)"
        else
                echo "outer cap: SKIPPED, no memory and pids cgroup controllers on this host"
        fi
        trap outer_cap_leave EXIT
}

outer_cap_leave() {
        local d parent
        trap - EXIT
        for d in "${outer_cap_dirs[@]}"; do
                [ -d "$d" ] || continue
                if [ -f "$d/cgroup.procs" ] && grep -qx $$ "$d/cgroup.procs" 2>/dev/null; then
                        parent=$(dirname "$d")
                        [ "$(basename "$d")" = suite ] && parent=$(dirname "$parent")
                        [ "$(basename "$parent")" = "testcap-$$" ] && parent=$(dirname "$parent")
                        echo $$ > "$parent/cgroup.procs" 2>/dev/null || true
                fi
        done
        for d in "${outer_cap_dirs[@]}"; do
                rmdir "$d" 2>/dev/null || true
        done
        outer_cap_dirs=()
}
