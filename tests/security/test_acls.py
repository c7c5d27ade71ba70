"""ACLs with the authorizer on: kafka-acls.sh grants, prefixed patterns, DENY wins, super users,
group READ for consumers, --list output, SECURITY_DISABLED without an authorizer."""
from __future__ import annotations

import os
import subprocess
import time
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration
ck = pytest.importorskip("confluent_kafka")
from confluent_kafka import KafkaError  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:admin"}


def _conf(b, user, pw):
    return {"bootstrap.servers": b.addr("SASL_PLAINTEXT"), "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "PLAIN", "sasl.username": user, "sasl.password": pw}


@pytest.fixture
def authz_broker(secure_broker, tmp_path):
    b = secure_broker(listeners=("SASL_PLAINTEXT",), props=AUTHZ)
    admin_cfg = tmp_path / "admin.properties"
    admin_cfg.write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                         'sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required '
                         'username="admin" password="admin-secret";\n')
    b.admin_cfg = str(admin_cfg)
    return b


def acls(b, *args, stdin=None) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.run([str(REPO / "bin" / "kafka-acls.sh"), "--bootstrap-server", b.addr("SASL_PLAINTEXT"),
                           "--command-config", b.admin_cfg, *args], capture_output=True, text=True, env=env,
                          timeout=60, input=stdin)


def _create_topic(b, name, partitions=1):
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient(_conf(b, "admin", "admin-secret"))
    for f in a.create_topics([NewTopic(name, partitions, 1)]).values():
        f.result(15)


def _produce(conf, topic) -> KafkaError | None:
    from confluent_kafka import Producer
    p = Producer({**conf, "message.timeout.ms": 6000, "topic.metadata.refresh.interval.ms": 500})
    out = []
    p.produce(topic, b"x", on_delivery=lambda e, m: out.append(e))
    p.flush(10)
    return out[0] if out else KafkaError(KafkaError._MSG_TIMED_OUT)


def test_write_denied_then_granted_with_kafka_acls(authz_broker):
    b = authz_broker
    _create_topic(b, "orders")
    err = _produce(_conf(b, "alice", "alice-secret"), "orders")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, err
    r = acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Write", "--topic", "orders")
    assert r.returncode == 0, r.stderr
    assert "Adding ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=LITERAL)`" \
        in r.stdout
    assert _produce(_conf(b, "alice", "alice-secret"), "orders") is None
    # bob still cannot
    err = _produce(_conf(b, "bob", "bob-secret"), "orders")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_list_output_format(authz_broker):
    b = authz_broker
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--operation",
                "Describe", "--topic", "t1").returncode == 0
    r = acls(b, "--list", "--topic", "t1")
    assert r.returncode == 0, r.stderr
    head = "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=t1, patternType=LITERAL)`: \n"
    assert r.stdout.startswith(head), r.stdout
    assert " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW)" in r.stdout
    assert "\t(principal=User:alice, host=*, operation=DESCRIBE, permissionType=ALLOW)" in r.stdout
    everything = acls(b, "--list")
    assert head in everything.stdout
    r = acls(b, "--remove", "--force", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "t1")
    assert r.returncode == 0, r.stderr
    r = acls(b, "--list", "--topic", "t1")
    assert "operation=READ" not in r.stdout and "operation=DESCRIBE" in r.stdout


def test_prefixed_and_deny_wins_and_super_user(authz_broker):
    b = authz_broker
    for t in ("pay-1", "other", "t3"):
        _create_topic(b, t)
    assert acls(b, "--add", "--allow-principal", "User:bob", "--operation", "Write", "--topic", "pay-",
                "--resource-pattern-type", "prefixed").returncode == 0
    bob = _conf(b, "bob", "bob-secret")
    assert _produce(bob, "pay-1") is None
    err = _produce(bob, "other")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # DENY beats ALLOW
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "All", "--topic", "t3").returncode == 0
    alice = _conf(b, "alice", "alice-secret")
    assert _produce(alice, "t3") is None
    assert acls(b, "--add", "--deny-principal", "User:alice", "--operation", "Write", "--topic", "t3").returncode == 0
    err = _produce(alice, "t3")
    assert err is not None and err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # the super user needs no ACLs
    assert _produce(_conf(b, "admin", "admin-secret"), "other") is None


