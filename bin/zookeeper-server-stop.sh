#!/usr/bin/env bash
# Odradek: stop the ZooKeeper servers started from this install by zookeeper-server-start.sh (by
# the pid files it wrote under <install>/run), never by matching process names: SIGTERM (-9 /
# --kill: SIGKILL), then wait up to --wait SECONDS (default 30) for them to exit.  Prints "No
# zookeeper server to stop" and exits 1 when there is none, as Kafka's script does.
bin_dir="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
base_dir="$(cd "$bin_dir/.." && pwd -P)"
run_dir="${ODRADEK_RUN_DIR:-$base_dir/run}"
source "$bin_dir/lib/pidfiles.sh"
stop_servers "$run_dir" zookeeper "org.apache.zookeeper.server.quorum.QuorumPeerMain" "zookeeper server" "$@"
