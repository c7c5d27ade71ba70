// Drives Apache Kafka's Java share consumer (KafkaShareConsumer, KIP-932; kafka-clients 4.1 or
// later, not shipped here) and its admin calls for share groups against a running broker, and
// prints one JSON line per check: {"check": name, "ok": true|false, "detail": "..."}.
// Run by tests/integration/test_java_share_consumer.py:
//   java -cp kafka-clients-4.x.jar:slf4j-api.jar:lz4-java.jar:snappy-java.jar:zstd-jni.jar:. \
//        ShareConsumerCheck HOST:PORT [CHECK...]
// The broker must allow a record lock of 2 s (group.share.min.record.lock.duration.ms <= 2000).
// Each check is independent: one failing prints its exception and the next one runs
// (JavaClientCheck.runChecks, which javac finds beside this file).

import java.time.Duration;
import java.util.*;
import java.util.concurrent.*;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.serialization.*;

public class ShareConsumerCheck {
    static String bootstrap;
    static final String RUN = Long.toHexString(System.nanoTime());

    public static void main(String[] args) {
        bootstrap = args[0];
        Set<String> only = new HashSet<>(Arrays.asList(args).subList(1, args.length));
        LinkedHashMap<String, JavaClientCheck.Check> checks = new LinkedHashMap<>();
        checks.put("share_two_members", ShareConsumerCheck::twoMembers);
        checks.put("share_explicit_acks", ShareConsumerCheck::explicitAcks);
        checks.put("share_lock_timeout", ShareConsumerCheck::lockTimeout);
        checks.put("share_latest_at_first_fetch", ShareConsumerCheck::latestAtFirstFetch);
        checks.put("share_admin", ShareConsumerCheck::shareAdmin);
        JavaClientCheck.runChecks(checks, only);
    }

    static void require(boolean cond, String what) {
        if (!cond) throw new AssertionError(what);
    }

    static Throwable root(Throwable t) {
        while ((t instanceof ExecutionException || t instanceof CompletionException) && t.getCause() != null)
            t = t.getCause();
        return t;
    }

    static Admin admin() {
        Properties p = new Properties();
        p.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return Admin.create(p);
    }