def _consume_one(conf, topic, commit=False):
    """The first record's value (committed if asked), its error, or None after 15 s."""
    from confluent_kafka import Consumer
    c = Consumer(conf)
    c.subscribe([topic])
    try:
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                return m.error()
            if commit:
                c.commit(m, asynchronous=False)
            return m.value()
        return None
    finally:
        c.close()


def test_group_read_needed_to_consume(authz_broker):
    b = authz_broker
    _create_topic(b, "events")
    assert _produce(_conf(b, "admin", "admin-secret"), "events") is None
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", "events").returncode == 0
    group = "g-" + uuid.uuid4().hex[:6]

    def consume():
        return _consume_one({**_conf(b, "alice", "alice-secret"), "group.id": group, "auto.offset.reset": "earliest"},
                            "events", commit=True)
    got = consume()
    assert isinstance(got, KafkaError) and got.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, got
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", group).returncode == 0
    assert consume() == b"x"


def test_metadata_filters_unauthorized_topics(authz_broker):
    from confluent_kafka.admin import AdminClient
    b = authz_broker
    for t in ("visible", "hidden"):
        _create_topic(b, t)
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Describe", "--topic",
                "visible").returncode == 0
    md = AdminClient(_conf(b, "alice", "alice-secret")).list_topics(timeout=10)
    assert "visible" in md.topics and "hidden" not in md.topics
    md = AdminClient(_conf(b, "admin", "admin-secret")).list_topics(timeout=10)
    assert {"visible", "hidden"} <= set(md.topics)


def test_acls_without_authorizer_security_disabled(secure_broker, tmp_path):
    b = secure_broker(listeners=("SASL_PLAINTEXT",))
    b.admin_cfg = str(tmp_path / "a.properties")
    Path(b.admin_cfg).write_text("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                                 "sasl.username=admin\nsasl.password=admin-secret\n")
    r = acls(b, "--list")
    assert r.returncode != 0
    assert "Security features are disabled" in r.stderr + r.stdout or "No Authorizer" in r.stderr + r.stdout


def test_describe_topic_partitions_hides_what_the_principal_may_not_describe(authz_broker):
    """DescribeTopicPartitions (75) with kafka-python: a named topic without DESCRIBE is
    TOPIC_AUTHORIZATION_FAILED (zero topic id, after the others); listing every topic leaves it out;
    the authorized operations are filled in."""
    from kafka.admin import KafkaAdminClient
    b = authz_broker
    _create_topic(b, "seen", 2)
    _create_topic(b, "hidden", 1)
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Describe", "--operation",
                "Read", "--topic", "seen").returncode == 0
    host, port = b.addr("SASL_PLAINTEXT").rsplit(":", 1)
    a = KafkaAdminClient(bootstrap_servers=f"{host}:{port}", security_protocol="SASL_PLAINTEXT",
                         sasl_mechanism="PLAIN", sasl_plain_username="alice", sasl_plain_password="alice-secret")
    try:
        r = a.describe_topic_partitions(["hidden", "seen"])
        assert [(t["name"], t["error_code"]) for t in r["topics"]] == [("seen", 0), ("hidden", 29)]
        hidden = r["topics"][1]
        assert hidden["topic_id"] is None           # kafka-python's reading of the zero uuid
        assert r["topics"][0]["topic_id"] is not None
        assert hidden["partitions"] == []
        seen = r["topics"][0]
        assert len(seen["partitions"]) == 2
        # READ (bit 3) and DESCRIBE (bit 8) of Kafka's AclOperation codes, nothing else
        assert seen["topic_authorized_operations"] == (1 << 3) | (1 << 8)
        every = {t["name"] for t in a.describe_topic_partitions([])["topics"]}
        assert "seen" in every and "hidden" not in every
    finally:
        a.close()


