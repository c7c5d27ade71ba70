#!/usr/bin/env bash
# Odradek: stop the brokers started from this install (by the pid files kafka-server-start.sh
# wrote under <install>/run), never by matching process names.  SIGTERM asks for a clean
# shutdown; --wait SECONDS (default 30) waits for them to exit.
bin_dir="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
base_dir="$(cd "$bin_dir/.." && pwd -P)"
run_dir="${ODRADEK_RUN_DIR:-$base_dir/run}"
wait_s=30
signal=TERM
while [[ $# -gt 0 ]]; do
    case "$1" in
        --wait) wait_s="$2"; shift ;;
        --process-role|--node-id) shift ;;   # accepted for compatibility
        -9|--kill) signal=KILL ;;
    esac
    shift
done
shopt -s nullglob
files=("$run_dir"/odradek-*.pid)
pids=()
for f in "${files[@]}"; do
    pid="$(cat "$f" 2>/dev/null)"
    if [[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null \
        && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "-m broker"; then
        kill -s "$signal" "$pid" && pids+=("$pid:$f")
    else
        rm -f "$f"                       # stale
    fi
done
if [[ ${#pids[@]} -eq 0 ]]; then
    echo "No kafka server to stop"
    exit 1
fi
deadline=$((SECONDS + wait_s))
for entry in "${pids[@]}"; do
    pid="${entry%%:*}"; f="${entry#*:}"
    while kill -0 "$pid" 2>/dev/null && [[ $SECONDS -lt $deadline ]]; do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
        echo "Broker (pid $pid) did not stop within ${wait_s}s" >&2
        exit 1
    fi
    rm -f "$f"
done
exit 0
