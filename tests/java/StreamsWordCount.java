// A Kafka Streams application (kafka-streams is not shipped here) that
// tests/integration/test_kafka_streams.py runs as a process against a broker: it counts the words
// of the lines in topic IN and writes every new count to topic OUT, exactly once
// (processing.guarantee=exactly_once_v2, no record cache, so each update is one output record).
//   java -cp kafka-streams.jar:kafka-clients.jar:...:. StreamsWordCount BOOTSTRAP APP_ID STATE_DIR IN OUT RF [DELAY_MS [PROTOCOL]]
// DELAY_MS (0): a pause per word, so that a test can kill the instance mid-transaction.
// PROTOCOL (classic): the group protocol, classic or streams (KIP-1071, kafka-streams 4.1+; the
// broker assigns the tasks and creates the internal topics, its streams.num.standby.replicas
// decides the standbys).
// The words go through a repartition topic (APP_ID-words-repartition) into an in-memory store
// whose changelog is APP_ID-counts-changelog, compacted as soon as a segment rolls (segment.ms
// 500, min.cleanable.dirty.ratio 0.01), so that a restore reads a cleaned transactional log;
// each instance also keeps a standby copy of another's store (num.standby.replicas=1).  It prints "STATE <state>" at each state change and
// "FAILED <exception>" if a stream thread dies; it runs until its standard input closes, then
// closes and prints "CLOSED true" (or "CLOSED false" if its threads did not stop within 60 s).

import java.io.InputStream;
import java.time.Duration;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Map;
import java.util.Properties;

import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Grouped;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;
import org.apache.kafka.streams.state.BuiltInDslStoreSuppliers;
import org.apache.kafka.streams.state.Stores;

public class StreamsWordCount {
    public static void main(String[] args) throws Exception {
        if (args[0].equals("--describe")) {
            describe(args[1], args[2]);
            return;
        }
        String bootstrap = args[0], appId = args[1], stateDir = args[2], in = args[3], out = args[4];
        int rf = Integer.parseInt(args[5]);
        long delay = args.length > 6 ? Long.parseLong(args[6]) : 0;
        String protocol = args.length > 7 ? args[7] : "classic";

        Map<String, String> changelog = new HashMap<>();
        changelog.put("segment.ms", "500");
        changelog.put("min.cleanable.dirty.ratio", "0.01");

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(in, Consumed.with(Serdes.String(), Serdes.String()))
               .flatMapValues(line -> Arrays.asList(line.split(" ")))
               .peek((key, word) -> pause(delay))
               .groupBy((key, word) -> word, Grouped.with("words", Serdes.String(), Serdes.String()))
               .count(Materialized.<String, Long>as(Stores.inMemoryKeyValueStore("counts"))
                                  .withKeySerde(Serdes.String()).withValueSerde(Serdes.Long())
                                  .withLoggingEnabled(changelog))
               .toStream()
               .to(out, Produced.with(Serdes.String(), Serdes.Long()));

        Properties p = new Properties();
        p.put(StreamsConfig.APPLICATION_ID_CONFIG, appId);
        p.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(StreamsConfig.STATE_DIR_CONFIG, stateDir);
        p.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        p.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, rf);
        p.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 2);
        p.put(StreamsConfig.NUM_STANDBY_REPLICAS_CONFIG, 1);
        p.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        p.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0);
        p.put(StreamsConfig.REPARTITION_PURGE_INTERVAL_MS_CONFIG, 500);
        if (!protocol.equals("classic")) {
            p.put("group.protocol", protocol);     // StreamsConfig.GROUP_PROTOCOL_CONFIG, 4.1+
        }
        // any store the DSL makes on its own is in memory too: the RocksDB classes are on the
        // class path for compiling, its native library need not be
        p.put(StreamsConfig.DSL_STORE_SUPPLIERS_CLASS_CONFIG,
              BuiltInDslStoreSuppliers.InMemoryDslStoreSuppliers.class);
        // a member killed by the test leaves the group within seconds, and its open
        // transaction is aborted by the coordinator 10 s after it began
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 6000);
        p.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1000);
        p.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10000);

        KafkaStreams streams = new KafkaStreams(builder.build(), p);
        streams.setStateListener((now, before) -> say("STATE " + now));
        streams.setUncaughtExceptionHandler(e -> {
            say("FAILED " + e + (e.getCause() != null ? " / cause: " + e.getCause() : ""));
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.SHUTDOWN_CLIENT;
        });
        streams.start();

        InputStream stdin = System.in;
        while (stdin.read() >= 0) { /* until the test closes our standard input */ }
        boolean clean = streams.close(Duration.ofSeconds(60));
        say("CLOSED " + clean);
    }

    // StreamsWordCount --describe BOOTSTRAP APP_ID: the streams group as Java's admin client sees
    // it (KIP-1071, clients 4.1+): "LISTED <type> <state>" from listGroups, "GROUP <state>
    // <group epoch> <target epoch> <topology epoch> <members> <subtopologies>", one "MEMBER <epoch>
    // <process id> <active tasks> <standby tasks>" per member, with tasks as subtopology:partition
    // lists, and "OFFSETS <committed partitions>" from listStreamsGroupOffsets.
    static void describe(String bootstrap, String appId) throws Exception {
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        try (org.apache.kafka.clients.admin.Admin admin = org.apache.kafka.clients.admin.Admin.create(p)) {
            for (org.apache.kafka.clients.admin.GroupListing g : admin.listGroups(
                    org.apache.kafka.clients.admin.ListGroupsOptions.forStreamsGroups()).all().get()) {
                if (g.groupId().equals(appId)) {
                    say("LISTED " + g.type().map(Object::toString).orElse("-") + " "
                        + g.groupState().map(Object::toString).orElse("-"));
                }
            }
            org.apache.kafka.clients.admin.StreamsGroupDescription d =
                admin.describeStreamsGroups(java.util.List.of(appId)).describedGroups().get(appId).get();
            say("GROUP " + d.groupState() + " " + d.groupEpoch() + " " + d.targetAssignmentEpoch() + " "
                + d.topologyEpoch() + " " + d.members().size() + " " + d.subtopologies().size());
            for (org.apache.kafka.clients.admin.StreamsGroupMemberDescription m : d.members()) {
                say("MEMBER " + m.memberEpoch() + " " + m.processId() + " " + tasks(m.assignment().activeTasks())
                    + " " + tasks(m.assignment().standbyTasks()));
            }
            Map<org.apache.kafka.common.TopicPartition, org.apache.kafka.clients.consumer.OffsetAndMetadata> offsets =
                admin.listStreamsGroupOffsets(Map.of(appId, new org.apache.kafka.clients.admin.ListStreamsGroupOffsetsSpec()))
                     .partitionsToOffsetAndMetadata(appId).get();
            say("OFFSETS " + offsets.size());
        }
    }

    static String tasks(java.util.List<org.apache.kafka.clients.admin.StreamsGroupMemberAssignment.TaskIds> ids) {
        StringBuilder b = new StringBuilder();
        for (org.apache.kafka.clients.admin.StreamsGroupMemberAssignment.TaskIds t : ids) {
            for (int part : t.partitions()) {
                b.append(b.length() > 0 ? "," : "").append(t.subtopologyId()).append(":").append(part);
            }
        }
        return b.length() > 0 ? b.toString() : "-";
    }

    static void pause(long ms) {
        if (ms <= 0) return;
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