def test_metadata_by_topic_id_needs_describe(authz_broker):
    """Metadata v12 by topic id (as the Java admin's describeTopics by id sends it, name "" beside
    each id): a topic the principal may describe is answered by name; one it may not is
    TOPIC_AUTHORIZATION_FAILED with its id and no name, as Kafka answers (ids are not secret);
    an unknown id is UNKNOWN_TOPIC_ID."""
    import asyncio
    import protocol.messages as m
    from protocol.client import KafkaClientConnection, security_from_properties
    b = authz_broker
    _create_topic(b, "byid-seen", 1)
    _create_topic(b, "byid-hidden", 1)
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Describe",
                "--topic", "byid-seen").returncode == 0
    host, port = b.addr("SASL_PLAINTEXT").rsplit(":", 1)
    _, sasl = security_from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="alice" password="alice-secret";'})
    _, admin_sasl = security_from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="admin" password="admin-secret";'})
    M = m.MetadataRequest

    async def ask(settings, topics):
        c = await KafkaClientConnection.connect(host, int(port), timeout=10, sasl=settings)
        try:
            return await c.send(M(topics=topics, allow_auto_topic_creation=False,
                                  include_topic_authorized_operations=False), version=12)
        finally:
            await c.close()

    ids = {t.name: t.topic_id for t in asyncio.run(ask(admin_sasl, [M.MetadataRequestTopic(name="byid-seen"),
                                                                    M.MetadataRequestTopic(name="byid-hidden")])).topics}
    unknown = uuid.UUID(int=77)
    r = asyncio.run(ask(sasl, [M.MetadataRequestTopic(name="", topic_id=ids["byid-seen"]),
                               M.MetadataRequestTopic(name="", topic_id=ids["byid-hidden"]),
                               M.MetadataRequestTopic(name="", topic_id=unknown)]))
    got = sorted((t.error_code, t.name or "", str(t.topic_id)) for t in r.topics)
    assert got == sorted([(0, "byid-seen", str(ids["byid-seen"])), (29, "", str(ids["byid-hidden"])),
                          (100, "", str(unknown))])


def _plain(user):
    """SASL settings of the project's own client for PLAIN user ``user`` (password user-secret)."""
    from protocol.client import security_from_properties
    return security_from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            f'username="{user}" password="{user}-secret";'})[1]


def _send_as(b, user, req, version):
    """One request to ``b``'s SASL_PLAINTEXT listener as ``user``; its decoded response."""
    from tests.support.rawkafka import send_once
    return send_once(b.addr("SASL_PLAINTEXT"), req, version, sasl=_plain(user))


def _topic_ids(b, names):
    """{name: topic id}, asked by the super user."""
    from protocol.messages import MetadataRequest as M
    md = _send_as(b, "admin", M(topics=[M.MetadataRequestTopic(name=n) for n in names],
                                allow_auto_topic_creation=False, include_topic_authorized_operations=False), 12)
    return {t.name: t.topic_id for t in md.topics}


def test_produce_by_topic_id_needs_write(authz_broker):
    """Produce v13 names topics by id: a topic the principal may write takes the batch, one it
    may not is TOPIC_AUTHORIZATION_FAILED under its id, and an unknown id is UNKNOWN_TOPIC_ID
    (Kafka answers it before any authorization)."""
    from protocol.messages import ProduceRequest as P
    from protocol.records import build_batch
    b = authz_broker
    _create_topic(b, "pid-write", 1)
    _create_topic(b, "pid-hidden", 1)
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Write",
                "--topic", "pid-write").returncode == 0
    ids = _topic_ids(b, ["pid-write", "pid-hidden"])
    unknown = uuid.UUID(int=78)
    r = _send_as(b, "alice", P(transactional_id=None, acks=1, timeout_ms=10000, topic_data=[
        P.TopicProduceData(topic_id=tid, partition_data=[P.PartitionProduceData(
            index=0, records=build_batch([(None, b"v")]))])
        for tid in (ids["pid-write"], ids["pid-hidden"], unknown)]), 13)
    got = sorted((str(t.topic_id), [p.error_code for p in t.partition_responses]) for t in r.responses)
    assert got == sorted([(str(ids["pid-write"]), [0]), (str(ids["pid-hidden"]), [29]), (str(unknown), [100])])


