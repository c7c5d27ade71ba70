#!/usr/bin/env bash
# Odradek: stop the brokers started from this install (by the pid files kafka-server-start.sh
# wrote under <install>/run), never by matching process names.  SIGTERM asks for a clean
# shutdown; --wait SECONDS (default 30) waits for them to exit.
bin_dir="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
base_dir="$(cd "$bin_dir/.." && pwd -P)"
run_dir="${ODRADEK_RUN_DIR:-$base_dir/run}"
source "$bin_dir/lib/pidfiles.sh"
stop_servers "$run_dir" odradek "-m broker" "kafka server" "$@"
