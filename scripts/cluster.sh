#!/usr/bin/env bash
# An airlock cluster on one machine (docs/KUBERNETES.md, "A cluster on one machine"): N daemons,
# each in its own network namespace with its own state directory, behind nginx rendered from the
# same template as the Kubernetes front door (packaging/kubernetes/base/frontdoor). Needs root.
#
#   scripts/cluster.sh up --nodes N --listen 127.0.0.1:PORT --dir DIR [-- SERVE-ARGS...]
#   scripts/cluster.sh status DIR
#   scripts/cluster.sh kill-node DIR I     SIGKILL node I's daemon
#   scripts/cluster.sh stop-node DIR I     SIGTERM node I's daemon: it drains (saves) and exits
#   scripts/cluster.sh start-node DIR I    start node I again on its state directory
#   scripts/cluster.sh down DIR            stop everything, delete the namespaces and the bridge
#
# The token of every node is in DIR/token. Node I is nI at 10.251.X.(I+2):8080 on a bridge at
# 10.251.X.1, where X is the first /24 no route of this machine covers. AIRLOCK_BIN and
# AIRLOCK_RUNNER name the binaries (the tests set them); otherwise build/ is built as
# scripts/demo.sh does. The script only signals processes whose pids (and start times) it
# recorded in DIR, and only sends traffic to loopback and to the namespaces it made.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
render=$root/packaging/kubernetes/base/frontdoor/render
max_nodes=16
port_in_ns=8080

die() {
        echo "cluster: $*" >&2
        exit 2
}
say() { echo "cluster: $*" >&2; }

usage() {
        sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'
}

need_root() {
        [ "$(id -u)" -eq 0 ] || die "needs root (network namespaces, a bridge and airlock's sandboxes); run it with sudo"
}