def test_offsets_by_topic_id_need_read_and_describe(authz_broker):
    """OffsetCommit v10 / OffsetFetch v10 name topics by id: a topic the principal may not read
    is TOPIC_AUTHORIZATION_FAILED under its id, an unknown id UNKNOWN_TOPIC_ID, whatever the ACLs."""
    from protocol.messages import FindCoordinatorRequest, OffsetCommitRequest as C, OffsetFetchRequest as F
    from tests.support.net import wait_for
    b = authz_broker
    _create_topic(b, "oid-ok", 1)
    _create_topic(b, "oid-hidden", 1)
    group = "oid-group"
    for args in (("--topic", "oid-ok"), ("--group", group)):
        assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", *args).returncode == 0
    # the group coordinator (and __consumer_offsets) comes up on the first FindCoordinator
    assert wait_for(lambda: _send_as(b, "admin", FindCoordinatorRequest(key_type=0, coordinator_keys=[group]), 4)
                    .coordinators[0].error_code == 0, 30, what="the coordinator")
    ids = _topic_ids(b, ["oid-ok", "oid-hidden"])
    unknown = uuid.UUID(int=79)
    order = (ids["oid-ok"], ids["oid-hidden"], unknown)
    r = _send_as(b, "alice", C(group_id=group, generation_id_or_member_epoch=-1, member_id="",
                               group_instance_id=None, retention_time_ms=-1, topics=[
                                   C.OffsetCommitRequestTopic(topic_id=tid, partitions=[
                                       C.OffsetCommitRequestPartition(partition_index=0, committed_offset=3,
                                                                      committed_leader_epoch=-1,
                                                                      committed_metadata="")])
                                   for tid in order]), 10)
    got = sorted((str(t.topic_id), [p.error_code for p in t.partitions]) for t in r.topics)
    assert got == sorted([(str(ids["oid-ok"]), [0]), (str(ids["oid-hidden"]), [29]), (str(unknown), [100])])
    r = _send_as(b, "alice", F(require_stable=False, groups=[F.OffsetFetchRequestGroup(
        group_id=group, topics=[F.OffsetFetchRequestTopics(topic_id=tid, partition_indexes=[0])
                                for tid in order])]), 10)
    got = sorted((str(t.topic_id), [(p.committed_offset, p.error_code) for p in t.partitions])
                 for t in r.groups[0].topics)
    assert got == sorted([(str(ids["oid-ok"]), [(3, 0)]), (str(ids["oid-hidden"]), [(-1, 29)]),
                          (str(unknown), [(-1, 100)])])


def _admin_login(b):
    """(host, port, SASL settings) for the project's own client logged in as the super user."""
    from protocol.client import security_from_properties
    host, port = b.addr("SASL_PLAINTEXT").rsplit(":", 1)
    _, sasl = security_from_properties({
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required '
                            'username="admin" password="admin-secret";'})
    return host, int(port), sasl


