#!/usr/bin/env bash
# Odradek: kafka-run-class.sh [-daemon] [-name servicename] [-loggc] classname [opts]
# Runs the tool that stands for one of Apache Kafka's main classes (the names Kafka 3.9 and 4.x
# use, old and new packages), with the same arguments.  -daemon runs it in the background with
# output in $LOG_DIR/<name>.out (default <install>/logs).  See docs/tools.md.
bin_dir="$(dirname "$(readlink -f "${BASH_SOURCE[0]}")")"
base_dir="$(cd "$bin_dir/.." && pwd -P)"
if [[ $# -lt 1 ]]; then
    echo "USAGE: $0 [-daemon] [-name servicename] [-loggc] classname [opts]" >&2
    exit 1
fi
daemon=0
name=""
while [[ $# -gt 0 ]]; do
    case "$1" in
        -daemon) daemon=1; shift ;;
        -name) name="$2"; shift 2 ;;
        -loggc) shift ;;                 # JVM GC logging: nothing to do
        *) break ;;
    esac
done
class="$1"
shift
case "$class" in
    kafka.Kafka|org.apache.zookeeper.server.quorum.QuorumPeerMain)
        # these two launchers keep pid files for their stop scripts: they take -daemon themselves
        start="$bin_dir/kafka-server-start.sh"
        [[ "$class" == kafka.Kafka ]] || start="$bin_dir/zookeeper-server-start.sh"
        if [[ $daemon -eq 1 ]]; then exec "$start" -daemon "$@"; fi
        exec "$start" "$@" ;;
    org.apache.zookeeper.ZooKeeperMain|org.apache.zookeeper.ZooKeeperMainWithTlsSupportForKafka) tool=zookeeper-shell ;;
    kafka.admin.ZkSecurityMigrator) tool=zookeeper-security-migration ;;
    kafka.admin.TopicCommand|org.apache.kafka.tools.TopicCommand) tool=kafka-topics ;;
    kafka.admin.ConfigCommand|org.apache.kafka.tools.ConfigCommand) tool=kafka-configs ;;
    kafka.admin.AclCommand|org.apache.kafka.tools.AclCommand) tool=kafka-acls ;;
    kafka.admin.ConsumerGroupCommand|org.apache.kafka.tools.consumer.group.ConsumerGroupCommand) tool=kafka-consumer-groups ;;
    org.apache.kafka.tools.consumer.group.ShareGroupCommand) tool=kafka-share-groups ;;
    org.apache.kafka.tools.GroupsCommand) tool=kafka-groups ;;
    kafka.admin.ReassignPartitionsCommand|org.apache.kafka.tools.reassign.ReassignPartitionsCommand) tool=kafka-reassign-partitions ;;
    kafka.admin.LeaderElectionCommand|org.apache.kafka.tools.LeaderElectionCommand) tool=kafka-leader-election ;;
    kafka.admin.LogDirsCommand|org.apache.kafka.tools.LogDirsCommand) tool=kafka-log-dirs ;;
    kafka.admin.DeleteRecordsCommand|org.apache.kafka.tools.DeleteRecordsCommand) tool=kafka-delete-records ;;
    kafka.admin.BrokerApiVersionsCommand|org.apache.kafka.tools.BrokerApiVersionsCommand) tool=kafka-broker-api-versions ;;
    kafka.admin.DelegationTokenCommand|org.apache.kafka.tools.DelegationTokenCommand) tool=kafka-delegation-tokens ;;
    kafka.admin.FeatureCommand|org.apache.kafka.tools.FeatureCommand) tool=kafka-features ;;
    kafka.tools.DumpLogSegments) tool=kafka-dump-log ;;
    kafka.tools.GetOffsetShell|org.apache.kafka.tools.GetOffsetShell) tool=kafka-get-offsets ;;
    kafka.tools.ConsoleConsumer|org.apache.kafka.tools.consumer.ConsoleConsumer) tool=kafka-console-consumer ;;
    org.apache.kafka.tools.consumer.ConsoleShareConsumer) tool=kafka-console-share-consumer ;;
    kafka.tools.ConsoleProducer|org.apache.kafka.tools.ConsoleProducer) tool=kafka-console-producer ;;
    org.apache.kafka.tools.ProducerPerformance) tool=kafka-producer-perf-test ;;
    kafka.tools.ConsumerPerformance|org.apache.kafka.tools.ConsumerPerformance) tool=kafka-consumer-perf-test ;;
    org.apache.kafka.tools.ShareConsumerPerformance) tool=kafka-share-consumer-perf-test ;;
    kafka.tools.EndToEndLatency|org.apache.kafka.tools.EndToEndLatency) tool=kafka-e2e-latency ;;
    org.apache.kafka.tools.VerifiableProducer) tool=kafka-verifiable-producer ;;
    org.apache.kafka.tools.VerifiableConsumer) tool=kafka-verifiable-consumer ;;
    org.apache.kafka.tools.VerifiableShareConsumer) tool=kafka-verifiable-share-consumer ;;
    kafka.tools.ReplicaVerificationTool|org.apache.kafka.tools.ReplicaVerificationTool) tool=kafka-replica-verification ;;
    kafka.tools.StreamsResetter|org.apache.kafka.tools.StreamsResetter) tool=kafka-streams-application-reset ;;
    kafka.tools.MirrorMaker) tool=kafka-mirror-maker ;;
    kafka.tools.StorageTool) tool=kafka-storage ;;
    kafka.admin.ClusterTool|org.apache.kafka.tools.ClusterTool) tool=kafka-cluster ;;
    kafka.admin.MetadataQuorumCommand|org.apache.kafka.tools.MetadataQuorumCommand) tool=kafka-metadata-quorum ;;
    org.apache.kafka.tools.ClientMetricsCommand) tool=kafka-client-metrics ;;
    org.apache.kafka.tools.TransactionsCommand) tool=kafka-transactions ;;
    *)
        echo "Error: Could not find or load main class $class" >&2
        echo "Caused by: java.lang.ClassNotFoundException: $class" >&2
        exit 1 ;;
esac
if [[ $daemon -eq 1 ]]; then
    log_dir="${LOG_DIR:-$base_dir/logs}"
    mkdir -p "$log_dir"
    nohup "$bin_dir/$tool.sh" "$@" >>"$log_dir/${name:-$tool}.out" 2>&1 </dev/null &
    exit 0
fi
exec "$bin_dir/$tool.sh" "$@"
