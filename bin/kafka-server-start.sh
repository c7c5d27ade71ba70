#!/usr/bin/env bash
# Odradek: start a broker.  kafka-server-start.sh [-daemon] server.properties [--override k=v]...
# -daemon runs it in the background with output in $LOG_DIR (default <install>/logs) and
# records its pid in <install>/run/odradek-<n>.pid, which kafka-server-stop.sh uses.
bin_dir="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
base_dir="$(cd "$bin_dir/.." && pwd -P)"
if [[ $# -lt 1 ]]; then
    echo "USAGE: $0 [-daemon] server.properties [--override property=value]*" >&2
    exit 1
fi
if [[ -d "$base_dir/broker" ]]; then
    export PYTHONPATH="$base_dir${PYTHONPATH:+:$PYTHONPATH}"
fi
python="${ODRADEK_PYTHON:-python3}"
daemon=0
args=()
while [[ $# -gt 0 ]]; do
    case "$1" in
        -daemon) daemon=1 ;;
        -name) shift ;;              # accepted for compatibility (Kafka's process name)
        -loggc) ;;                   # accepted for compatibility (JVM GC logging)
        *) args+=("$1") ;;
    esac
    shift
done
run_dir="${ODRADEK_RUN_DIR:-$base_dir/run}"
mkdir -p "$run_dir"
source "$bin_dir/lib/pidfiles.sh"
pid_file="$(free_pid_file "$run_dir" odradek)"
if [[ $daemon -eq 1 ]]; then
    log_dir="${LOG_DIR:-$base_dir/logs}"
    mkdir -p "$log_dir"
    nohup "$python" -m broker "${args[@]}" >>"$log_dir/server.out" 2>&1 </dev/null &
    echo "$!" >"$pid_file"
    exit 0
fi
# Foreground: record our own pid (exec keeps it) so kafka-server-stop.sh finds this broker too.
echo "$$" >"$pid_file"
exec "$python" -m broker "${args[@]}"