def test_create_acls_corner_cases_answer_as_kafka(authz_broker):
    """CreateAcls/DescribeAcls answers that Kafka 3.9 with its AclAuthorizer gives (found by a
    KafkaJS sweep): a filter value (ANY, MATCH) in a creation fails the whole request with
    UNKNOWN_SERVER_ERROR and stores nothing; a "/" in the name is INVALID_REQUEST "Failed to
    create ACL" (on ZooKeeper it would make a bad znode path); a principal without a type fails
    every binding of its resource with UNKNOWN_SERVER_ERROR; an empty host is accepted; a
    DescribeAcls filter with an UNKNOWN element closes the connection."""
    import asyncio
    import protocol.messages as m
    from protocol.client import KafkaClientConnection, KafkaConnectionError
    host, port, sasl = _admin_login(authz_broker)
    C, D = m.CreateAclsRequest, m.DescribeAclsRequest
    tag = uuid.uuid4().hex[:6]

    def acl(name, principal="User:kjs", host="*", op=A_READ, perm=3, rtype=2, pattern=3):
        return C.AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                             principal=principal, host=host, operation=op, permission_type=perm)

    def describe(name):
        return D(resource_type_filter=2, resource_name_filter=name, pattern_type_filter=3, principal_filter=None,
                 host_filter=None, operation=1, permission_type=1)

    async def run():
        c = await KafkaClientConnection.connect(host, port, timeout=10, sasl=sasl)
        try:
            out = {}
            r = await c.send(C(creations=[acl(f"ok-{tag}"), acl(f"any-{tag}", op=1)]), version=1)
            out["any"] = [(x.error_code, x.error_message) for x in r.results]
            r = await c.send(describe(f"ok-{tag}"), version=1)
            out["any stored"] = r.resources
            r = await c.send(C(creations=[acl(f"a/b-{tag}"), acl(f"p-{tag}", principal="kjs"),
                                          acl(f"p-{tag}", op=4), acl(f"h-{tag}", host="")]), version=1)
            out["each"] = [(x.error_code, x.error_message) for x in r.results]
            for name in (f"p-{tag}", f"h-{tag}"):
                r = await c.send(describe(name), version=1)
                out[name] = [(a.host, a.operation) for res in r.resources for a in res.acls]
            try:
                await c.send(D(resource_type_filter=0, resource_name_filter=None, pattern_type_filter=3,
                               principal_filter=None, host_filter=None, operation=1, permission_type=1), version=1)
                out["unknown filter"] = "answered"
            except (KafkaConnectionError, OSError, asyncio.TimeoutError):
                out["unknown filter"] = "closed"
            return out
        finally:
            await c.close()

    out = asyncio.run(run())
    assert out["any"] == [(E_UNKNOWN, None), (E_UNKNOWN, None)]
    assert out["any stored"] == []
    assert out["each"] == [(E_INVALID_REQUEST, "Failed to create ACL"), (E_UNKNOWN, None), (E_UNKNOWN, None), (0, None)]
    assert out[f"p-{tag}"] == []
    assert out[f"h-{tag}"] == [("", A_READ)]
    assert out["unknown filter"] == "closed"


A_READ, E_UNKNOWN, E_INVALID_REQUEST = 3, -1, 42


def test_consumer_protocol_needs_group_read_and_topic_describe(authz_broker):
    """group.protocol=consumer (ConsumerGroupHeartbeat): READ on the group, DESCRIBE on the
    subscribed topics; ConsumerGroupDescribe: DESCRIBE on the group."""
    from confluent_kafka.admin import AdminClient
    b = authz_broker
    topic = "kip848-" + uuid.uuid4().hex[:6]
    _create_topic(b, topic)
    assert _produce(_conf(b, "admin", "admin-secret"), topic) is None
    group = "g-" + uuid.uuid4().hex[:6]

    def consume():
        return _consume_one({**_conf(b, "alice", "alice-secret"), "group.id": group, "group.protocol": "consumer",
                             "auto.offset.reset": "earliest"}, topic)
    got = consume()
    assert isinstance(got, KafkaError) and got.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, got
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", group).returncode == 0
    got = consume()
    assert isinstance(got, KafkaError) and got.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, got
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic).returncode == 0
    assert consume() == b"x"
    # describing the group needs DESCRIBE on it: alice has READ (which implies DESCRIBE), bob nothing
    for user, ok in (("alice", True), ("bob", False)):
        admin = AdminClient(_conf(b, user, f"{user}-secret"))
        fut = admin.describe_consumer_groups([group])[group]
        if ok:
            assert fut.result(timeout=30).group_id == group
        else:
            with pytest.raises(Exception) as e:
                fut.result(timeout=30)
            assert e.value.args[0].code() == KafkaError.GROUP_AUTHORIZATION_FAILED, e.value


