"""Kafka's JSON for the records of its internal topics, as its converters write them: the
fields of each record's version, camelCase names in the order of the record's definition,
uuids in base64, bytes in base64, tagged fields only when they differ from their default.

``kafka-dump-log.sh``'s decoders (``--offsets-decoder``, ``--share-group-state-decoder``) and
``kafka-console-consumer.sh``'s coordinator formatters print them.  Each ``*_key`` function
gives (record type, key fields), the fields None for a type it does not know; each ``*_value``
function gives (value version, value fields).  Bytes that do not parse raise.
"""
from __future__ import annotations

import struct

class _R:
    def __init__(self, b):
        self.b, self.p = bytes(b), 0

    def i(self, fmt):
        v = struct.unpack_from(fmt, self.b, self.p)[0]
        self.p += struct.calcsize(fmt)
        return v

    def s(self, nullable=False):
        n = self.i(">h")
        if n < 0:
            return None
        v = self.b[self.p:self.p + n].decode("utf-8", "replace")
        self.p += n
        return v

    def uvarint(self):
        shift = out = 0
        while True:
            b = self.b[self.p]
            self.p += 1
            out |= (b & 0x7F) << shift
            if b < 0x80:
                return out
            shift += 7

    def cs(self):
        n = self.uvarint() - 1
        if n < 0:
            return None
        v = self.b[self.p:self.p + n].decode("utf-8", "replace")
        self.p += n
        return v


# -- __consumer_offsets ---------------------------------------------------------------------------

def group_key(key) -> tuple[int, dict | None]:
    from broker.group import modern_records as MR
    from broker.share import group_records as SR
    k = _R(key)
    kind = k.i(">h")
    if kind in (0, 1):
        return kind, {"group": k.s(), "topic": k.s(), "partition": k.i(">i")}
    if kind == 2:
        return kind, {"group": k.s()}
    parsed = MR.parse_key(key) or SR.parse_key(key)
    if parsed is None:
        return kind, None
    data = {"groupId": parsed.group}
    if parsed.member is not None:          # the member records' keys carry the member id
        data["memberId"] = parsed.member
    return kind, data


def group_value(kind: int, value, decode_embedded: bool = False) -> tuple[int, dict]:
    version = struct.unpack_from(">h", value)[0]
    if kind in (0, 1):
        return version, _offset_commit_json(value)
    if kind == 2:
        return _group_metadata_json(value, decode_embedded)
    if 3 <= kind <= 8:                      # the consumer group protocol's records (KIP-848)
        return version, _consumer_group_value_json(kind, value)
    return version, _share_group_value_json(kind, value)


def _offset_commit_json(value) -> dict:
    v = _R(value)
    version = v.i(">h")
    if version >= 4:
        return {"offset": v.i(">q"), "leaderEpoch": v.i(">i"), "metadata": v.cs(), "commitTimestamp": v.i(">q")}
    data = {"offset": v.i(">q")}
    if version == 3:
        data["leaderEpoch"] = v.i(">i")
    data["metadata"] = v.s()
    data["commitTimestamp"] = v.i(">q")
    if version == 1:
        data["expireTimestamp"] = v.i(">q")
    return data


def _share_group_value_json(kind: int, value) -> dict:
    """A share group record's value (Kafka 4.2's ShareGroup*Value)."""
    from broker.share import group_records as SR
    if kind == SR.GROUP_METADATA:
        epoch, digest = SR.parse_group_metadata_value(value)
        return {"epoch": epoch, "metadataHash": digest}
    if kind == SR.TARGET_METADATA:
        return {"assignmentEpoch": SR.parse_epoch_value(value)}
    if kind == SR.MEMBER_METADATA:
        m = SR.parse_member_metadata_value(value)
        return {"rackId": m.rack_id, "clientId": m.client_id, "clientHost": m.client_host,
                "subscribedTopicNames": list(m.subscribed)}
    if kind == SR.TARGET_MEMBER:
        return {"topicPartitions": _topic_partitions_json(SR.parse_target_member_value(value))}
    if kind == SR.CURRENT_ASSIGNMENT:
        c = SR.parse_current_assignment_value(value)
        return {"memberEpoch": c.epoch, "previousMemberEpoch": c.previous_epoch, "state": 0,
                "assignedPartitions": _topic_partitions_json(c.assigned)}
    if kind == SR.STATE_PARTITION_METADATA:
        from controller.api import uuid_to_base64
        m = SR.parse_state_partition_metadata_value(value)
        return {**{f"{name}Topics": [{"topicId": uuid_to_base64(t), "topicName": n, "partitions": ps}
                                     for t, n, ps in m[name]] for name in ("initializing", "initialized")},
                "deletingTopics": [{"topicId": uuid_to_base64(t), "topicName": n} for t, n in m["deleting"]]}
    raise ValueError(f"no reader for record type {kind}")


