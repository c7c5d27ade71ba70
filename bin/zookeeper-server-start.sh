#!/usr/bin/env bash
# Odradek: start Debian's ZooKeeper 3.8 with a Kafka-style properties file.
#   zookeeper-server-start.sh [-daemon] config/zookeeper.properties
# (Kafka ships a ZooKeeper of its own; here the system package is used:
#  apt-get install zookeeper.)  The log goes to $LOG_DIR/zookeeper.out with -daemon.
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
if [[ $daemon -eq 1 ]]; then
    log_dir="${LOG_DIR:-$base_dir/logs}"
    mkdir -p "$log_dir"
    nohup "${cmd[@]}" >"$log_dir/zookeeper.out" 2>&1 < /dev/null &
    echo $! > "$log_dir/zookeeper.pid"
else
    exec "${cmd[@]}"
fi