def test_a_fetch_session_loses_a_topic_when_its_read_acl_goes(authz_broker):
    """An incremental fetch reads partitions its request does not name: READ is checked for
    each of them on every fetch, not only when the session was made."""
    from protocol.messages import FetchRequest
    from tests.support.rawkafka import RawConnection
    b = authz_broker
    _create_topic(b, "sessioned")
    assert _produce(_conf(b, "admin", "admin-secret"), "sessioned") is None
    grant = ("--allow-principal", "User:ANONYMOUS", "--operation", "Read", "--topic", "sessioned")
    assert acls(b, "--add", *grant).returncode == 0
    host, port = b.plaintext.rsplit(":", 1)

    def fetch(c, sid, epoch, parts=()):
        topics = [FetchRequest.FetchTopic(topic="sessioned", partitions=[FetchRequest.FetchPartition(
            partition=0, current_leader_epoch=-1, fetch_offset=off, last_fetched_epoch=-1,
            log_start_offset=-1, partition_max_bytes=1 << 20) for off in parts])] if parts else []
        return c.request(1, 12, FetchRequest(
            cluster_id=None, replica_id=-1, replica_state=None, max_wait_ms=0, min_bytes=1,
            max_bytes=1 << 20, isolation_level=0, session_id=sid, session_epoch=epoch, topics=topics,
            forgotten_topics_data=[], rack_id=""))

    with RawConnection(host, int(port)) as c:
        full = fetch(c, 0, 0, [0])
        assert full.session_id != 0 and full.responses[0].partitions[0].error_code == 0
        sid = full.session_id
        assert fetch(c, sid, 1, [1]).responses == []
        assert acls(b, "--remove", "--force", *grant).returncode == 0
        denied = fetch(c, sid, 2)
        assert [(t.topic, [p.error_code for p in t.partitions]) for t in denied.responses] == \
            [("sessioned", [29])]                               # TOPIC_AUTHORIZATION_FAILED
        assert acls(b, "--add", *grant).returncode == 0
        back = fetch(c, sid, 3)
        assert [p.error_code for t in back.responses for p in t.partitions] == [0]


def test_update_features_needs_cluster_alter(authz_broker):
    """UpdateFeatures (57): without ALTER on the cluster a top-level CLUSTER_AUTHORIZATION_FAILED
    with no per-feature results (kafka-python raises it); with it, the update's own answer (v2,
    which kafka-python sends: the top-level INVALID_REQUEST, raised too)."""
    from kafka.admin import KafkaAdminClient
    from kafka.errors import ClusterAuthorizationFailedError, InvalidRequestError
    b = authz_broker
    host, port = b.addr("SASL_PLAINTEXT").rsplit(":", 1)

    def admin(user):
        return KafkaAdminClient(bootstrap_servers=f"{host}:{port}", security_protocol="SASL_PLAINTEXT",
                                sasl_mechanism="PLAIN", sasl_plain_username=user,
                                sasl_plain_password=f"{user}-secret")
    a = admin("alice")
    try:
        with pytest.raises(ClusterAuthorizationFailedError):
            a.update_features({"x.version": ("SAFE_DOWNGRADE", 0)})
        assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Alter", "--cluster").returncode == 0
        deadline = time.monotonic() + 10
        while True:
            try:
                a.update_features({"x.version": ("SAFE_DOWNGRADE", 0)})
                raise AssertionError("deleting a feature that is not finalized was accepted")
            except InvalidRequestError as e:
                assert "Can not delete non-existing finalized feature." in str(e)
                break
            except ClusterAuthorizationFailedError:
                assert time.monotonic() < deadline, "the ALTER grant never took effect"
                time.sleep(0.2)
    finally:
        a.close()


