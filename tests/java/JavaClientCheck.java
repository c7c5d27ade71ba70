// Drives Apache Kafka's Java client (kafka-clients, not shipped here) against a running broker and
// prints one JSON line per check: {"check": name, "ok": true|false, "detail": "..."}.
// Run by tests/integration/test_java_client.py (docs/clients.md says how to get the jar):
//   java [-Drf=3] [-Dclient.config=FILE] -cp kafka-clients.jar:slf4j-api.jar:lz4-java.jar:snappy-java.jar:zstd-jni.jar:. \
//        JavaClientCheck HOST:PORT[,HOST:PORT...] [CHECK...]
// Each check is independent: one failing prints its exception and the next one runs.

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.*;
import java.util.concurrent.ExecutionException;

import org.apache.kafka.clients.admin.*;
import org.apache.kafka.clients.consumer.*;
import org.apache.kafka.clients.producer.*;
import org.apache.kafka.common.*;
import org.apache.kafka.common.acl.AclOperation;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.errors.*;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.header.internals.RecordHeader;
import org.apache.kafka.common.security.token.delegation.DelegationToken;
import org.apache.kafka.common.serialization.*;
import org.apache.kafka.common.utils.Utils;

public class JavaClientCheck {
    static String bootstrap;
    static final String RUN = Long.toHexString(System.nanoTime());
    /** Replication factor of the topics the checks create: -Drf=3 on a three-broker cluster. */
    static final short RF = Short.parseShort(System.getProperty("rf", "1"));

    interface Check { String run() throws Exception; }

    public static void main(String[] args) {
        bootstrap = args[0];
        Set<String> only = new HashSet<>(Arrays.asList(args).subList(1, args.length));
        LinkedHashMap<String, Check> checks = new LinkedHashMap<>();
        checks.put("admin_topics", JavaClientCheck::adminTopics);
        for (String codec : new String[]{"none", "gzip", "snappy", "lz4", "zstd"})
            for (String acks : new String[]{"0", "1", "all"})
                checks.put("produce_" + codec + "_acks" + acks, () -> produceAndRead(codec, acks));
        checks.put("topic_compression", JavaClientCheck::topicCompression);
        checks.put("record_errors", JavaClientCheck::recordErrors);
        checks.put("idempotent_default", JavaClientCheck::idempotentDefault);
        checks.put("list_offsets", JavaClientCheck::listOffsets);
        checks.put("fetch_limits", JavaClientCheck::fetchLimits);
        checks.put("group_commit_resume", JavaClientCheck::groupCommitResume);
        checks.put("cooperative_two_members", JavaClientCheck::cooperativeTwoMembers);
        checks.put("static_member", JavaClientCheck::staticMember);
        checks.put("consumer_protocol", JavaClientCheck::consumerProtocol);
        checks.put("group_migration", JavaClientCheck::groupMigration);
        checks.put("transactions", JavaClientCheck::transactions);
        checks.put("admin_groups", JavaClientCheck::adminGroups);
        checks.put("admin_configs_and_records", JavaClientCheck::adminConfigsAndRecords);
        checks.put("admin_features", JavaClientCheck::adminFeatures);
        checks.put("admin_client_metrics", JavaClientCheck::adminClientMetrics);
        if (RF >= 3) checks.put("cluster_admin", JavaClientCheck::clusterAdmin);
        // needs a SASL/SCRAM-SHA-512 client config and delegation.token.secret.key on the broker:
        // run only when named
        if (only.contains("delegation_tokens")) checks.put("delegation_tokens", JavaClientCheck::delegationTokens);
        // joins a group that Odradek's kafka-verifiable-consumer.sh holds (-Dtool.topic, -Dtool.group,
        // -Dtool.strategy): run only when named, by tests/integration/test_java_client.py
        if (only.contains("join_tool_group")) checks.put("join_tool_group", JavaClientCheck::joinToolGroup);
        // pushes its metrics (KIP-714) to a broker with a telemetry receiver and a subscription that
        // matches client id java-telemetry: run only when named, by tests/integration/test_java_client.py
        if (only.contains("telemetry_push")) checks.put("telemetry_push", JavaClientCheck::telemetryPush);
        // finalizes transaction.version 2 on the broker: run only when named (a broker of its own)
        if (only.contains("transactions_v2")) checks.put("transactions_v2", JavaClientCheck::transactionsV2);
        runChecks(checks, only);
    }

    /** Runs each of ``checks`` (only those named in ``only``, unless it is empty) and prints one
     *  JSON line per check; a failing check prints its exception and the next one runs.  The
     *  share consumer's driver (ShareConsumerCheck) uses it too. */
    static void runChecks(LinkedHashMap<String, Check> checks, Set<String> only) {
        for (Map.Entry<String, Check> e : checks.entrySet()) {
            if (!only.isEmpty() && !only.contains(e.getKey())) continue;
            String detail;
            boolean ok;
            try {
                detail = e.getValue().run();
                ok = true;
            } catch (Throwable t) {
                ok = false;
                detail = t.toString() + (t.getCause() != null ? " / cause: " + t.getCause() : "");
            }
            System.out.println("{\"check\": \"" + e.getKey() + "\", \"ok\": " + ok + ", \"detail\": \""
                               + detail.replace("\\", "\\\\").replace("\"", "'").replace("\n", " ") + "\"}");
            System.out.flush();
        }
    }

    // ---------------------------------------------------------------------------- helpers
    /** -Dclient.config=FILE: properties (security settings) every client gets. */
    static Properties base() {
        Properties p = new Properties();
        String extra = System.getProperty("client.config");
        if (extra != null) {
            try (java.io.FileReader r = new java.io.FileReader(extra)) {
                p.load(r);
            } catch (java.io.IOException e) {
                throw new IllegalStateException("cannot read " + extra, e);
            }
        }
        p.put("bootstrap.servers", bootstrap);
        return p;
    }

    static Admin admin() { return Admin.create(base()); }

    static void require(boolean cond, String what) {
        if (!cond) throw new IllegalStateException(what);
    }

    static String topic(String prefix) { return prefix + "-" + RUN + "-" + (int) (Math.random() * 1e6); }

    static void create(Admin a, String name, int partitions) throws Exception {
        a.createTopics(List.of(new NewTopic(name, partitions, RF))).all().get();
    }

    static KafkaProducer<byte[], byte[]> producer(Map<String, Object> extra) {
        Properties p = base();
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        p.putAll(extra);
        return new KafkaProducer<>(p);
    }

    static KafkaConsumer<byte[], byte[]> consumer(Map<String, Object> extra) {
        Properties p = base();
        p.put("key.deserializer", ByteArrayDeserializer.class.getName());
        p.put("value.deserializer", ByteArrayDeserializer.class.getName());
        p.put("auto.offset.reset", "earliest");
        p.put("enable.auto.commit", "false");
        p.putAll(extra);
        return new KafkaConsumer<>(p);
    }