    static KafkaShareConsumer<String, String> consumer(String group, Map<String, Object> extra) {
        Map<String, Object> p = new HashMap<>();
        p.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ConsumerConfig.GROUP_ID_CONFIG, group);
        p.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        p.putAll(extra);
        return new KafkaShareConsumer<>(p);
    }

    static void topic(Admin a, String name, int partitions) throws Exception {
        a.createTopics(List.of(new NewTopic(name, partitions, (short) 1))).all().get(30, TimeUnit.SECONDS);
    }

    static void groupConfig(Admin a, String group, String key, String value) throws Exception {
        ConfigResource r = new ConfigResource(ConfigResource.Type.GROUP, group);
        a.incrementalAlterConfigs(Map.of(r, List.of(new AlterConfigOp(new ConfigEntry(key, value),
            AlterConfigOp.OpType.SET)))).all().get(30, TimeUnit.SECONDS);
    }

    /** Writes values prefix0..prefix(n-1), to ``partition`` (null: the default partitioner). */
    static void produce(String topic, Integer partition, String prefix, int n) throws Exception {
        Properties p = new Properties();
        p.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        p.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        p.put(ProducerConfig.LINGER_MS_CONFIG, 5);
        try (KafkaProducer<String, String> pr = new KafkaProducer<>(p)) {
            List<Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++)
                fs.add(pr.send(new ProducerRecord<>(topic, partition, "k" + i, prefix + i)));
            for (Future<RecordMetadata> f : fs) f.get(30, TimeUnit.SECONDS);
        }
    }

    /** A topic of ``partitions`` partitions holding values v0..v(n-1) (to ``partition``; null: the
     * default partitioner), read by share group ``group`` from its earliest offset. */
    static void earliestTopic(Admin a, String topic, String group, int partitions, Integer partition, int n)
            throws Exception {
        topic(a, topic, partitions);
        groupConfig(a, group, "share.auto.offset.reset", "earliest");
        produce(topic, partition, "v", n);
    }

    static Map<TopicPartition, SharePartitionOffsetInfo> startOffsets(Admin a, String group) throws Exception {
        return a.listShareGroupOffsets(Map.of(group, new ListShareGroupOffsetsSpec()))
            .partitionsToOffsetInfo(group).get(30, TimeUnit.SECONDS);
    }

    /** Polls until ``want`` records came (or 30 s); each is acknowledged with ``type`` if given. */
    static List<ConsumerRecord<String, String>> read(KafkaShareConsumer<String, String> c, int want,
                                                     AcknowledgeType type) {
        List<ConsumerRecord<String, String>> got = new ArrayList<>();
        long end = System.currentTimeMillis() + 30_000;
        while (got.size() < want && System.currentTimeMillis() < end) {
            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                got.add(r);
                if (type != null) c.acknowledge(r, type);
            }
        }
        return got;
    }

    // ---------------------------------------------------------------------------------------
    /** Two members of one group read 600 records of three partitions between them, each once. */
    static String twoMembers() throws Exception {
        String t = "jsq-two-" + RUN, g = "jsg-two-" + RUN;
        try (Admin a = admin()) {
            earliestTopic(a, t, g, 3, null, 600);
            Set<String> seen = ConcurrentHashMap.newKeySet();
            List<String> dups = Collections.synchronizedList(new ArrayList<>());
            CountDownLatch done = new CountDownLatch(1);
            ExecutorService pool = Executors.newFixedThreadPool(2);
            List<Future<Integer>> counts = new ArrayList<>();
            for (int i = 0; i < 2; i++) {
                counts.add(pool.submit(() -> {
                    int n = 0;
                    try (KafkaShareConsumer<String, String> c = consumer(g, Map.of())) {
                        c.subscribe(List.of(t));
                        long end = System.currentTimeMillis() + 60_000;
                        while (System.currentTimeMillis() < end && done.getCount() > 0) {
                            for (ConsumerRecord<String, String> r : c.poll(Duration.ofMillis(200))) {
                                n++;
                                if (!seen.add(r.value())) dups.add(r.value());
                                require(r.deliveryCount().orElse((short) 0) == 1, "delivery count " + r.deliveryCount());
                            }
                        }
                        c.commitSync();
                    }
                    return n;
                }));
            }
            long end = System.currentTimeMillis() + 60_000;
            ShareGroupDescription d = null;
            while (System.currentTimeMillis() < end && seen.size() < 600)
                Thread.sleep(100);
            d = a.describeShareGroups(List.of(g)).all().get(30, TimeUnit.SECONDS).get(g);
            done.countDown();
            int n0 = counts.get(0).get(90, TimeUnit.SECONDS), n1 = counts.get(1).get(90, TimeUnit.SECONDS);
            pool.shutdown();
            require(seen.size() == 600 && dups.isEmpty(), "read " + seen.size() + " distinct, duplicates " + dups);
            require(d.groupState() == GroupState.STABLE && d.members().size() == 2,
                    "described " + d.groupState() + " with " + d.members().size() + " members");
            Map<TopicPartition, SharePartitionOffsetInfo> so = startOffsets(a, g);
            long lag = 0, start = 0;
            for (SharePartitionOffsetInfo i : so.values()) {
                start += i.startOffset();
                lag += i.lag().orElse(-1L);
            }
            require(so.size() == 3 && start == 600 && lag == 0, "offsets " + so);
            return "members read " + n0 + " and " + n1 + "; start offsets sum to " + start + ", lag " + lag;
        }
    }

    /** ACCEPT, RELEASE and REJECT in explicit mode: only the released records come back, with
     * delivery count 2, and the start offset ends past all ten. */
    static String explicitAcks() throws Exception {
        String t = "jsq-ack-" + RUN, g = "jsg-ack-" + RUN;
        try (Admin a = admin()) {
            earliestTopic(a, t, g, 1, 0, 10);
            try (KafkaShareConsumer<String, String> c = consumer(g, Map.of("share.acknowledgement.mode", "explicit"))) {
                c.subscribe(List.of(t));
                List<ConsumerRecord<String, String>> first = read(c, 10, null);
                require(first.size() == 10, "first delivery: " + first.size() + " records");
                for (ConsumerRecord<String, String> r : first) {
                    AcknowledgeType type = r.offset() < 4 ? AcknowledgeType.ACCEPT
                        : r.offset() < 7 ? AcknowledgeType.RELEASE : AcknowledgeType.REJECT;
                    c.acknowledge(r, type);
                }
                Map<TopicIdPartition, Optional<KafkaException>> res = c.commitSync();
                for (Optional<KafkaException> e : res.values())
                    require(e.isEmpty(), "commitSync: " + res);
                List<ConsumerRecord<String, String>> again = read(c, 3, AcknowledgeType.ACCEPT);
                List<String> back = new ArrayList<>();
                for (ConsumerRecord<String, String> r : again) {
                    back.add(r.offset() + "/" + r.deliveryCount().orElse((short) -1));
                }
                require(back.equals(List.of("4/2", "5/2", "6/2")), "redelivered " + back);
                c.commitSync();
                SharePartitionOffsetInfo i = startOffsets(a, g).get(new TopicPartition(t, 0));
                require(i != null && i.startOffset() == 10 && i.lag().orElse(-1L) == 0, "offsets " + i);
                return "redelivered " + back + "; start offset " + i.startOffset();
            }
        }
    }

    /** A record whose acquisition lock (2 s, a group config) runs out goes to another member with
     * delivery count 2; the first member's late acknowledgement is refused. */
    static String lockTimeout() throws Exception {
        String t = "jsq-lock-" + RUN, g = "jsg-lock-" + RUN;
        try (Admin a = admin()) {
            earliestTopic(a, t, g, 1, 0, 5);
            groupConfig(a, g, "share.record.lock.duration.ms", "2000");
            Map<String, Object> explicit = Map.of("share.acknowledgement.mode", "explicit");
            try (KafkaShareConsumer<String, String> slow = consumer(g, explicit);
                 KafkaShareConsumer<String, String> other = consumer(g, explicit)) {
                slow.subscribe(List.of(t));
                List<ConsumerRecord<String, String>> held = read(slow, 5, null);
                require(held.size() == 5, "first member got " + held.size());
                require(slow.acquisitionLockTimeoutMs().orElse(-1) == 2000,
                        "lock timeout " + slow.acquisitionLockTimeoutMs());
                long t0 = System.currentTimeMillis();
                other.subscribe(List.of(t));
                List<ConsumerRecord<String, String>> taken = read(other, 5, AcknowledgeType.ACCEPT);
                long waited = System.currentTimeMillis() - t0;
                require(taken.size() == 5, "second member got " + taken.size());
                for (ConsumerRecord<String, String> r : taken)
                    require(r.deliveryCount().orElse((short) 0) == 2, "delivery count " + r.deliveryCount());
                other.commitSync();
                for (ConsumerRecord<String, String> r : held)
                    slow.acknowledge(r, AcknowledgeType.ACCEPT);
                Map<TopicIdPartition, Optional<KafkaException>> res = slow.commitSync();
                Optional<KafkaException> e = res.values().iterator().next();
                require(e.isPresent() && e.get() instanceof InvalidRecordStateException, "late acknowledgement: " + res);
                return "redelivered after " + waited + " ms; late acknowledgement: " + e.get().getClass().getSimpleName();
            }
        }
    }

    /** share.auto.offset.reset=latest (the default) starts a partition where its log ends when the
     * first ShareFetch for it arrives (the admin client lists it without an offset before that):
     * records written before are not delivered, records written after are. */
    static String latestAtFirstFetch() throws Exception {
        String t = "jsq-latest-" + RUN, g = "jsg-latest-" + RUN;
        TopicPartition tp = new TopicPartition(t, 0);
        try (Admin a = admin()) {
            topic(a, t, 1);
            produce(t, 0, "before", 5);
            try (KafkaShareConsumer<String, String> c = consumer(g, Map.of())) {
                c.subscribe(List.of(t));
                long end = System.currentTimeMillis() + 30_000;
                SharePartitionOffsetInfo i = null;
                while (i == null && System.currentTimeMillis() < end) {
                    require(c.poll(Duration.ofMillis(200)).isEmpty(), "a record written before the first fetch came");
                    i = startOffsets(a, g).get(tp);
                }
                require(i != null && i.startOffset() == 5, "start offset " + i);
                produce(t, 0, "after", 5);
                List<String> values = new ArrayList<>();
                for (ConsumerRecord<String, String> r : read(c, 5, null))
                    values.add(r.value());
                require(values.equals(List.of("after0", "after1", "after2", "after3", "after4")), "read " + values);
                c.commitSync();
                return "started at " + i.startOffset() + ", read " + values.size();
            }
        }
    }

    /** Admin on a share group: listed as a share group, offsets altered while it is empty and
     * read again from there, offsets deleted, the group deleted; DescribeGroups (v6) says a share
     * group is no consumer group. */
    static String shareAdmin() throws Exception {
        String t = "jsq-admin-" + RUN, g = "jsg-admin-" + RUN;
        try (Admin a = admin()) {
            earliestTopic(a, t, g, 1, 0, 4);
            try (KafkaShareConsumer<String, String> c = consumer(g, Map.of())) {
                c.subscribe(List.of(t));
                require(read(c, 4, null).size() == 4, "first read");
                c.commitSync();
                try {
                    a.deleteShareGroups(List.of(g)).all().get(30, TimeUnit.SECONDS);
                    throw new AssertionError("deleted a group with a member");
                } catch (ExecutionException e) {
                    require(root(e) instanceof GroupNotEmptyException, "delete with a member: " + root(e));
                }
            }
            Optional<GroupListing> listed = a.listGroups(ListGroupsOptions.forShareGroups()).all().get(30, TimeUnit.SECONDS)
                .stream().filter(l -> l.groupId().equals(g)).findFirst();
            require(listed.isPresent() && listed.get().type().orElse(null) == GroupType.SHARE, "listed " + listed);
            try {
                a.describeConsumerGroups(List.of(g)).all().get(30, TimeUnit.SECONDS);
                throw new AssertionError("a share group described as a consumer group");
            } catch (ExecutionException e) {
                require(root(e) instanceof GroupIdNotFoundException, "describeConsumerGroups: " + root(e));
            }
            a.alterShareGroupOffsets(g, Map.of(new TopicPartition(t, 0), 1L)).all().get(30, TimeUnit.SECONDS);
            SharePartitionOffsetInfo i = startOffsets(a, g).get(new TopicPartition(t, 0));
            require(i != null && i.startOffset() == 1 && i.lag().orElse(-1L) == 3, "after alter: " + i);
            try (KafkaShareConsumer<String, String> c = consumer(g, Map.of())) {
                c.subscribe(List.of(t));
                List<String> values = new ArrayList<>();
                for (ConsumerRecord<String, String> r : read(c, 3, null))
                    values.add(r.value());
                require(values.equals(List.of("v1", "v2", "v3")), "read again " + values);
                c.commitSync();
            }
            a.deleteShareGroupOffsets(g, Set.of(t)).all().get(30, TimeUnit.SECONDS);
            require(startOffsets(a, g).isEmpty(), "offsets after delete: " + startOffsets(a, g));
            a.deleteShareGroups(List.of(g)).all().get(30, TimeUnit.SECONDS);
            try {
                a.describeShareGroups(List.of(g)).all().get(30, TimeUnit.SECONDS);
                throw new AssertionError("a deleted group described");
            } catch (ExecutionException e) {
                require(root(e) instanceof GroupIdNotFoundException, "describe after delete: " + root(e));
            }
            return "listed, altered to 1 and read 3 again, offsets and group deleted";
        }
    }
}