def test_allocate_producer_ids_needs_cluster_action(authz_broker):
    """AllocateProducerIds (67), a broker-to-controller API: a client without CLUSTER_ACTION is
    answered CLUSTER_AUTHORIZATION_FAILED (the connection stays open, as in Kafka); the super
    user gets a block."""
    import asyncio

    from protocol.client import KafkaClientConnection, SaslSettings
    from protocol.messages import AllocateProducerIdsRequest as Q
    b = authz_broker
    host, port = b.addr("SASL_PLAINTEXT").rsplit(":", 1)
    meta = next(b.proc.log_dir.rglob("meta.properties")).read_text()
    own = int(next(line.split("=", 1)[1] for line in meta.splitlines() if line.startswith(("broker.id=", "node.id="))))

    async def ask(user):
        c = await KafkaClientConnection.connect(host, int(port), timeout=10,
                                                sasl=SaslSettings("PLAIN", user, f"{user}-secret"))
        try:
            r = await c.send(Q(broker_id=own, broker_epoch=-1), version=0)
            again = await c.send(Q(broker_id=own, broker_epoch=-1), version=0)
            return r.error_code, r.producer_id_len, again.error_code
        finally:
            await c.close()
    assert asyncio.run(ask("alice")) == (31, 0, 31)
    assert asyncio.run(ask("admin")) == (0, 1000, 0)


def test_delete_acls_reports_a_binding_under_the_first_filter_that_matches_it(authz_broker):
    """Kafka's AclAuthorizer reports each deleted binding once, under the first filter that
    matched it: two equal filters, then a wider one, answer [[a], [], [b]]."""
    import asyncio
    import protocol.messages as m
    from protocol.client import KafkaClientConnection
    host, port, sasl = _admin_login(authz_broker)
    C, DA = m.CreateAclsRequest, m.DeleteAclsRequest
    principal = f"User:dup-{uuid.uuid4().hex[:6]}"

    def creation(name):
        return C.AclCreation(resource_type=2, resource_name=name, resource_pattern_type=3, principal=principal,
                             host="*", operation=A_READ, permission_type=3)

    def flt(name):
        return DA.DeleteAclsFilter(resource_type_filter=2, resource_name_filter=name, pattern_type_filter=3,
                                   principal_filter=principal, host_filter=None, operation=1, permission_type=1)

    async def run():
        c = await KafkaClientConnection.connect(host, port, timeout=10, sasl=sasl)
        try:
            r = await c.send(C(creations=[creation("da"), creation("db")]), version=1)
            assert [x.error_code for x in r.results] == [0, 0]
            r = await c.send(DA(filters=[flt("da"), flt("da"), flt(None)]), version=1)
            return [(f.error_code, [a.resource_name for a in f.matching_acls]) for f in r.filter_results]
        finally:
            await c.close()

    assert asyncio.run(run()) == [(0, ["da"]), (0, []), (0, ["db"])]