# -- __share_group_state --------------------------------------------------------------------------

def share_state_key(key) -> tuple[int, dict | None]:
    from broker.share.state_log import decode_key, topic_id_text
    kind = struct.unpack_from(">h", key)[0]
    parsed = decode_key(key)
    if parsed is None:
        return kind, None
    group, tid, partition = parsed
    return kind, {"groupId": group, "topicId": topic_id_text(tid), "partition": partition}


def share_state_value(kind: int, value) -> tuple[int, dict]:  # noqa: ARG001 - one record type
    from broker.share.state_log import decode_value
    v = decode_value(value)
    return 0, {"snapshotEpoch": v["snapshot_epoch"], "stateEpoch": v["state_epoch"],
               "leaderEpoch": v["leader_epoch"], "startOffset": v["start"], "createTimestamp": v["created_ms"],
               "writeTimestamp": v["written_ms"],
               "stateBatches": [{"firstOffset": a, "lastOffset": z, "deliveryState": st, "deliveryCount": n}
                                for a, z, st, n in v["batches"]]}


# -- __transaction_state --------------------------------------------------------------------------

def txn_key(key) -> tuple[int, dict | None]:
    from broker.txn import records as TR
    kind = struct.unpack_from(">h", key)[0]
    tid = TR.parse_key(key)
    return kind, None if tid is None else {"transactionalId": tid}


def txn_value(kind: int, value) -> tuple[int, dict]:  # noqa: ARG001 - one record type
    from broker.txn import records as TR
    version = struct.unpack_from(">h", value)[0]
    v = TR.parse_value(value)
    data = {"producerId": v.producer_id}
    if version >= 1 and v.previous_producer_id != -1:
        data["previousProducerId"] = v.previous_producer_id
    if version >= 1 and v.next_producer_id != -1:
        data["nextProducerId"] = v.next_producer_id
    data.update(producerEpoch=v.producer_epoch, transactionTimeoutMs=v.timeout_ms, transactionStatus=v.state,
                transactionPartitions=None if v.partitions is None else [
                    {"topic": t, "partitionIds": list(ps)} for t, ps in v.partitions.items()],
                transactionLastUpdateTimestampMs=v.last_update_ms, transactionStartTimestampMs=v.start_ms)
    if version >= 1 and v.client_transaction_version != 0:
        data["clientTransactionVersion"] = v.client_transaction_version
    return version, data


# -- helpers --------------------------------------------------------------------------------------

def _b64(data) -> str | None:
    import base64
    return None if data is None else base64.b64encode(bytes(data)).decode("ascii")


def _topic_partitions_json(parts: dict) -> list:
    from controller.api import uuid_to_base64
    return [{"topicId": uuid_to_base64(t), "partitions": sorted(ps)} for t, ps in sorted(parts.items())]


