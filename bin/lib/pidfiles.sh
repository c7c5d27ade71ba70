# Sourced by bin/kafka-server-start.sh / -stop.sh and bin/zookeeper-server-start.sh / -stop.sh:
# the servers started from this install are recorded as <run dir>/<prefix>-N.pid and stopped by
# those files, never by matching process names.

# free_pid_file DIR PREFIX: the first DIR/PREFIX-N.pid not held by a live process.
free_pid_file() {
    local n=0
    while [[ -e "$1/$2-$n.pid" ]] && kill -0 "$(cat "$1/$2-$n.pid")" 2>/dev/null; do
        n=$((n + 1))
    done
    echo "$1/$2-$n.pid"
}

# stop_servers DIR PREFIX MATCH WHAT [ARGS...]: the stop scripts' command line (--wait SECONDS,
# default 30; -9 / --kill for SIGKILL instead of SIGTERM; --process-role X and --node-id N
# accepted and ignored, as Kafka's KRaft-era kafka-server-stop.sh takes them), then stop_pid_files.
stop_servers() {
    local dir="$1" prefix="$2" match="$3" what="$4"
    shift 4
    local wait_s=30 signal=TERM
    while [[ $# -gt 0 ]]; do
        case "$1" in
            --wait) wait_s="$2"; shift ;;
            --process-role|--node-id) shift ;;
            -9|--kill) signal=KILL ;;
        esac
        shift
    done
    stop_pid_files "$dir" "$prefix" "$match" "$signal" "$wait_s" "$what"
}

# stop_pid_files DIR PREFIX MATCH SIGNAL WAIT_S WHAT: send SIGNAL to every process recorded in
# DIR/PREFIX-*.pid whose command line contains MATCH (other pid files are stale and removed),
# wait up to WAIT_S seconds for them to exit and remove their files.  Status 1 with
# "No WHAT to stop" when there is none, or when one outlives the wait.
stop_pid_files() {
    local dir="$1" prefix="$2" match="$3" signal="$4" wait_s="$5" what="$6"
    local f pid entry deadline
    local pids=()
    shopt -s nullglob
    for f in "$dir/$prefix"-*.pid; do
        pid="$(cat "$f" 2>/dev/null)"
        if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null \
            && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "$match"; then
            kill -s "$signal" "$pid" && pids+=("$pid:$f")
        else
            rm -f "$f"                       # stale
        fi
    done
    if [[ ${#pids[@]} -eq 0 ]]; then
        echo "No $what to stop"
        return 1
    fi
    deadline=$((SECONDS + wait_s))
    for entry in "${pids[@]}"; do
        pid="${entry%%:*}"; f="${entry#*:}"
        while kill -0 "$pid" 2>/dev/null && [[ $SECONDS -lt $deadline ]]; do sleep 0.2; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "$what (pid $pid) did not stop within ${wait_s}s" >&2
            return 1
        fi
        rm -f "$f"
    done
    return 0
}