def test_share_groups_need_group_read_and_topic_read(authz_broker):
    """KIP-932: ShareGroupHeartbeat needs READ on the group and DESCRIBE on the subscribed topics;
    ShareFetch READ on the group and on each topic."""
    from confluent_kafka import KafkaException, Producer, ShareConsumer
    b = authz_broker
    topic = "share-" + uuid.uuid4().hex[:6]
    group = "sg-" + uuid.uuid4().hex[:6]
    _create_topic(b, topic)

    def consume(timeout=20):
        c = ShareConsumer({**_conf(b, "alice", "alice-secret"), "group.id": group})
        c.subscribe([topic])
        try:
            deadline = time.time() + timeout
            produced = False
            while time.time() < deadline:
                try:
                    msgs = c.poll(0.5)
                except KafkaException as e:
                    return e.args[0]
                for m in msgs:
                    if m.error() is not None:
                        return m.error()
                    return m.value()
                if not produced:
                    time.sleep(1)
                    p = Producer(_conf(b, "admin", "admin-secret"))
                    p.produce(topic, b"q")
                    p.flush(10)
                    produced = True
            return None
        finally:
            c.close()
    got = consume()
    assert isinstance(got, KafkaError) and got.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, got
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", group).returncode == 0
    got = consume()
    assert isinstance(got, KafkaError) and got.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED, got
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", topic).returncode == 0
    assert consume() == b"q"


def test_streams_groups_need_group_read_topic_describe_and_create(authz_broker):
    """KIP-1071 as Kafka 4.2 authorizes it: StreamsGroupHeartbeat needs READ on the group and
    DESCRIBE on every topic of the topology; the internal topics are created only with CREATE
    (on the cluster or on each topic), else the status says which; StreamsGroupDescribe needs
    DESCRIBE on the group and hides a group whose topology names a topic the principal may not
    describe."""
    from protocol.messages import FindCoordinatorRequest as F, StreamsGroupDescribeRequest as D
    from tests.integration.test_streams_groups import GROUP, Member
    b = authz_broker
    _create_topic(b, "lines", 2)
    for _ in range(50):         # __consumer_offsets exists and is led
        if _send_as(b, "admin", F(key=GROUP, key_type=0, coordinator_keys=[GROUP]), 4).coordinators[0].error_code == 0:
            break
        time.sleep(0.2)

    def join(user):
        return Member(lambda req: _send_as(b, user, req, 0), "m-" + uuid.uuid4().hex[:6], "p").beat()
    assert join("alice").error_code == 30                          # GROUP_AUTHORIZATION_FAILED
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Read", "--group", GROUP).returncode == 0
    assert join("alice").error_code == 29                          # TOPIC_AUTHORIZATION_FAILED
    for topic, pattern in (("lines", "literal"), (GROUP + "-", "prefixed")):
        assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Describe", "--topic", topic,
                    "--resource-pattern-type", pattern).returncode == 0
    first = Member(lambda req: _send_as(b, "alice", req, 0), "m-first", "p")
    r = first.beat()
    assert r.error_code == 0
    assert [(s.status_code, s.status_detail) for s in r.status if s.status_code != 5] == [(3, (
        f"Internal topics are missing: {GROUP}-counts-changelog, {GROUP}-words-repartition; Unauthorized to "
        f"CREATE on topics {GROUP}-counts-changelog, {GROUP}-words-repartition."))]
    assert acls(b, "--add", "--allow-principal", "User:alice", "--operation", "Create", "--topic", GROUP + "-",
                "--resource-pattern-type", "prefixed").returncode == 0
    assert first.beat(member_epoch=-1).error_code == 0
    m = Member(lambda req: _send_as(b, "alice", req, 0), "m-final", "p")
    m.beat()
    deadline = time.time() + 20
    while not (m.last.error_code == 0 and m.last.status == [] and len(m.tasks()) == 4):
        assert time.time() < deadline, m.last
        time.sleep(0.2)
        m.beat()

    def describe(user):
        return _send_as(b, user, D(group_ids=[GROUP], include_authorized_operations=True), 0).groups[0]
    assert describe("bob").error_code == 30
    assert acls(b, "--add", "--allow-principal", "User:bob", "--operation", "Describe", "--group", GROUP).returncode == 0
    g = describe("bob")
    assert (g.error_code, g.error_message, g.members) == (
        29, "The described group uses topics that the client is not authorized to describe.", [])
    g = describe("alice")
    assert g.error_code == 0 and [x.member_id for x in g.members] == ["m-final"] and g.authorized_operations > 0
