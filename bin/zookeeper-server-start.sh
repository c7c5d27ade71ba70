#!/usr/bin/env bash
# Odradek: start Debian's ZooKeeper 3.8 with a Kafka-style properties file.
#   zookeeper-server-start.sh [-daemon] config/zookeeper.properties
# (Kafka ships a ZooKeeper of its own; here the system package is used:
#  apt-get install zookeeper.)  The log goes to $LOG_DIR/zookeeper.out with -daemon.
# bin/zookeeper-server-stop.sh stops it.
bin_dir="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
base_dir="$(cd "$bin_dir/.." && pwd -P)"
daemon=0
if [[ "$1" == "-daemon" ]]; then daemon=1; shift; fi
if [[ $# -lt 1 ]]; then
    echo "USAGE: $0 [-daemon] zookeeper.properties" >&2
    exit 1
fi
conf_dir="${ZOOCFGDIR:-/etc/zookeeper/conf}"
jar="${ZOOKEEPER_JAR:-/usr/share/java/zookeeper.jar}"
cp="$conf_dir:$jar"
[[ -f /usr/share/java/slf4j-simple.jar ]] && cp="$cp:/usr/share/java/slf4j-simple.jar"
cmd=(java -Xmx512m -Djava.net.preferIPv4Stack=true -cp "$cp"
     org.apache.zookeeper.server.quorum.QuorumPeerMain "$(readlink -f "$1")")
# The pid goes to <install>/run/zookeeper-N.pid (ODRADEK_RUN_DIR), where zookeeper-server-stop.sh
# looks for it, as kafka-server-start.sh records its brokers.
run_dir="${ODRADEK_RUN_DIR:-$base_dir/run}"
mkdir -p "$run_dir"
source "$bin_dir/lib/pidfiles.sh"
pid_file="$(free_pid_file "$run_dir" zookeeper)"
if [[ $daemon -eq 1 ]]; then
    log_dir="${LOG_DIR:-$base_dir/logs}"
    mkdir -p "$log_dir"
    nohup "${cmd[@]}" >"$log_dir/zookeeper.out" 2>&1 < /dev/null &
    echo $! > "$pid_file"
else
    echo "$$" > "$pid_file"
    exec "${cmd[@]}"
fi