    static byte[] b(String s) { return s.getBytes(StandardCharsets.UTF_8); }

    static String s(byte[] v) { return v == null ? null : new String(v, StandardCharsets.UTF_8); }

    /** Every record of the given partitions from offset 0 until ``n`` are read or 30 s pass. */
    static List<ConsumerRecord<byte[], byte[]>> readAll(String t, int partitions, int n, Map<String, Object> extra) {
        List<ConsumerRecord<byte[], byte[]>> out = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(extra)) {
            List<TopicPartition> tps = new ArrayList<>();
            for (int i = 0; i < partitions; i++) tps.add(new TopicPartition(t, i));
            c.assign(tps);
            c.seekToBeginning(tps);
            long deadline = System.currentTimeMillis() + 30000;
            while (out.size() < n && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) out.add(r);
            // anything beyond n would be a duplicate: one more short poll
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(300))) out.add(r);
        }
        return out;
    }

    // ---------------------------------------------------------------------------- checks
    /** The admin's delegation token calls, then a producer and an admin that log in with the token
     *  (SCRAM-SHA-512 with tokenauth): the producer writes, the admin may not create tokens; once
     *  the token is expired the login fails. */
    static String delegationTokens() throws Exception {
        try (Admin a = admin()) {
            DelegationToken tok = a.createDelegationToken(new CreateDelegationTokenOptions()
                    .maxlifeTimeMs(3600000)).delegationToken().get();
            String id = tok.tokenInfo().tokenId();
            require(tok.hmac().length == 64, "HmacSHA512 is 64 bytes, got " + tok.hmac().length);
            require(a.describeDelegationToken().delegationTokens().get().stream()
                    .anyMatch(d -> d.tokenInfo().tokenId().equals(id)), "the new token is not described");
            long renewed = a.renewDelegationToken(tok.hmac(), new RenewDelegationTokenOptions()
                    .renewTimePeriodMs(600000)).expiryTimestamp().get();
            require(renewed <= tok.tokenInfo().maxTimestamp(), "renewed past the max timestamp");
            Properties viaToken = base();
            viaToken.put("sasl.mechanism", "SCRAM-SHA-512");
            viaToken.put("sasl.jaas.config", "org.apache.kafka.common.security.scram.ScramLoginModule required "
                         + "username=\"" + id + "\" password=\"" + Base64.getEncoder().encodeToString(tok.hmac())
                         + "\" tokenauth=\"true\";");
            String t = topic("j-token");
            create(a, t, 1);
            Map<String, Object> extra = new HashMap<>();
            for (String k : viaToken.stringPropertyNames()) extra.put(k, viaToken.getProperty(k));
            try (KafkaProducer<byte[], byte[]> p = producer(extra)) {
                p.send(new ProducerRecord<>(t, b("via-token"))).get();
            }
            try (Admin ta = Admin.create(viaToken)) {
                try {
                    ta.createDelegationToken().delegationToken().get();
                    throw new IllegalStateException("a token-authenticated client created a token");
                } catch (ExecutionException e) {
                    require(e.getCause() instanceof UnsupportedByAuthenticationException,
                            "expected UnsupportedByAuthenticationException, got " + e.getCause());
                }
            }
            a.expireDelegationToken(tok.hmac(), new ExpireDelegationTokenOptions().expiryTimePeriodMs(-1))
                    .expiryTimestamp().get();
            require(a.describeDelegationToken().delegationTokens().get().stream()
                    .noneMatch(d -> d.tokenInfo().tokenId().equals(id)), "the expired token is still described");
            extra.put("max.block.ms", "5000");
            try (KafkaProducer<byte[], byte[]> p = producer(extra)) {
                p.send(new ProducerRecord<>(t, b("after-expiry"))).get();
                throw new IllegalStateException("an expired token still logs in");
            } catch (ExecutionException | KafkaException e) {
                Throwable c = e instanceof ExecutionException ? e.getCause() : e;
                require(c instanceof SaslAuthenticationException || c.getCause() instanceof SaslAuthenticationException,
                        "expected SaslAuthenticationException, got " + c);
            }
            List<ConsumerRecord<byte[], byte[]>> got = readAll(t, 1, 1, Map.of());
            require(got.size() == 1 && "via-token".equals(s(got.get(0).value())), "read back " + got.size());
            return "token " + id + " created, described, renewed to " + renewed + ", used, expired";
        }
    }

    static String adminTopics() throws Exception {
        try (Admin a = admin()) {
            String t = topic("j-admin");
            a.createTopics(List.of(new NewTopic(t, 3, RF).configs(Map.of("cleanup.policy", "compact"))),
                           new CreateTopicsOptions().validateOnly(true)).all().get();
            require(!a.listTopics().names().get().contains(t), "validate-only created the topic");
            create(a, t, 3);
            require(a.listTopics().names().get().contains(t), "topic not listed");
            TopicDescription d = a.describeTopics(List.of(t)).allTopicNames().get().get(t);
            require(d.partitions().size() == 3, "partitions " + d.partitions().size());
            require(d.topicId() != null && !d.topicId().equals(Uuid.ZERO_UUID), "no topic id");
            // by id (Metadata v12 with name "" beside the id), with authorized operations: no
            // authorizer, so all a topic supports; an unknown id is UnknownTopicIdException
            TopicDescription byId = a.describeTopics(TopicCollection.ofTopicIds(List.of(d.topicId())),
                    new DescribeTopicsOptions().includeAuthorizedOperations(true)).allTopicIds().get().get(d.topicId());
            require(byId.name().equals(t) && byId.partitions().size() == 3, "by id: " + byId);
            require(byId.authorizedOperations() != null && byId.authorizedOperations().containsAll(Set.of(
                    AclOperation.READ, AclOperation.WRITE, AclOperation.CREATE, AclOperation.DELETE, AclOperation.ALTER,
                    AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS))
                    && byId.authorizedOperations().size() == 8, "authorized operations " + byId.authorizedOperations());
            try {
                a.describeTopics(TopicCollection.ofTopicIds(List.of(Uuid.randomUuid()))).allTopicIds().get();
                throw new IllegalStateException("an unknown topic id was described");
            } catch (ExecutionException e) {
                require(e.getCause() instanceof UnknownTopicIdException, "unknown id: " + e.getCause());
            }
            a.createPartitions(Map.of(t, NewPartitions.increaseTo(5))).all().get();
            int now = a.describeTopics(List.of(t)).allTopicNames().get().get(t).partitions().size();
            require(now == 5, "after CreatePartitions " + now);
            try {
                create(a, t, 1);
                throw new IllegalStateException("second create succeeded");
            } catch (ExecutionException e) {
                require(e.getCause() instanceof TopicExistsException, "expected TopicExists, got " + e.getCause());
            }
            DescribeClusterResult dc = a.describeCluster();
            int nodes = dc.nodes().get().size();
            String cid = dc.clusterId().get();
            a.deleteTopics(List.of(t)).all().get();
            long deadline = System.currentTimeMillis() + 10000;
            while (a.listTopics().names().get().contains(t) && System.currentTimeMillis() < deadline)
                Thread.sleep(100);
            require(!a.listTopics().names().get().contains(t), "topic still listed after delete");
            return "created, described (id " + d.topicId() + "), grown to 5, deleted; cluster " + cid + " with "
                   + nodes + " node(s)";
        }
    }

    /** Topics whose compression.type differs from the producer's codec: the broker stores
     * each batch in the topic's codec, and Java's decompressors read what it wrote. */
    static String topicCompression() throws Exception {
        String[][] pairs = {{"gzip", "none"}, {"snappy", "zstd"}, {"lz4", "gzip"}, {"zstd", "lz4"},
                            {"uncompressed", "snappy"}};
        int n = 3000;
        long base = System.currentTimeMillis() - 60000;
        StringBuilder out = new StringBuilder();
        for (String[] pair : pairs) {
            String t = topic("jc-" + pair[0]);
            try (Admin a = admin()) {
                a.createTopics(List.of(new NewTopic(t, 1, RF).configs(Map.of("compression.type", pair[0]))))
                 .all().get();
            }
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of("compression.type", pair[1], "linger.ms", 5))) {
                for (int i = 0; i < n; i++)
                    p.send(new ProducerRecord<>(t, 0, base + i, b("k" + i), b(("value " + i + " ").repeat(12)),
                                                List.of(new RecordHeader("h", b("v" + i)))));
                p.flush();
            }
            List<ConsumerRecord<byte[], byte[]>> got = readAll(t, 1, n, Map.of());
            require(got.size() == n, pair[0] + ": read " + got.size() + " of " + n);
            for (int i = 0; i < n; i++) {
                ConsumerRecord<byte[], byte[]> r = got.get(i);
                require(r.offset() == i && s(r.key()).equals("k" + i), pair[0] + ": record " + i + " at " + r.offset());
                require(s(r.value()).equals(("value " + i + " ").repeat(12)), pair[0] + ": value of " + i);
                require(r.timestamp() == base + i, pair[0] + ": timestamp of " + i);
                Header h = r.headers().lastHeader("h");
                require(h != null && s(h.value()).equals("v" + i), pair[0] + ": header of " + i);
            }
            out.append(pair[1]).append("->").append(pair[0]).append(" ");
        }
        return out + "read back byte-exact";
    }

    /** KIP-467: a batch refused for some of its records names them in the answer's record
     *  errors.  The Java producer fails those records with the broker's message and the others
     *  of the batch with its generic one; with one record error it raises the partition's error
     *  type.  Nothing of a refused batch is stored, and the idempotent producer goes on. */
    static String recordErrors() throws Exception {
        String compacted = topic("jc-keyless"), bounded = topic("jc-bounded");
        try (Admin a = admin()) {
            a.createTopics(List.of(new NewTopic(compacted, 1, RF).configs(Map.of("cleanup.policy", "compact")),
                                   new NewTopic(bounded, 1, RF).configs(Map.of("message.timestamp.before.max.ms", "3600000"))))
             .all().get();
        }
        long now = System.currentTimeMillis();
        StringBuilder out = new StringBuilder();
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of("linger.ms", 200, "batch.size", 1 << 20))) {
            List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
            byte[][] keys = {b("a"), null, b("c"), null};
            for (byte[] k : keys)                        // one batch: sent together, one partition
                fs.add(p.send(new ProducerRecord<>(compacted, 0, k, b("v"))));
            p.flush();
            for (int i = 0; i < keys.length; i++) {
                Throwable e = failure(fs.get(i));
                require(e != null, "record " + i + " of the keyless batch was stored");
                if (keys[i] == null) {
                    require(e instanceof InvalidRecordException, "keyless record " + i + ": " + e);
                    require(e.getMessage().toLowerCase().contains("key"), "record " + i + "'s message: " + e.getMessage());
                } else {
                    require(!(e instanceof InvalidRecordException) && e.getMessage().contains("invalid records"),
                            "keyed record " + i + " of the batch: " + e);
                }
            }
            out.append("keyless batch: records 1, 3 InvalidRecordException, 0, 2 the batch's error; ");
            RecordMetadata m = p.send(new ProducerRecord<>(compacted, 0, b("a"), b("after"))).get();
            require(m.offset() == 0, "the next record went to offset " + m.offset());
            fs.clear();
            long[] stamps = {now, now - 2 * 3600000L, now};
            for (long ts : stamps)
                fs.add(p.send(new ProducerRecord<>(bounded, 0, ts, b("k"), b("v"))));
            p.flush();
            Throwable e = failure(fs.get(1));
            require(e instanceof InvalidTimestampException, "the old record: " + e);
            for (int i : new int[]{0, 2}) {
                Throwable other = failure(fs.get(i));
                require(other != null && !(other instanceof InvalidTimestampException), "record " + i + ": " + other);
            }
            out.append("one old timestamp: InvalidTimestampException for it alone; ");
            m = p.send(new ProducerRecord<>(bounded, 0, now, b("k"), b("after"))).get();
            require(m.offset() == 0, "the next record went to offset " + m.offset());
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(compacted, 1, 1, Map.of());
        require(got.size() == 1 && s(got.get(0).value()).equals("after"), "compacted topic holds " + got.size());
        return out + "the producer went on at offset 0";
    }

    static Throwable failure(java.util.concurrent.Future<RecordMetadata> f) throws InterruptedException {
        try {
            f.get();
            return null;
        } catch (ExecutionException e) {
            return e.getCause();
        }
    }

    static String produceAndRead(String codec, String acks) throws Exception {
        String t = topic("j-" + codec + "-" + acks);
        int n = 10000, parts = 3;
        try (Admin a = admin()) { create(a, t, parts); }
        Map<String, Integer> partitionOf = new HashMap<>();
        long base = System.currentTimeMillis() - 60000;
        Map<String, Object> conf = new HashMap<>(Map.of("compression.type", codec, "acks", acks, "linger.ms", 5));
        if (!acks.equals("all")) conf.put("enable.idempotence", "false");    // idempotence needs acks=all
        try (KafkaProducer<byte[], byte[]> p = producer(conf)) {
            List<java.util.concurrent.Future<RecordMetadata>> fs = new ArrayList<>();
            for (int i = 0; i < n; i++) {
                String key = "k" + (i % 997);
                List<Header> hs = List.of(new RecordHeader("h", b("v" + i)), new RecordHeader("i", b(codec)));
                fs.add(p.send(new ProducerRecord<>(t, null, base + i, b(key), b("value-" + i + "-" + codec), hs)));
            }
            p.flush();
            for (int i = 0; i < n; i++) {
                RecordMetadata m = fs.get(i).get();
                String key = "k" + (i % 997);
                Integer prev = partitionOf.putIfAbsent(key, m.partition());
                require(prev == null || prev == m.partition(), "key " + key + " in two partitions");
                int expect = Utils.toPositive(Utils.murmur2(b(key))) % parts;
                require(m.partition() == expect, "key " + key + " in " + m.partition() + ", partitioner says " + expect);
            }
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(t, parts, n, Map.of());
        require(got.size() == n, "read " + got.size() + " of " + n);
        Set<Integer> seen = new HashSet<>();
        for (ConsumerRecord<byte[], byte[]> r : got) {
            String v = s(r.value());
            int i = Integer.parseInt(v.split("-")[1]);
            require(seen.add(i), "duplicate " + i);
            require(v.equals("value-" + i + "-" + codec), "value " + v);
            require(s(r.key()).equals("k" + (i % 997)), "key of " + i);
            require(r.timestamp() == base + i, "timestamp of " + i + ": " + r.timestamp());
            require(r.timestampType() == org.apache.kafka.common.record.TimestampType.CREATE_TIME, "timestamp type");
            Header h = r.headers().lastHeader("h");
            require(h != null && s(h.value()).equals("v" + i), "header of " + i);
        }
        return n + " records, byte-exact, murmur2 partitions";
    }

    static String idempotentDefault() throws Exception {
        // Java 3.x producers are idempotent by default (acks=all, enable.idempotence=true)
        String t = topic("j-idem");
        try (Admin a = admin()) { create(a, t, 1); }
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < 2000; i++) p.send(new ProducerRecord<>(t, b("v" + i)));
            p.flush();
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(t, 1, 2000, Map.of());
        require(got.size() == 2000, "read " + got.size());
        for (int i = 0; i < 2000; i++) {
            require(got.get(i).offset() == i, "offset " + got.get(i).offset() + " at " + i);
            require(s(got.get(i).value()).equals("v" + i), "order at " + i);
        }
        return "2000 records in order, no duplicates";
    }

    /** Two partitions of 20 KB batches read with fetch.max.bytes of 30 KB: the second partition's
     *  first batch never fits in what the first leaves, and a cut batch there would stop this
     *  consumer ("Failed to make progress reading messages"); Kafka answers it with no records. */
    static String fetchLimits() throws Exception {
        String t = topic("jfetchlimits");
        try (Admin a = admin()) { create(a, t, 2); }
        byte[] big = new byte[20000];
        java.util.Arrays.fill(big, (byte) 'x');
        int per = 4;
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of("linger.ms", 0, "batch.size", 30000))) {
            for (int part = 0; part < 2; part++)
                for (int i = 0; i < per; i++)
                    p.send(new ProducerRecord<>(t, part, b("k" + i), big)).get();
        }
        List<ConsumerRecord<byte[], byte[]>> got = readAll(t, 2, 2 * per,
            Map.of("fetch.max.bytes", 30000, "max.partition.fetch.bytes", 25000));
        Set<String> seen = new HashSet<>();
        for (ConsumerRecord<byte[], byte[]> r : got) seen.add(r.partition() + "/" + r.offset());
        require(got.size() == 2 * per && seen.size() == 2 * per,
                "read " + got.size() + " records (" + seen.size() + " distinct), want " + 2 * per);
        return "read " + got.size() + " records of 20 KB from 2 partitions with fetch.max.bytes=30000";
    }

    static String listOffsets() throws Exception {
        String t = topic("j-offsets");
        long base = System.currentTimeMillis() - 100000;
        try (Admin a = admin()) {
            create(a, t, 1);
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
                for (int i = 0; i < 100; i++) p.send(new ProducerRecord<>(t, 0, base + i * 10, null, b("v" + i)));
                p.flush();
            }
            TopicPartition tp = new TopicPartition(t, 0);
            long earliest = a.listOffsets(Map.of(tp, OffsetSpec.earliest())).all().get().get(tp).offset();
            long latest = a.listOffsets(Map.of(tp, OffsetSpec.latest())).all().get().get(tp).offset();
            long at = a.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(base + 255))).all().get().get(tp).offset();
            long past = a.listOffsets(Map.of(tp, OffsetSpec.forTimestamp(base + 100000))).all().get().get(tp).offset();
            ListOffsetsResult.ListOffsetsResultInfo max =
                a.listOffsets(Map.of(tp, OffsetSpec.maxTimestamp())).all().get().get(tp);
            require(earliest == 0, "earliest " + earliest);
            require(latest == 100, "latest " + latest);
            require(at == 26, "by time " + at);
            require(past == -1, "past the end " + past);
            require(max.offset() == 99 && max.timestamp() == base + 990, "max timestamp " + max);
            try (KafkaConsumer<byte[], byte[]> c = consumer(Map.of())) {
                Map<TopicPartition, OffsetAndTimestamp> m = c.offsetsForTimes(Map.of(tp, base + 500));
                require(m.get(tp).offset() == 50, "consumer offsetsForTimes " + m);
                require(c.endOffsets(List.of(tp)).get(tp) == 100, "endOffsets");
            }
            return "earliest 0, latest 100, by time 26, past end -1, max timestamp 99";
        }
    }

    /** Values ``prefix-i`` (keys ``k-i``), i < n. */
    static void produceValues(String t, String prefix, int n) {
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < n; i++) p.send(new ProducerRecord<>(t, b("k" + i), b(prefix + "-" + i)));
            p.flush();
        }
    }

    /** What a member of group ``g`` reads of ``t`` (until n values, then one more short poll for
     *  duplicates), committed before it leaves. */
    static List<String> readAsMember(String t, String g, int n) {
        List<String> got = new ArrayList<>();
        try (KafkaConsumer<byte[], byte[]> c = consumer(Map.of("group.id", g))) {
            c.subscribe(List.of(t));
            long deadline = System.currentTimeMillis() + 30000;
            while (got.size() < n && System.currentTimeMillis() < deadline)
                for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(200))) got.add(s(r.value()));
            for (ConsumerRecord<byte[], byte[]> r : c.poll(Duration.ofMillis(500))) got.add(s(r.value()));
            c.commitSync();
            OffsetAndMetadata om = c.committed(Set.of(new TopicPartition(t, 0))).get(new TopicPartition(t, 0));
            require(om != null && om.offset() > 0, "committed " + om);
        }
        return got;
    }

    static String groupCommitResume() throws Exception {
        String t = topic("j-group"), g = topic("jg");
        try (Admin a = admin()) { create(a, t, 3); }
        produceValues(t, "first", 300);
        List<String> first = readAsMember(t, g, 300);
        require(first.size() == 300 && new HashSet<>(first).size() == 300, "first read " + first.size());
        produceValues(t, "second", 300);
        List<String> second = readAsMember(t, g, 300);
        require(second.size() == 300, "second read " + second.size());
        for (String v : second) require(v.startsWith("second-"), "resumed from the wrong place: " + v);
        return "300 + 300 records, resumed exactly at the committed offsets";
    }

    /** Poll both members until they hold two partitions each, disjoint (four in all). */
    static void requireSplit(KafkaConsumer<byte[], byte[]> c1, KafkaConsumer<byte[], byte[]> c2, long ms) {
        long deadline = System.currentTimeMillis() + ms;
        while ((c1.assignment().size() != 2 || c2.assignment().size() != 2) && System.currentTimeMillis() < deadline) {
            c1.poll(Duration.ofMillis(100));
            c2.poll(Duration.ofMillis(100));
        }
        require(c1.assignment().size() == 2 && c2.assignment().size() == 2,
                "split " + c1.assignment() + " / " + c2.assignment());
        Set<TopicPartition> all = new HashSet<>(c1.assignment());
        all.addAll(c2.assignment());
        require(all.size() == 4, "overlap " + c1.assignment() + " / " + c2.assignment());
    }

    static String cooperativeTwoMembers() throws Exception {
        String t = topic("j-coop"), g = topic("jg");
        try (Admin a = admin()) { create(a, t, 4); }
        Map<String, Object> conf = Map.of("group.id", g, "partition.assignment.strategy",
                                          CooperativeStickyAssignor.class.getName());
        try (KafkaConsumer<byte[], byte[]> c1 = consumer(conf); KafkaConsumer<byte[], byte[]> c2 = consumer(conf)) {
            c1.subscribe(List.of(t));
            long deadline = System.currentTimeMillis() + 30000;
            while (c1.assignment().size() < 4 && System.currentTimeMillis() < deadline) c1.poll(Duration.ofMillis(100));
            require(c1.assignment().size() == 4, "one member holds " + c1.assignment());
            c2.subscribe(List.of(t));
            requireSplit(c1, c2, 45000);
            return "4 partitions split 2/2 by cooperative-sticky";
        }
    }

    /** A Java member joins a four-partition group another client holds; it waits for two of them
     * and holds them for two seconds (the split must be stable), then leaves. */
    static String joinToolGroup() throws Exception {
        String t = System.getProperty("tool.topic"), g = System.getProperty("tool.group");
        String strategy = System.getProperty("tool.strategy");
        Map<String, Object> conf = strategy.equals("consumer")
            ? Map.of("group.id", g, "group.protocol", "consumer")
            : Map.of("group.id", g, "partition.assignment.strategy", strategy);
        try (KafkaConsumer<byte[], byte[]> c = consumer(conf)) {
            c.subscribe(List.of(t));
            long deadline = System.currentTimeMillis() + 45000;
            while (c.assignment().size() != 2 && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(100));
            require(c.assignment().size() == 2, "holds " + c.assignment());
            Set<TopicPartition> held = new HashSet<>(c.assignment());
            long until = System.currentTimeMillis() + 2000;
            while (System.currentTimeMillis() < until) c.poll(Duration.ofMillis(100));
            require(c.assignment().equals(held), "moved from " + held + " to " + c.assignment());
            List<Integer> ps = new ArrayList<>();
            for (TopicPartition tp : held) ps.add(tp.partition());
            Collections.sort(ps);
            return "partitions " + ps;
        }
    }

    /** group.protocol=consumer (KIP-848): the coordinator assigns, members reconcile by heartbeats. */
    static String consumerProtocol() throws Exception {
        String t = topic("j-kip848"), g = topic("jg");
        try (Admin a = admin()) { create(a, t, 4); }
        produceValues(t, "v", 40);
        Map<String, Object> conf = Map.of("group.id", g, "group.protocol", "consumer");
        try (KafkaConsumer<byte[], byte[]> c1 = consumer(conf); KafkaConsumer<byte[], byte[]> c2 = consumer(conf)) {
            c1.subscribe(List.of(t));
            int read = 0;
            long deadline = System.currentTimeMillis() + 30000;
            while ((c1.assignment().size() < 4 || read < 40) && System.currentTimeMillis() < deadline)
                read += c1.poll(Duration.ofMillis(100)).count();
            require(c1.assignment().size() == 4 && read == 40, "one member holds " + c1.assignment() + ", read " + read);
            c1.commitSync();
            c2.subscribe(List.of(t));
            requireSplit(c1, c2, 60000);
            c2.commitSync();
            return "4 partitions split 2/2 by the coordinator; commits with member epochs";
        }
    }

    /** The group's type as the admin client lists it ("classic", "consumer"; "" when not listed). */
    static String groupType(Admin a, String g) throws Exception {
        for (ConsumerGroupListing l : a.listConsumerGroups().all().get())
            if (l.groupId().equals(g)) return l.type().map(x -> x.toString()).orElse("?");
        return "";
    }

    /** A classic member (eager range) is joined by a consumer-protocol member: the group is
     *  converted online and split; when the new member leaves it is classic again. */
    static String groupMigration() throws Exception {
        String t = topic("j-migrate"), g = topic("jg");
        try (Admin a = admin()) {
            create(a, t, 4);
            produceValues(t, "v", 40);
            try (KafkaConsumer<byte[], byte[]> classic = consumer(Map.of("group.id", g))) {
                classic.subscribe(List.of(t));
                int read = 0;
                long deadline = System.currentTimeMillis() + 30000;
                while ((classic.assignment().size() < 4 || read < 40) && System.currentTimeMillis() < deadline)
                    read += classic.poll(Duration.ofMillis(100)).count();
                require(classic.assignment().size() == 4 && read == 40,
                        "the classic member holds " + classic.assignment() + ", read " + read);
                classic.commitSync();
                require(groupType(a, g).equalsIgnoreCase("classic"), "type " + groupType(a, g));
                try (KafkaConsumer<byte[], byte[]> modern = consumer(Map.of("group.id", g, "group.protocol", "consumer"))) {
                    modern.subscribe(List.of(t));
                    requireSplit(classic, modern, 60000);
                    classic.commitSync();      // its generation id is its member epoch now
                    modern.commitSync();
                    require(groupType(a, g).equalsIgnoreCase("consumer"), "type " + groupType(a, g));
                }
                deadline = System.currentTimeMillis() + 60000;
                while (classic.assignment().size() < 4 && System.currentTimeMillis() < deadline)
                    classic.poll(Duration.ofMillis(100));
                require(classic.assignment().size() == 4, "after the downgrade the classic member holds "
                        + classic.assignment());
                classic.commitSync();
                require(groupType(a, g).equalsIgnoreCase("classic"), "type after leaving " + groupType(a, g));
            }
        }
        return "classic group upgraded by a consumer-protocol join, split 2/2, commits from both; downgraded when it left";
    }

    static String staticMember() throws Exception {
        String t = topic("j-static"), g = topic("jg");
        try (Admin a = admin()) {
            create(a, t, 2);
            Map<String, Object> conf = Map.of("group.id", g, "group.instance.id", "instance-1",
                                              "session.timeout.ms", 10000);
            try (KafkaConsumer<byte[], byte[]> c = consumer(conf)) {
                c.subscribe(List.of(t));
                long deadline = System.currentTimeMillis() + 30000;
                while (c.assignment().size() < 2 && System.currentTimeMillis() < deadline) c.poll(Duration.ofMillis(100));
                require(c.assignment().size() == 2, "assignment " + c.assignment());
                ConsumerGroupDescription d = a.describeConsumerGroups(List.of(g)).all().get().get(g);
                require(d.members().size() == 1, "members " + d.members());
                MemberDescription m = d.members().iterator().next();
                require(m.groupInstanceId().orElse("").equals("instance-1"), "instance id " + m.groupInstanceId());
            }
            return "static member instance-1 joined and was described";
        }
    }

    /** The two partitions of ``t`` hold ``committed`` records whose values start "committed-",
     *  seen by read_committed, among ``all`` records that read_uncommitted sees. */
    static void requireIsolation(String t, int committed, int all) {
        List<ConsumerRecord<byte[], byte[]>> rc = readAll(t, 2, committed, Map.of("isolation.level", "read_committed"));
        List<ConsumerRecord<byte[], byte[]>> ru = readAll(t, 2, all, Map.of("isolation.level", "read_uncommitted"));
        Set<String> seen = new HashSet<>();
        for (ConsumerRecord<byte[], byte[]> r : rc) seen.add(s(r.value()));
        require(rc.size() == committed && seen.stream().allMatch(v -> v.startsWith("committed-")),
                "read_committed saw " + seen);
        require(ru.size() == all, "read_uncommitted saw " + ru.size());
    }

    static String transactions() throws Exception {
        String t = topic("j-txn"), src = topic("j-txn-src"), g = topic("jg");
        try (Admin a = admin()) { create(a, t, 2); create(a, src, 1); }
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
            for (int i = 0; i < 10; i++) p.send(new ProducerRecord<>(src, b("in-" + i)));
        }
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of("transactional.id", topic("jtid")))) {
            p.initTransactions();
            p.beginTransaction();
            for (int i = 0; i < 5; i++) p.send(new ProducerRecord<>(t, i % 2, null, b("committed-" + i)));
            Map<TopicPartition, OffsetAndMetadata> offs = Map.of(new TopicPartition(src, 0), new OffsetAndMetadata(10));
            p.sendOffsetsToTransaction(offs, new ConsumerGroupMetadata(g));
            p.commitTransaction();
            p.beginTransaction();
            for (int i = 0; i < 5; i++) p.send(new ProducerRecord<>(t, i % 2, null, b("aborted-" + i)));
            p.flush();
            p.abortTransaction();
            p.beginTransaction();
            p.send(new ProducerRecord<>(t, 0, null, b("committed-last")));
            p.commitTransaction();
        }
        requireIsolation(t, 6, 11);
        try (Admin a = admin()) {
            Map<TopicPartition, OffsetAndMetadata> got =
                a.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
            require(got.get(new TopicPartition(src, 0)).offset() == 10, "txn offset commit " + got);
        }
        return "commit, abort, sendOffsetsToTransaction; read_committed 6, read_uncommitted 11";
    }

    static String adminGroups() throws Exception {
        String t = topic("j-ag"), g = topic("jg");
        try (Admin a = admin()) {
            create(a, t, 2);
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
                for (int i = 0; i < 20; i++) p.send(new ProducerRecord<>(t, i % 2, null, b("v" + i)));
            }
            TopicPartition p0 = new TopicPartition(t, 0), p1 = new TopicPartition(t, 1);
            a.alterConsumerGroupOffsets(g, Map.of(p0, new OffsetAndMetadata(3), p1, new OffsetAndMetadata(4))).all().get();
            Map<TopicPartition, OffsetAndMetadata> got = a.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
            require(got.get(p0).offset() == 3 && got.get(p1).offset() == 4, "offsets " + got);
            boolean listed = false;
            for (ConsumerGroupListing l : a.listConsumerGroups().all().get()) listed |= l.groupId().equals(g);
            require(listed, "group not listed");
            ConsumerGroupDescription d = a.describeConsumerGroups(List.of(g)).all().get().get(g);
            require(d.state() == ConsumerGroupState.EMPTY, "state " + d.state());
            a.deleteConsumerGroupOffsets(g, Set.of(p0)).all().get();
            got = a.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
            require(!got.containsKey(p0) || got.get(p0) == null, "offset of p0 still there: " + got);
            a.deleteConsumerGroups(List.of(g)).all().get();
            try {
                a.describeConsumerGroups(List.of(g)).all().get().get(g);
            } catch (ExecutionException e) {
                // some versions report the deleted group as DEAD/GroupIdNotFound; both are Kafka's answers
            }
            return "alter/list/delete offsets, list/describe/delete group";
        }
    }

    /** Three brokers or more: reassignment, preferred leader election, log dirs of every broker. */
    static String clusterAdmin() throws Exception {
        String t = topic("j-cluster");
        try (Admin a = admin()) {
            List<Integer> ids = new ArrayList<>();
            for (Node n : a.describeCluster().nodes().get()) ids.add(n.id());
            Collections.sort(ids);
            require(ids.size() >= 3, "nodes " + ids);
            Integer controller = a.describeCluster().controller().get().id();
            require(ids.contains(controller), "controller " + controller);
            // one partition on the first two brokers, led by the first
            a.createTopics(List.of(new NewTopic(t, Map.of(0, List.of(ids.get(0), ids.get(1))))))
             .all().get();
            TopicPartition tp = new TopicPartition(t, 0);
            // move it to the last two brokers, the last one preferred
            List<Integer> target = List.of(ids.get(2), ids.get(1));
            a.alterPartitionReassignments(Map.of(tp, Optional.of(new NewPartitionReassignment(target)))).all().get();
            long deadline = System.currentTimeMillis() + 60000;
            List<Integer> now = null;
            while (System.currentTimeMillis() < deadline) {
                TopicDescription d = a.describeTopics(List.of(t)).allTopicNames().get().get(t);
                now = new ArrayList<>();
                for (Node n : d.partitions().get(0).replicas()) now.add(n.id());
                boolean done = a.listPartitionReassignments(Set.of(tp)).reassignments().get().isEmpty();
                if (done && now.equals(target)) break;
                Thread.sleep(200);
            }
            require(target.equals(now), "replicas after reassignment " + now);
            // make the preferred replica the leader if it is not already
            deadline = System.currentTimeMillis() + 30000;
            int leader = -1;
            while (System.currentTimeMillis() < deadline) {
                try {
                    a.electLeaders(ElectionType.PREFERRED, Set.of(tp)).partitions().get();
                } catch (ExecutionException e) {
                    if (!(e.getCause() instanceof ElectionNotNeededException)) throw e;
                }
                leader = a.describeTopics(List.of(t)).allTopicNames().get().get(t).partitions().get(0).leader().id();
                if (leader == target.get(0)) break;
                Thread.sleep(200);
            }
            require(leader == target.get(0), "leader after preferred election " + leader);
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
                for (int i = 0; i < 100; i++) p.send(new ProducerRecord<>(t, b("v" + i))).get();
            }
            require(readAll(t, 1, 100, Map.of()).size() == 100, "records after the move");
            Map<Integer, Map<String, LogDirDescription>> dirs = a.describeLogDirs(ids).allDescriptions().get();
            int holders = 0;
            for (int id : ids)
                for (LogDirDescription ld : dirs.get(id).values())
                    if (ld.replicaInfos().containsKey(tp)) holders++;
            deadline = System.currentTimeMillis() + 30000;
            while (holders != 2 && System.currentTimeMillis() < deadline) {   // the removed replica's log goes
                Thread.sleep(200);
                dirs = a.describeLogDirs(ids).allDescriptions().get();
                holders = 0;
                for (int id : ids)
                    for (LogDirDescription ld : dirs.get(id).values())
                        if (ld.replicaInfos().containsKey(tp)) holders++;
            }
            require(holders == 2, "log dirs holding the partition: " + holders);
            return "reassigned to " + target + ", preferred leader " + leader + ", 100 records, log dirs on 2 brokers";
        }
    }

    /** Transaction version 2 (KIP-890 part 2): the admin client finalizes transaction.version 2,
     *  then a transactional producer made after it runs four transactions (three commits with
     *  sendOffsetsToTransaction, one abort).  A 4.x client then adds partitions through its
     *  Produce/TxnOffsetCommit requests and every EndTxn v5 bumps its epoch, so the coordinator
     *  shows epoch 4; an older client keeps transaction version 1 and epoch 0.  read_committed
     *  sees the committed records only, and the group the last committed offset. */
    static String transactionsV2() throws Exception {
        String t = topic("j-tv2"), src = topic("j-tv2-src"), g = topic("jg"), tid = topic("jtid2");
        try (Admin a = admin()) {
            a.updateFeatures(Map.of("transaction.version", new FeatureUpdate((short) 2, FeatureUpdate.UpgradeType.UPGRADE)),
                             new UpdateFeaturesOptions()).all().get();
            FeatureMetadata fm = a.describeFeatures().featureMetadata().get();
            require(fm.finalizedFeatures().get("transaction.version").maxVersionLevel() == 2, "finalized " + fm.finalizedFeatures());
            create(a, t, 2);
            create(a, src, 1);
        }
        try (KafkaProducer<byte[], byte[]> p = producer(Map.of("transactional.id", tid))) {
            p.initTransactions();
            for (int n = 0; n < 4; n++) {
                p.beginTransaction();
                for (int i = 0; i < 5; i++)
                    p.send(new ProducerRecord<>(t, i % 2, null, b((n == 2 ? "aborted-" : "committed-") + n + "-" + i)));
                if (n != 2) {
                    p.sendOffsetsToTransaction(Map.of(new TopicPartition(src, 0), new OffsetAndMetadata(10 + n)),
                                               new ConsumerGroupMetadata(g));
                    p.commitTransaction();
                } else {
                    p.flush();
                    p.abortTransaction();
                }
            }
        }
        int major = Integer.parseInt(org.apache.kafka.common.utils.AppInfoParser.getVersion().split("\\.")[0]);
        short expected = (short) (major >= 4 ? 4 : 0);
        try (Admin a = admin()) {
            TransactionDescription d = a.describeTransactions(List.of(tid)).description(tid).get();
            require(d.producerEpoch() == expected && d.state() == TransactionState.COMPLETE_COMMIT,
                    "client " + major + ".x: epoch " + d.producerEpoch() + " state " + d.state());
            Map<TopicPartition, OffsetAndMetadata> got = a.listConsumerGroupOffsets(g).partitionsToOffsetAndMetadata().get();
            require(got.get(new TopicPartition(src, 0)).offset() == 13, "txn offset commit " + got);
        }
        requireIsolation(t, 15, 20);
        return "epoch " + expected + " after 4 transactions; read_committed 15, read_uncommitted 20";
    }

    /** describeFeatures / updateFeatures (KIP-584): transaction.version 0-2 supported (reported
     *  by ApiVersions v4 only; a 3.x client asks with v3 and sees none), nothing finalized and an
     *  epoch; an upgrade of another feature (also as a dry run) is refused per feature with
     *  INVALID_REQUEST, the request going to the controller. */
    static String adminFeatures() throws Exception {
        try (Admin a = admin()) {
            FeatureMetadata fm = a.describeFeatures().featureMetadata().get();
            SupportedVersionRange tv = fm.supportedFeatures().get("transaction.version");
            require(fm.supportedFeatures().isEmpty() || (fm.supportedFeatures().size() == 1 && tv.minVersion() == 0
                    && tv.maxVersion() == 2), "supported " + fm.supportedFeatures());
            require(fm.finalizedFeatures().isEmpty(), "finalized " + fm.finalizedFeatures());
            require(fm.finalizedFeaturesEpoch().isPresent() && fm.finalizedFeaturesEpoch().get() >= 0,
                    "epoch " + fm.finalizedFeaturesEpoch());
            for (boolean dryRun : new boolean[]{true, false}) {
                UpdateFeaturesResult r = a.updateFeatures(
                    Map.of("metadata.version", new FeatureUpdate((short) 21, FeatureUpdate.UpgradeType.UPGRADE)),
                    new UpdateFeaturesOptions().validateOnly(dryRun));
                try {
                    r.values().get("metadata.version").get();
                    throw new IllegalStateException("an unsupported feature was upgraded");
                } catch (ExecutionException e) {
                    require(e.getCause() instanceof InvalidRequestException
                            && e.getCause().getMessage().contains("not supported"), "upgrade: " + e.getCause());
                }
            }
            return "epoch " + fm.finalizedFeaturesEpoch().get();
        }
    }

    static String adminConfigsAndRecords() throws Exception {
        String t = topic("j-cfg");
        try (Admin a = admin()) {
            create(a, t, 1);
            ConfigResource r = new ConfigResource(ConfigResource.Type.TOPIC, t);
            a.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("retention.ms", "123456"), AlterConfigOp.OpType.SET),
                new AlterConfigOp(new ConfigEntry("cleanup.policy", "compact"), AlterConfigOp.OpType.APPEND)))).all().get();
            Config c = a.describeConfigs(List.of(r)).all().get().get(r);
            require(c.get("retention.ms").value().equals("123456"), "retention.ms " + c.get("retention.ms"));
            require(c.get("retention.ms").source() == ConfigEntry.ConfigSource.DYNAMIC_TOPIC_CONFIG, "source");
            require(c.get("cleanup.policy").value().contains("compact"), "cleanup.policy " + c.get("cleanup.policy"));
            require(c.get("segment.bytes").isDefault() || c.get("segment.bytes").source()
                    == ConfigEntry.ConfigSource.DEFAULT_CONFIG || c.get("segment.bytes").source()
                    == ConfigEntry.ConfigSource.STATIC_BROKER_CONFIG, "segment.bytes " + c.get("segment.bytes"));
            ConfigResource br = new ConfigResource(ConfigResource.Type.BROKER,
                                                   String.valueOf(a.describeCluster().nodes().get().iterator().next().id()));
            Config bc = a.describeConfigs(List.of(br)).all().get().get(br);
            require(bc.get("num.partitions") != null, "broker config lacks num.partitions");
            try (KafkaProducer<byte[], byte[]> p = producer(Map.of())) {
                // the topic is compacted now: a record without a key is refused (Kafka's INVALID_RECORD)
                try {
                    p.send(new ProducerRecord<>(t, b("no key"))).get();
                    throw new IllegalStateException("a compacted topic took a record without a key");
                } catch (ExecutionException e) {
                    require(e.getCause() instanceof InvalidRecordException, "keyless record: " + e.getCause());
                }
                for (int i = 0; i < 50; i++) p.send(new ProducerRecord<>(t, b("k" + i), b("v" + i))).get();
            }
            TopicPartition tp = new TopicPartition(t, 0);
            long low = a.deleteRecords(Map.of(tp, RecordsToDelete.beforeOffset(20))).lowWatermarks().get(tp).get().lowWatermark();
            require(low == 20, "low watermark " + low);
            long earliest = a.listOffsets(Map.of(tp, OffsetSpec.earliest())).all().get().get(tp).offset();
            require(earliest == 20, "earliest after DeleteRecords " + earliest);
            Map<Integer, Map<String, LogDirDescription>> dirs =
                a.describeLogDirs(List.of(Integer.parseInt(br.name()))).allDescriptions().get();
            boolean found = false;
            for (LogDirDescription ld : dirs.get(Integer.parseInt(br.name())).values())
                found |= ld.replicaInfos().containsKey(tp);
            require(found, "DescribeLogDirs lacks " + tp);
            return "incremental alter (SET, APPEND), describe topic and broker configs, keyless record refused on a compacted topic, DeleteRecords, DescribeLogDirs";
        }
    }

    /** KIP-714 client metrics subscriptions: the CLIENT_METRICS config resource and listClientMetricsResources
     *  (kafka-clients 3.7+; reached by name so that the driver still compiles against older jars). */
    static String adminClientMetrics() throws Exception {
        ConfigResource.Type type;
        try {
            type = ConfigResource.Type.valueOf("CLIENT_METRICS");
        } catch (IllegalArgumentException e) {
            return "skipped: this kafka-clients (before 3.7) has no CLIENT_METRICS resource";
        }
        String name = "j-cm-" + RUN;
        ConfigResource r = new ConfigResource(type, name);
        AlterConfigOp.OpType set = AlterConfigOp.OpType.SET, delete = AlterConfigOp.OpType.DELETE;
        try (Admin a = admin()) {
            a.incrementalAlterConfigs(Map.of(r, List.of(
                new AlterConfigOp(new ConfigEntry("metrics", "org.apache.kafka.producer."), set),
                new AlterConfigOp(new ConfigEntry("interval.ms", "1000"), set),
                new AlterConfigOp(new ConfigEntry("match", "client_software_name=apache-kafka-java"), set)))).all().get();
            require(clientMetricsResources(a).contains(name), "listClientMetricsResources lacks " + name);
            Config c = a.describeConfigs(List.of(r)).all().get().get(r);
            require(c.entries().size() == 3, "configs " + c);
            require("1000".equals(c.get("interval.ms").value()), "interval.ms " + c.get("interval.ms"));
            require(c.get("metrics").source().name().equals("DYNAMIC_CLIENT_METRICS_CONFIG"), "source " + c.get("metrics"));
            try {
                a.incrementalAlterConfigs(Map.of(r, List.of(
                    new AlterConfigOp(new ConfigEntry("interval.ms", "10"), set)))).all().get();
                throw new IllegalStateException("an interval of 10 ms was accepted");
            } catch (ExecutionException e) {
                require(e.getCause() instanceof InvalidRequestException
                        && e.getCause().getMessage().contains("interval must be between 100 and 3600000"), "interval: " + e.getCause());
            }
            try {
                a.incrementalAlterConfigs(Map.of(r, List.of(
                    new AlterConfigOp(new ConfigEntry("match", "client_id=("), set)))).all().get();
                throw new IllegalStateException("a bad match pattern was accepted");
            } catch (ExecutionException e) {
                require(e.getCause() instanceof InvalidConfigurationException, "match: " + e.getCause());
            }
            List<AlterConfigOp> deletes = new ArrayList<>();
            for (String k : List.of("metrics", "interval.ms", "match"))
                deletes.add(new AlterConfigOp(new ConfigEntry(k, ""), delete));
            a.incrementalAlterConfigs(Map.of(r, deletes)).all().get();
            require(!clientMetricsResources(a).contains(name), "still listed after deleting every config: " + name);
            return "create, list, describe (DYNAMIC_CLIENT_METRICS_CONFIG), bad interval and match refused, delete";
        }
    }

    /** A producer that pushes its metrics; the detail is its client instance id as the broker gave it
     *  (KafkaProducer.clientInstanceId, kafka-clients 3.7+, called by reflection). */
    static String telemetryPush() throws Exception {
        Properties p = base();
        p.put("client.id", "java-telemetry");
        p.put("key.serializer", ByteArraySerializer.class.getName());
        p.put("value.serializer", ByteArraySerializer.class.getName());
        String t = topic("telemetry");
        try (KafkaProducer<byte[], byte[]> pr = new KafkaProducer<>(p)) {
            for (int i = 0; i < 50; i++)
                pr.send(new ProducerRecord<>(t, ("v" + i).getBytes(StandardCharsets.UTF_8))).get();
            Object id;
            try {
                id = KafkaProducer.class.getMethod("clientInstanceId", Duration.class).invoke(pr, Duration.ofSeconds(20));
            } catch (NoSuchMethodException e) {
                return "skipped: this kafka-clients (before 3.7) does not push metrics";
            }
            Thread.sleep(3000);         // a few pushes at the subscription's interval
            return id.toString();
        }
    }

    /** Admin.listClientMetricsResources() names, called by reflection (kafka-clients 3.7+). */
    static Set<String> clientMetricsResources(Admin a) throws Exception {
        Object result = Admin.class.getMethod("listClientMetricsResources").invoke(a);
        Object all = result.getClass().getMethod("all").invoke(result);
        Set<String> names = new HashSet<>();
        for (Object listing : (Collection<?>) ((KafkaFuture<?>) all).get())
            names.add((String) listing.getClass().getMethod("name").invoke(listing));
        return names;
    }
}