# The process start time (clock ticks since boot, field 22 of /proc/PID/stat): with the pid it
# names one process, so a pid reused by another process is never signalled.
start_time() {
        local stat
        stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
        stat=${stat##*) }
        # shellcheck disable=SC2086
        set -- $stat
        echo "${20}"
}

# Records a pid and its start time in FILE.
record_pid() {
        local st
        st=$(start_time "$2") || st=0
        echo "$2 $st" >"$1"
}

# Prints the recorded pid of FILE when that process is still the one recorded, else fails.
live_pid() {
        local pid st now
        [ -f "$1" ] || return 1
        read -r pid st <"$1" || return 1
        [[ $pid =~ ^[0-9]+$ ]] || return 1
        now=$(start_time "$pid") || return 1
        [ "$now" = "$st" ] || return 1
        echo "$pid"
}

# Waits up to $2 seconds for the process of FILE $1 to end.
wait_gone() {
        local i
        for ((i = 0; i < $2 * 10; i++)); do
                live_pid "$1" >/dev/null || return 0
                sleep 0.1
        done
        return 1
}

load_cluster() {
        [ -n "${1:-}" ] || die "give the cluster's directory (see --help)"
        dir=$(cd "$1" 2>/dev/null && pwd) || die "'$1' is not a directory"
        [ -f "$dir/cluster.env" ] || die "'$dir' holds no cluster (no cluster.env): was it made by 'cluster.sh up'?"
        # shellcheck source=/dev/null
        source "$dir/cluster.env"
}

check_index() {
        [[ ${1:-} =~ ^(0|[1-9][0-9]*)$ ]] || die "give a node index 0..$((nodes - 1)), not '${1:-}'"
        [ "$1" -lt "$nodes" ] || die "node $1 does not exist: this cluster has nodes 0..$((nodes - 1))"
}

node_addr() { echo "10.251.$subnet.$(($1 + 2))"; }
node_ns() { echo "airlock-$tag-$1"; }

http_code() {
        # Only to the namespaces' addresses or loopback; --noproxy: never through a proxy.
        curl -s -o /dev/null -w '%{http_code}' --noproxy '*' --max-time "${2:-2}" "$1" 2>/dev/null || true
}

# The health path of the binary: /readyz where the daemon has it (issue 26), else /healthz.
ready_path() {
        if grep -q "/readyz" "$airlock_bin" 2>/dev/null; then echo /readyz; else echo /healthz; fi
}

start_node() {
        local i=$1 ns addr state log pid ndir
        ndir=$dir/nodes/$i
        ns=$(node_ns "$i")
        addr=$(node_addr "$i")
        state=$ndir/state
        log=$ndir/daemon.log
        if pid=$(live_pid "$ndir/pid"); then
                die "node $i already runs (pid $pid)"
        fi
        mkdir -p "$state"
        chmod 700 "$ndir" "$state"
        install -m 600 "$dir/token" "$state/token"
        local args=(serve --listen "$addr:$port_in_ns" --state-dir "$state"
                --allow-host "$front_host" --allow-host "localhost:${front_host##*:}")
        if "$airlock_bin" serve --help 2>&1 | grep -q -- "--node "; then
                args+=(--node "n$i")
                local peers="" j
                for ((j = 0; j < nodes; j++)); do
                        peers+="${peers:+,}n$j=$(node_addr "$j"):$port_in_ns"
                done
                args+=(--peers "$peers")
        fi
        if "$airlock_bin" serve --help 2>&1 | grep -q -- "--trusted-proxies"; then
                args+=(--trusted-proxies "10.251.$subnet.0/24")
        fi
        args+=("${serve_extra[@]}")
        echo "$airlock_bin ${args[*]}" >"$ndir/command"
        # nsenter joins the network namespace only (ip netns exec would also remount /sys and
        # hide /sys/fs/cgroup, which the daemon needs); setsid keeps the daemon out of this
        # script's process group. Neither forks, so $! is the daemon's pid.
        nsenter --net="/run/netns/$ns" -- \
                setsid "$airlock_bin" "${args[@]}" </dev/null >>"$log" 2>&1 &
        record_pid "$ndir/pid" $!
}

# Waits until URL answers 200, TRIES times 0.1 s; fails when the process of PIDFILE is gone
# first, with the end of LOG. WHAT names it in the messages.
wait_answer() {
        local url=$1 pidfile=$2 log=$3 tries=$4 what=$5 code t
        for ((t = 0; t < tries; t++)); do
                code=$(http_code "$url" 1)
                [ "$code" = 200 ] && return 0
                if ! live_pid "$pidfile" >/dev/null; then
                        say "$what exited before it answered; the end of $log:"
                        tail -n 20 "$log" >&2 || true
                        return 1
                fi
                sleep 0.1
        done
        say "$what did not answer $url with 200 within $((tries / 10)) s (last: ${code:-none}); the end of $log:"
        tail -n 20 "$log" >&2 || true
        return 1
}

wait_node_ready() {
        local i=$1
        wait_answer "http://$(node_addr "$i"):$port_in_ns$(ready_path)" "$dir/nodes/$i/pid" \
                "$dir/nodes/$i/daemon.log" 600 "node $i"
}

start_frontdoor() {
        local fd=$dir/frontdoor i list=""
        mkdir -p "$fd/run"
        for ((i = 0; i < nodes; i++)); do
                list+="n$i $(node_addr "$i"):$port_in_ns"$'\n'
        done
        printf '%s' "$list" >"$fd/nodes"
        # Workers run as root: the temp directories are under DIR, which only root may enter,
        # and the front door listens on loopback only (cluster.sh refuses other addresses).
        "$render" --listen "$front_host" --rundir "$fd/run" --user root --workers 2 "$fd/nodes" >"$fd/nginx.conf"
        nginx -t -q -p "$fd/run" -e "$fd/run/error.log" -c "$fd/nginx.conf" ||
                die "nginx refused $fd/nginx.conf (see above)"
        setsid nginx -p "$fd/run" -e "$fd/run/error.log" -c "$fd/nginx.conf" </dev/null >>"$fd/run/stdout.log" 2>&1 &
        record_pid "$fd/pid" $!
        wait_answer "http://$front_host/frontdoor/healthz" "$fd/pid" "$fd/run/error.log" 100 \
                "the front door (nginx)"
}

# Picks X for 10.251.X.0/24: the first, from a start derived from the directory, that no route
# of this machine covers (another cluster's bridge has a route too).
pick_subnet() {
        local start x k
        start=$((16#$tag % 250))
        for ((k = 0; k < 250; k++)); do
                x=$(((start + k) % 250 + 1))
                if [ -z "$(ip -4 route show match "10.251.$x.0/24" | grep -v '^default' || true)" ] &&
                        [ -z "$(ip -4 route show root "10.251.$x.0/24")" ]; then
                        echo "$x"
                        return 0
                fi
        done
        return 1
}

cmd_up() {
        local n="" listen="" d=""
        serve_extra=()
        while [ $# -gt 0 ]; do
                case $1 in
                --nodes | --listen | --dir)
                        [ $# -ge 2 ] || die "$1 needs a value"
                        case $1 in --nodes) n=$2 ;; --listen) listen=$2 ;; --dir) d=$2 ;; esac
                        shift 2
                        ;;
                --)
                        shift
                        serve_extra=("$@")
                        break
                        ;;
                *) die "up: unknown argument '$1' (see --help)" ;;
                esac
        done
        [ -n "$n" ] || die "up: give --nodes N (1..$max_nodes)"
        if ! [[ $n =~ ^[1-9][0-9]*$ ]] || [ "$n" -lt 1 ] || [ "$n" -gt $max_nodes ]; then
                die "up: --nodes '$n' is not a number from 1 to $max_nodes"
        fi
        [ -n "$listen" ] || die "up: give --listen 127.0.0.1:PORT (the front door's address)"
        [[ $listen =~ ^(127\.[0-9]+\.[0-9]+\.[0-9]+|localhost|\[::1\]):([0-9]{1,5})$ ]] ||
                die "up: --listen '$listen' is not a loopback HOST:PORT (127.0.0.1:8080): the front door of a test cluster stays on this machine"
        local port=${BASH_REMATCH[2]}
        { [ "$port" -ge 1 ] && [ "$port" -le 65535 ]; } || die "up: port $port of --listen is not 1..65535"
        [ -n "$d" ] || die "up: give --dir DIR (created; holds the token, the nodes' state and logs)"
        need_root
        command -v nginx >/dev/null || die "nginx is missing: run scripts/deps.sh (Debian's nginx-light)"
        command -v curl >/dev/null || die "curl is missing: apt-get install curl"
        mkdir -p "$d"
        dir=$(cd "$d" && pwd)
        chmod 700 "$dir"
        if [ -f "$dir/cluster.env" ]; then
                die "'$dir' already holds a cluster: 'cluster.sh down $dir' first, or another --dir"
        fi

        if [ -n "${AIRLOCK_BIN:-}" ]; then
                airlock_bin=$AIRLOCK_BIN
        else
                "$root/scripts/deps.sh"
                [ -f "$root/build/build.ninja" ] || meson setup "$root/build" --buildtype=debugoptimized >/dev/null
                ninja -C "$root/build" >/dev/null
                airlock_bin=$root/build/src/cli/airlock
        fi
        [ -x "$airlock_bin" ] || die "'$airlock_bin' is not an executable (AIRLOCK_BIN)"

        nodes=$n
        front_host=$listen
        tag=$(printf '%s' "$dir" | sha256sum | cut -c1-6)
        # The namespaces' names hold the tag: a second cluster in another DIR gets its own.
        exec 9>/run/airlock-cluster.lock
        flock 9
        subnet=$(pick_subnet) || die "no free 10.251.X.0/24: every one is covered by a route of this machine"
        bridge=albr$tag
        {
                printf 'nodes=%q\nfront_host=%q\ntag=%q\nsubnet=%q\nbridge=%q\nairlock_bin=%q\n' \
                        "$nodes" "$front_host" "$tag" "$subnet" "$bridge" "$airlock_bin"
                printf 'serve_extra=('
                [ ${#serve_extra[@]} -eq 0 ] || printf '%q ' "${serve_extra[@]}"
                printf ')\n'
        } >"$dir/cluster.env"
        up_ok=0
        trap 'if [ "$up_ok" != 1 ]; then say "up failed; cleaning up (logs stay in $dir)"; cmd_down_loaded || true; fi' EXIT
        ip link add "$bridge" type bridge
        ip addr add "10.251.$subnet.1/24" dev "$bridge"
        ip link set "$bridge" up
        flock -u 9
        exec 9>&- # the daemons and nginx must not inherit the lock
        local i ns
        for ((i = 0; i < nodes; i++)); do
                ns=$(node_ns "$i")
                ip netns add "$ns"
                ip link add "al${tag}h$i" type veth peer name "al${tag}n$i"
                ip link set "al${tag}h$i" master "$bridge" up
                ip link set "al${tag}n$i" netns "$ns"
                ip -n "$ns" link set "al${tag}n$i" name eth0
                ip -n "$ns" addr add "$(node_addr "$i")/24" dev eth0
                ip -n "$ns" link set eth0 up
                ip -n "$ns" link set lo up
        done
        if [ ! -f "$dir/token" ]; then
                (umask 077 && head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$dir/token")
        fi
        for ((i = 0; i < nodes; i++)); do
                mkdir -p "$dir/nodes/$i"
                start_node "$i"
        done
        for ((i = 0; i < nodes; i++)); do
                wait_node_ready "$i" || false
        done
        start_frontdoor || false
        up_ok=1
        echo "cluster: $nodes nodes behind http://$front_host (token in $dir/token, logs in $dir/nodes/*/daemon.log)"
}

# Stops the front door and every node by their recorded pids, then removes the namespaces and
# the bridge. Whatever is already gone is skipped, so it works after a partial 'up'.
cmd_down_loaded() {
        local pid i f
        if pid=$(live_pid "$dir/frontdoor/pid"); then
                kill -QUIT "$pid" 2>/dev/null || true
                wait_gone "$dir/frontdoor/pid" 10 || { kill -KILL "$pid" 2>/dev/null || true; }
        fi
        for ((i = 0; i < ${nodes:-0}; i++)); do
                f=$dir/nodes/$i/pid
                if pid=$(live_pid "$f"); then
                        # A stopped (SIGSTOP) daemon is continued so it can drain.
                        kill -CONT "$pid" 2>/dev/null || true
                        kill -TERM "$pid" 2>/dev/null || true
                fi
        done
        for ((i = 0; i < ${nodes:-0}; i++)); do
                f=$dir/nodes/$i/pid
                if pid=$(live_pid "$f"); then
                        wait_gone "$f" 120 || {
                                say "node $i did not exit within 120 s of SIGTERM: SIGKILL"
                                kill -KILL "$pid" 2>/dev/null || true
                                wait_gone "$f" 10 || true
                        }
                fi
        done
        # A node killed and never started again leaves its cgroups (named by the cgroup-id of
        # its state directory, so never another daemon's); rmdir removes only empty ones.
        local id
        for ((i = 0; i < ${nodes:-0}; i++)); do
                f=$dir/nodes/$i/state/cgroup-id
                [ -f "$f" ] || continue
                id=$(cat "$f")
                [[ $id =~ ^[0-9a-f]{32}$ ]] || continue
                live_pid "$dir/nodes/$i/pid" >/dev/null && continue
                find /sys/fs/cgroup -depth -type d -name "airlock-d-$id" -prune -print 2>/dev/null |
                        while read -r cg; do
                                find "$cg" -depth -type d -exec rmdir {} + 2>/dev/null || true
                        done
        done
        for ((i = 0; i < ${nodes:-0}; i++)); do
                ip netns del "$(node_ns "$i")" 2>/dev/null || true
                ip link del "al${tag}h$i" 2>/dev/null || true
        done
        [ -z "${bridge:-}" ] || ip link del "$bridge" 2>/dev/null || true
        rm -f "$dir/cluster.env"
}

cmd_down() {
        [ -n "${1:-}" ] || die "down: give the cluster's directory"
        need_root
        if [ ! -f "$1/cluster.env" ]; then
                echo "cluster: nothing to stop in '$1' (no cluster.env)"
                return 0
        fi
        load_cluster "$1"
        cmd_down_loaded
        echo "cluster: down ($dir kept: the token, state and logs)"
}

cmd_kill_node() {
        load_cluster "${1:-}"
        check_index "${2:-}"
        need_root
        local pid
        pid=$(live_pid "$dir/nodes/$2/pid") || die "node $2 is not running"
        kill -KILL "$pid"
        wait_gone "$dir/nodes/$2/pid" 10 || die "node $2 (pid $pid) still runs 10 s after SIGKILL"
        echo "cluster: node $2 killed (pid $pid)"
}

cmd_stop_node() {
        load_cluster "${1:-}"
        check_index "${2:-}"
        need_root
        local pid
        pid=$(live_pid "$dir/nodes/$2/pid") || die "node $2 is not running"
        kill -CONT "$pid" 2>/dev/null || true
        kill -TERM "$pid"
        wait_gone "$dir/nodes/$2/pid" 120 || die "node $2 (pid $pid) still runs 120 s after SIGTERM; see $dir/nodes/$2/daemon.log"
        grep "drain:" "$dir/nodes/$2/daemon.log" | tail -n 1 || true
        echo "cluster: node $2 stopped (pid $pid)"
}

cmd_start_node() {
        load_cluster "${1:-}"
        check_index "${2:-}"
        need_root
        start_node "$2"
        wait_node_ready "$2" || die "node $2 did not come up"
        echo "cluster: node $2 runs (pid $(live_pid "$dir/nodes/$2/pid"))"
}

cmd_status() {
        load_cluster "${1:-}"
        local i pid code
        echo "front door http://$front_host: $(live_pid "$dir/frontdoor/pid" >/dev/null && echo "pid $(live_pid "$dir/frontdoor/pid")" || echo "not running")"
        for ((i = 0; i < nodes; i++)); do
                if pid=$(live_pid "$dir/nodes/$i/pid"); then
                        code=$(http_code "http://$(node_addr "$i"):$port_in_ns$(ready_path)" 2)
                        echo "node $i (n$i, $(node_addr "$i"):$port_in_ns): pid $pid, $(ready_path) ${code:-no answer}"
                else
                        echo "node $i (n$i, $(node_addr "$i"):$port_in_ns): not running"
                fi
        done
}

case ${1:-} in
up) shift; cmd_up "$@" ;;
down) shift; cmd_down "$@" ;;
status) shift; cmd_status "$@" ;;
kill-node) shift; cmd_kill_node "$@" ;;
stop-node) shift; cmd_stop_node "$@" ;;
start-node) shift; cmd_start_node "$@" ;;
-h | --help | help) usage ;;
"") usage >&2; exit 2 ;;
*) die "unknown command '$1' (up, down, status, kill-node, stop-node, start-node; see --help)" ;;
esac