def _consumer_group_value_json(kind: int, value) -> dict:
    """A consumer-protocol record's value, with the field names and order of Kafka's
    ConsumerGroup*Value specs (what kafka-dump-log's JSON converters print)."""
    from broker.group import modern_records as MR
    from controller.api import uuid_to_base64
    parsed = MR.PARSERS[kind](value)
    if kind == MR.GROUP_METADATA:
        return {"epoch": parsed}
    if kind == MR.TARGET_METADATA:
        return {"assignmentEpoch": parsed}
    if kind == MR.PARTITION_METADATA:
        return {"topics": [{"topicId": uuid_to_base64(meta[0]), "topicName": name, "numPartitions": meta[1],
                            "partitionMetadata": [{"partition": p, "racks": list(racks)} for p, racks in meta[2]]}
                           for name, meta in parsed.items()]}
    if kind == MR.MEMBER_METADATA:
        out = {"instanceId": parsed.instance_id, "rackId": parsed.rack_id, "clientId": parsed.client_id,
               "clientHost": parsed.client_host, "subscribedTopicNames": list(parsed.subscribed),
               "subscribedTopicRegex": parsed.regex, "rebalanceTimeoutMs": parsed.rebalance_timeout_ms,
               "serverAssignor": parsed.server_assignor}
        if parsed.classic is not None:          # tagged field 0, written only when set
            session, protocols = parsed.classic
            out["classicMemberMetadata"] = {"sessionTimeoutMs": session, "supportedProtocols": [
                {"name": n, "metadata": _b64(m)} for n, m in protocols]}
        return out
    if kind == MR.TARGET_MEMBER:
        return {"topicPartitions": _topic_partitions_json(parsed)}
    return {"memberEpoch": parsed.epoch, "previousMemberEpoch": parsed.previous_epoch,
            "state": MR.STATE_CODES.get(parsed.state, -1),
            "assignedPartitions": _topic_partitions_json(parsed.assigned),
            "partitionsPendingRevocation": _topic_partitions_json(parsed.revoking)}


def _group_metadata_json(value, decode_embedded: bool) -> tuple[int, dict]:
    """GroupMetadataValue as Kafka's converter prints it (the fields of the record's version);
    with ``decode_embedded`` (DumpLogSegments), each member's subscription and assignment decoded
    for protocol type "consumer"."""
    from broker.group.records import parse_group_value
    vv = struct.unpack_from(">h", value)[0]
    g = parse_group_value(value)
    data = {"protocolType": g.protocol_type, "generation": g.generation, "protocol": g.protocol,
            "leader": g.leader}
    if vv >= 2:
        data["currentStateTimestamp"] = g.current_state_timestamp
    members = []
    for m in g.members:
        md = {"memberId": m.member_id}
        if vv >= 3:
            md["groupInstanceId"] = m.group_instance_id
        md.update(clientId=m.client_id, clientHost=m.client_host)
        if vv >= 1:
            md["rebalanceTimeout"] = m.rebalance_timeout
        md["sessionTimeout"] = m.session_timeout
        md["subscription"], md["assignment"] = _b64(m.subscription), _b64(m.assignment)
        if decode_embedded and g.protocol_type == "consumer":
            for name, decode in (("subscription", _subscription_json), ("assignment", _assignment_json)):
                try:
                    md[name] = decode(getattr(m, name))
                except Exception:
                    pass                        # undecodable: the bytes stay, as Kafka leaves them
        members.append(md)
    data["members"] = members
    return vv, data


def _subscription_json(data) -> dict:
    """ConsumerProtocolSubscription's fields at the subscription's own version."""
    from broker.group.embedded import decode_subscription
    sub = decode_subscription(data)
    out = {"topics": list(sub.topics), "userData": _b64(sub.user_data)}
    if sub.version >= 1:
        out["ownedPartitions"] = [{"topic": t, "partitions": list(ps)} for t, ps in sub.owned.items()]
    if sub.version >= 2:
        out["generationId"] = sub.generation
    if sub.version >= 3:
        out["rackId"] = sub.rack_id
    return out


def _assignment_json(data) -> dict:
    """ConsumerProtocolAssignment's fields: the partitions and the user data."""
    from broker.group.embedded import _Reader
    r = _Reader(bytes(data))
    r.i16()
    parts = r.topic_partitions()
    user_data = r.nullable_bytes() if not r.at_end() else None
    return {"assignedPartitions": [{"topic": t, "partitions": list(ps)} for t, ps in parts.items()],
            "userData": _b64(user_data)}


