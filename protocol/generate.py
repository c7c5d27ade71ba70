"""Generate the protocol schema tables from Apache Kafka's JSON message specs.

Usage::

    python -m protocol.generate [--specs ../shared/kafka-protocol/messages] [--check]

Writes ``protocol/schema/tables.py`` (facts only: names, types, versions, defaults, tags — no
upstream prose) and ``protocol/schema/hot.py`` (specialised encode/decode functions for the hot
messages, emitted by the same compiler the codec uses at run time for everything else).
``--check`` regenerates in memory and exits 1 if the committed files differ.
"""
from __future__ import annotations

import argparse
import json
import os
import pprint
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMA_DIR = os.path.join(HERE, "schema")
DEFAULT_SPECS = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "kafka-protocol", "messages"))

# Messages that get committed, specialised per-version functions (the broker's hot path and the
# group protocol's chatty requests).
HOT_APIS = (0, 1, 2, 3, 8, 9, 11, 12, 14)

MAX_VERSION = 0x7FFF


def snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def parse_versions(text):
    """'3+' -> (3, MAX); '1-4' -> (1, 4); '2' -> (2, 2); 'none' -> None."""
    if text is None:
        return None
    text = text.strip()
    if text == "none":
        return None
    if text.endswith("+"):
        return (int(text[:-1]), MAX_VERSION)
    if "-" in text:
        lo, hi = text.split("-")
        return (int(lo), int(hi))
    return (int(text), int(text))


def strip_comments(text: str) -> str:
    out = []
    for line in text.splitlines():
        # Remove a // comment that is not inside a string literal.
        in_str = False
        esc = False
        cut = None
        for i, ch in enumerate(line):
            if esc:
                esc = False
                continue
            if ch == "\\":
                esc = True
            elif ch == '"':
                in_str = not in_str
            elif ch == "/" and not in_str and line[i:i + 2] == "//":
                cut = i
                break
        out.append(line if cut is None else line[:cut])
    return "\n".join(out)


def load_spec(path: str) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.loads(strip_comments(f.read()))


# Versions that clients negotiate but the 3.9 specs beside the project do not have yet, written
# here as facts (the added fields, changed field versions and the new version range), applied on
# top of the 3.9 spec: message name -> {"validVersions": ..., "after": {field path: [new field,
# ...]}, "append": [new top-level field, ...], "versions": {field path: versions},
# "nullableVersions": {field path: versions}}.  A field
# path names nested fields with dots ("Topics.Partitions.PartitionMaxBytes").
#
# * ListClientMetricsResources v1 (Kafka 4.1, KIP-1142, where the API is renamed
#   ListConfigResources; the wire layout of v0 is the same): the request gets ResourceTypes
#   ([]int8, "append": after the last field); each resource of the answer gets ResourceType
#   (int8, default 16: CLIENT_METRICS) after its name.
# * Metadata v13 (Kafka 4.0, KIP-1102): the answer ends with a top-level ErrorCode (int16).
# * DescribeCluster v2 (Kafka 4.0, KIP-1073): IncludeFencedBrokers (bool) ends the request; each
#   broker of the answer has IsFenced (bool) after Rack.
# * ListTransactions v2 (Kafka 4.1, KIP-1152): TransactionalIdPattern (nullable string) ends the
#   request; the answer is unchanged.
# * AlterPartitionReassignments v1 (Kafka 4.0, KIP-860): AllowReplicationFactorChange (bool,
#   default true) after TimeoutMs in the request and after ThrottleTimeMs in the answer.
# * DescribeGroups v6 (Kafka 4.0, KIP-1043): the request is unchanged; each group of the answer
#   has ErrorMessage, a nullable string, after ErrorCode (GROUP_ID_NOT_FOUND for a group that
#   does not exist or is not a classic group).
# * ConsumerGroupHeartbeat v1 (Kafka 4.0, KIP-848): adds SubscribedTopicRegex, a nullable string,
#   after SubscribedTopicNames; the client generates the member id.  The response is unchanged.
#   librdkafka 2.10+ with group.protocol=consumer sends only v1.
# * The share group APIs (KIP-932).  3.9 has them as an unstable v0; Kafka 4.1 removed v0 and made
#   v1 the first stable version, 4.2 added v2 to ShareFetch and ShareAcknowledge.  The broker
#   advertises 1+ only; v0 stays decodable with the 3.9 layout.
#   - ShareGroupHeartbeat v1, ShareGroupDescribe v1: the layout of 3.9's v0.
#   - ShareFetch v1: MaxRecords and BatchSize (int32) after MaxBytes; PartitionMaxBytes is v0
#     only; the answer has AcquisitionLockTimeoutMs (int32) after ErrorMessage.  v2 (KIP-1206,
#     KIP-1222): ShareAcquireMode (int8, 0 batch-optimized, 1 record-limit) and IsRenewAck (bool)
#     after BatchSize; acknowledge type 4 (renew).
#   - ShareAcknowledge v2: IsRenewAck (bool) after ShareSessionEpoch; the answer has
#     AcquisitionLockTimeoutMs (int32) after ErrorMessage.
# * Fetch v18 (Kafka 4.1, KIP-1166): each partition of the request may carry the fetcher's
#   HighWatermark, tagged field 1 (int64, default Long.MAX_VALUE) after ReplicaDirectoryId.  The
#   answer is unchanged.
# * ListOffsets v10 (Kafka 4.0, KIP-1075): TimeoutMs (int32) ends the request; v11 (Kafka 4.2,
#   KIP-1023) adds the special timestamp -6 (earliest pending upload) and no field.  The answers
#   are unchanged.
# * ConsumerGroupDescribe v1 (Kafka 4.0, KIP-1099): each member of the answer has MemberType
#   (int8, default -1; 0 classic, 1 consumer) after TargetAssignment.  The request is unchanged.
# * Produce v12 (Kafka 4.0, KIP-890 part 2: the layout of v11) and v13 (Kafka 4.1, KIP-516): from
#   v13 a topic of the request and of the answer is named by TopicId (uuid) in place of Name,
#   which stops at v12.
# * OffsetCommit v10 and OffsetFetch v10 (Kafka 4.1, KIP-848): topics by TopicId (uuid) in place of
#   Name, which stops at v9, in the request and the answer (OffsetFetch: the topics of each group).
# * EndTxn v5, TxnOffsetCommit v5 (Kafka 4.0, KIP-890 part 2: transaction version 2).  EndTxn v5's
#   answer carries ProducerId (int64) and ProducerEpoch (int16), both default -1, after ErrorCode:
#   the producer id and epoch of the client's next transaction.  TxnOffsetCommit v5 is v4's layout.
# * WriteTxnMarkers v2 (Kafka 4.2, KIP-1228): each marker carries TransactionVersion (int8, default
#   0) after CoordinatorEpoch.  The answer is unchanged.
# * UpdateFeatures v2 (Kafka 4.0): the request is v1's; the answer has no per-feature Results
#   (they stop at v1), only the top-level error.
SPEC_ADDITIONS = {
    "UpdateFeaturesRequest": {"validVersions": "0-2"},
    "UpdateFeaturesResponse": {"validVersions": "0-2", "versions": {"Results": "0-1"}},
    "EndTxnRequest": {"validVersions": "0-5"},
    "EndTxnResponse": {
        "validVersions": "0-5",
        "append": [{"name": "ProducerId", "type": "int64", "versions": "5+", "default": "-1", "ignorable": True},
                   {"name": "ProducerEpoch", "type": "int16", "versions": "5+", "default": "-1", "ignorable": True}],
    },
    "TxnOffsetCommitRequest": {"validVersions": "0-5"},
    "TxnOffsetCommitResponse": {"validVersions": "0-5"},
    "WriteTxnMarkersRequest": {
        "validVersions": "0-2",
        "after": {"Markers.CoordinatorEpoch": [
            {"name": "TransactionVersion", "type": "int8", "versions": "2+", "default": "0", "ignorable": True}]},
    },
    "WriteTxnMarkersResponse": {"validVersions": "0-2"},
    "OffsetCommitRequest": {
        "validVersions": "0-10",
        "versions": {"Topics.Name": "0-9"},
        "after": {"Topics.Name": [{"name": "TopicId", "type": "uuid", "versions": "10+", "ignorable": True}]},
    },
    "OffsetCommitResponse": {
        "validVersions": "0-10",
        "versions": {"Topics.Name": "0-9"},
        "after": {"Topics.Name": [{"name": "TopicId", "type": "uuid", "versions": "10+", "ignorable": True}]},
    },
    "OffsetFetchRequest": {
        "validVersions": "0-10",
        "versions": {"Groups.Topics.Name": "8-9"},
        "after": {"Groups.Topics.Name": [{"name": "TopicId", "type": "uuid", "versions": "10+", "ignorable": True}]},
    },
    "OffsetFetchResponse": {
        "validVersions": "0-10",
        "versions": {"Groups.Topics.Name": "8-9"},
        "after": {"Groups.Topics.Name": [{"name": "TopicId", "type": "uuid", "versions": "10+", "ignorable": True}]},
    },
    "ProduceRequest": {
        "validVersions": "0-13",
        "versions": {"TopicData.Name": "0-12"},
        "after": {"TopicData.Name": [{"name": "TopicId", "type": "uuid", "versions": "13+", "ignorable": True}]},
    },
    "ProduceResponse": {
        "validVersions": "0-13",
        "versions": {"Responses.Name": "0-12"},
        "after": {"Responses.Name": [{"name": "TopicId", "type": "uuid", "versions": "13+", "ignorable": True}]},
    },
    "FetchRequest": {
        "validVersions": "0-18",
        "after": {"Topics.Partitions.ReplicaDirectoryId": [
            {"name": "HighWatermark", "type": "int64", "versions": "18+", "default": "9223372036854775807",
             "taggedVersions": "18+", "tag": 1, "ignorable": True}]},
    },
    "FetchResponse": {"validVersions": "0-18"},
    "ListOffsetsRequest": {
        "validVersions": "0-11",
        "append": [{"name": "TimeoutMs", "type": "int32", "versions": "10+", "ignorable": True}],
    },
    "ListOffsetsResponse": {"validVersions": "0-11"},
    "ConsumerGroupDescribeRequest": {"validVersions": "0-1"},
    "ConsumerGroupDescribeResponse": {
        "validVersions": "0-1",
        "after": {"Groups.Members.TargetAssignment": [
            {"name": "MemberType", "type": "int8", "versions": "1+", "default": "-1", "ignorable": True}]},
    },
    "ListClientMetricsResourcesRequest": {
        "validVersions": "0-1",
        "append": [{"name": "ResourceTypes", "type": "[]int8", "versions": "1+"}],
    },
    "ListClientMetricsResourcesResponse": {
        "validVersions": "0-1",
        "after": {"ClientMetricsResources.Name": [
            {"name": "ResourceType", "type": "int8", "versions": "1+", "ignorable": True, "default": "16"}]},
    },
    "MetadataRequest": {"validVersions": "0-13"},
    "MetadataResponse": {
        "validVersions": "0-13",
        "append": [{"name": "ErrorCode", "type": "int16", "versions": "13+", "ignorable": True}],
    },
    "DescribeClusterRequest": {
        "validVersions": "0-2",
        "append": [{"name": "IncludeFencedBrokers", "type": "bool", "versions": "2+"}],
    },
    "DescribeClusterResponse": {
        "validVersions": "0-2",
        "after": {"Brokers.Rack": [{"name": "IsFenced", "type": "bool", "versions": "2+"}]},
    },
    "ListTransactionsRequest": {
        "validVersions": "0-2",
        "append": [{"name": "TransactionalIdPattern", "type": "string", "versions": "2+", "nullableVersions": "2+",
                    "default": "null"}],
    },
    "ListTransactionsResponse": {"validVersions": "0-2"},
    "AlterPartitionReassignmentsRequest": {
        "validVersions": "0-1",
        "after": {"TimeoutMs": [{"name": "AllowReplicationFactorChange", "type": "bool", "versions": "1+",
                                 "default": "true"}]},
    },
    "AlterPartitionReassignmentsResponse": {
        "validVersions": "0-1",
        "after": {"ThrottleTimeMs": [{"name": "AllowReplicationFactorChange", "type": "bool", "versions": "1+",
                                      "default": "true", "ignorable": True}]},
    },
    "DescribeGroupsRequest": {"validVersions": "0-6"},
    "DescribeGroupsResponse": {
        "validVersions": "0-6",
        "after": {"Groups.ErrorCode": [
            {"name": "ErrorMessage", "type": "string", "versions": "6+", "nullableVersions": "6+",
             "default": "null"}]},
    },
    "ConsumerGroupHeartbeatRequest": {
        "validVersions": "0-1",
        "after": {"SubscribedTopicNames": [
            {"name": "SubscribedTopicRegex", "type": "string", "versions": "1+", "nullableVersions": "1+",
             "default": "null"}]},
    },
    "ConsumerGroupHeartbeatResponse": {"validVersions": "0-1"},
    "ShareGroupHeartbeatRequest": {"validVersions": "0-1"},
    "ShareGroupHeartbeatResponse": {"validVersions": "0-1"},
    "ShareGroupDescribeRequest": {"validVersions": "0-1"},
    "ShareGroupDescribeResponse": {"validVersions": "0-1"},
    "ShareFetchRequest": {
        "validVersions": "0-2",
        "after": {"MaxBytes": [
            {"name": "MaxRecords", "type": "int32", "versions": "1+"},
            {"name": "BatchSize", "type": "int32", "versions": "1+"},
            {"name": "ShareAcquireMode", "type": "int8", "versions": "2+", "default": "0"},
            {"name": "IsRenewAck", "type": "bool", "versions": "2+", "default": "false"}]},
        "versions": {"Topics.Partitions.PartitionMaxBytes": "0"},
    },
    "ShareFetchResponse": {
        "validVersions": "0-2",
        "after": {"ErrorMessage": [{"name": "AcquisitionLockTimeoutMs", "type": "int32", "versions": "1+"}]},
        "nullableVersions": {"Responses.Partitions.Records": "0"},
    },
    "ShareAcknowledgeRequest": {
        "validVersions": "0-2",
        "after": {"ShareSessionEpoch": [{"name": "IsRenewAck", "type": "bool", "versions": "2+", "default": "false"}]},
    },
    "ShareAcknowledgeResponse": {
        "validVersions": "0-2",
        "after": {"ErrorMessage": [{"name": "AcquisitionLockTimeoutMs", "type": "int32", "versions": "2+"}]},
    },
}


# Messages newer than the 3.9 specs, written here as facts in the specs' own form (names, types,
# versions; no upstream prose).  The share group admin APIs of KIP-932 (Kafka 4.1; v1 of
# DescribeShareGroupOffsets, Kafka 4.2, adds each partition's Lag):
def _f(name, type_, versions="0+", **kw):
    out = {"name": name, "type": type_, "versions": versions}
    out.update({{"nullable": "nullableVersions"}.get(k, k): v for k, v in kw.items()})
    return out


_ERR = [_f("ErrorCode", "int16"), _f("ErrorMessage", "string", nullable="0+", default="null")]
SPEC_NEW = [
    {"apiKey": 90, "type": "request", "name": "DescribeShareGroupOffsetsRequest", "validVersions": "0-1",
     "flexibleVersions": "0+", "listeners": ["broker"], "fields": [
         _f("Groups", "[]DescribeShareGroupOffsetsRequestGroup", fields=[
             _f("GroupId", "string"),
             _f("Topics", "[]DescribeShareGroupOffsetsRequestTopic", nullable="0+", fields=[
                 _f("TopicName", "string"), _f("Partitions", "[]int32")])])]},
    {"apiKey": 90, "type": "response", "name": "DescribeShareGroupOffsetsResponse", "validVersions": "0-1",
     "flexibleVersions": "0+", "fields": [
         _f("ThrottleTimeMs", "int32"),
         _f("Groups", "[]DescribeShareGroupOffsetsResponseGroup", fields=[
             _f("GroupId", "string"),
             _f("Topics", "[]DescribeShareGroupOffsetsResponseTopic", fields=[
                 _f("TopicName", "string"), _f("TopicId", "uuid"),
                 _f("Partitions", "[]DescribeShareGroupOffsetsResponsePartition", fields=[
                     _f("PartitionIndex", "int32"), _f("StartOffset", "int64"), _f("LeaderEpoch", "int32"),
                     _f("Lag", "int64", "1+", default="-1"), *_ERR])]),
             *_ERR])]},
    {"apiKey": 91, "type": "request", "name": "AlterShareGroupOffsetsRequest", "validVersions": "0",
     "flexibleVersions": "0+", "listeners": ["broker"], "fields": [
         _f("GroupId", "string"),
         _f("Topics", "[]AlterShareGroupOffsetsRequestTopic", fields=[
             _f("TopicName", "string"),
             _f("Partitions", "[]AlterShareGroupOffsetsRequestPartition", fields=[
                 _f("PartitionIndex", "int32"), _f("StartOffset", "int64")])])]},
    {"apiKey": 91, "type": "response", "name": "AlterShareGroupOffsetsResponse", "validVersions": "0",
     "flexibleVersions": "0+", "fields": [
         _f("ThrottleTimeMs", "int32"), *_ERR,
         _f("Responses", "[]AlterShareGroupOffsetsResponseTopic", fields=[
             _f("TopicName", "string"), _f("TopicId", "uuid"),
             _f("Partitions", "[]AlterShareGroupOffsetsResponsePartition", fields=[
                 _f("PartitionIndex", "int32"), *_ERR])])]},
    {"apiKey": 92, "type": "request", "name": "DeleteShareGroupOffsetsRequest", "validVersions": "0",
     "flexibleVersions": "0+", "listeners": ["broker"], "fields": [
         _f("GroupId", "string"),
         _f("Topics", "[]DeleteShareGroupOffsetsRequestTopic", fields=[_f("TopicName", "string")])]},
    {"apiKey": 92, "type": "response", "name": "DeleteShareGroupOffsetsResponse", "validVersions": "0",
     "flexibleVersions": "0+", "fields": [
         _f("ThrottleTimeMs", "int32"), *_ERR,
         _f("Responses", "[]DeleteShareGroupOffsetsResponseTopic", fields=[
             _f("TopicName", "string"), _f("TopicId", "uuid"), *_ERR])]},
]


# The streams group APIs of KIP-1071 (Kafka 4.2, first stable version 0): StreamsGroupHeartbeat (88)
# and StreamsGroupDescribe (89).  Structs shared by several fields are the specs' commonStructs.
def _struct(name, *fields):
    return {"name": name, "versions": "0+", "fields": list(fields)}


_KV = _struct("KeyValue", _f("Key", "string"), _f("Value", "string"))
_TOPIC_INFO = _struct("TopicInfo", _f("Name", "string"), _f("Partitions", "int32"),
                      _f("ReplicationFactor", "int16"), _f("TopicConfigs", "[]KeyValue"))
_ENDPOINT = _struct("Endpoint", _f("Host", "string"), _f("Port", "uint16"))
_TASK_OFFSET = _struct("TaskOffset", _f("SubtopologyId", "string"), _f("Partition", "int32"), _f("Offset", "int64"))
_TASK_IDS = _struct("TaskIds", _f("SubtopologyId", "string"), _f("Partitions", "[]int32"))
# a subtopology as the heartbeat sends it and the topology record keeps it (each spec has its own
# TopicInfo struct)
_SUBTOPOLOGY = [
    _f("SubtopologyId", "string"), _f("SourceTopics", "[]string"), _f("SourceTopicRegex", "[]string"),
    _f("StateChangelogTopics", "[]TopicInfo"), _f("RepartitionSinkTopics", "[]string"),
    _f("RepartitionSourceTopics", "[]TopicInfo"),
    _f("CopartitionGroups", "[]CopartitionGroup", fields=[
        _f("SourceTopics", "[]int16"), _f("SourceTopicRegex", "[]int16"), _f("RepartitionSourceTopics", "[]int16")])]
SPEC_NEW += [
    {"apiKey": 88, "type": "request", "name": "StreamsGroupHeartbeatRequest", "validVersions": "0",
     "flexibleVersions": "0+", "listeners": ["broker"], "fields": [
         _f("GroupId", "string"), _f("MemberId", "string"), _f("MemberEpoch", "int32"),
         _f("EndpointInformationEpoch", "int32"),
         _f("InstanceId", "string", nullable="0+", default="null"),
         _f("RackId", "string", nullable="0+", default="null"),
         _f("RebalanceTimeoutMs", "int32", default=-1),
         _f("Topology", "Topology", nullable="0+", default="null", fields=[
             _f("Epoch", "int32"), _f("Subtopologies", "[]Subtopology", fields=_SUBTOPOLOGY)]),
         _f("ActiveTasks", "[]TaskIds", nullable="0+", default="null"),
         _f("StandbyTasks", "[]TaskIds", nullable="0+", default="null"),
         _f("WarmupTasks", "[]TaskIds", nullable="0+", default="null"),
         _f("ProcessId", "string", nullable="0+", default="null"),
         _f("UserEndpoint", "Endpoint", nullable="0+", default="null"),
         _f("ClientTags", "[]KeyValue", nullable="0+", default="null"),
         _f("TaskOffsets", "[]TaskOffset", nullable="0+", default="null"),
         _f("TaskEndOffsets", "[]TaskOffset", nullable="0+", default="null"),
         _f("ShutdownApplication", "bool", default="false")],
     "commonStructs": [_KV, _TOPIC_INFO, _ENDPOINT, _TASK_OFFSET, _TASK_IDS]},
    {"apiKey": 88, "type": "response", "name": "StreamsGroupHeartbeatResponse", "validVersions": "0",
     "flexibleVersions": "0+", "fields": [
         _f("ThrottleTimeMs", "int32"), *_ERR, _f("MemberId", "string"), _f("MemberEpoch", "int32"),
         _f("HeartbeatIntervalMs", "int32"), _f("AcceptableRecoveryLag", "int32"),
         _f("TaskOffsetIntervalMs", "int32"),
         _f("Status", "[]Status", nullable="0+"),
         _f("ActiveTasks", "[]TaskIds", nullable="0+", default="null"),
         _f("StandbyTasks", "[]TaskIds", nullable="0+", default="null"),
         _f("WarmupTasks", "[]TaskIds", nullable="0+", default="null"),
         _f("EndpointInformationEpoch", "int32"),
         _f("PartitionsByUserEndpoint", "[]EndpointToPartitions", nullable="0+", default="null", fields=[
             _f("UserEndpoint", "Endpoint"), _f("ActivePartitions", "[]TopicPartition"),
             _f("StandbyPartitions", "[]TopicPartition")])],
     "commonStructs": [_struct("Status", _f("StatusCode", "int8"), _f("StatusDetail", "string")),
                       _struct("TopicPartition", _f("Topic", "string"), _f("Partitions", "[]int32")),
                       _TASK_IDS, _ENDPOINT]},
    {"apiKey": 89, "type": "request", "name": "StreamsGroupDescribeRequest", "validVersions": "0",
     "flexibleVersions": "0+", "listeners": ["broker"], "fields": [
         _f("GroupIds", "[]string"), _f("IncludeAuthorizedOperations", "bool")]},
    {"apiKey": 89, "type": "response", "name": "StreamsGroupDescribeResponse", "validVersions": "0",
     "flexibleVersions": "0+", "fields": [
         _f("ThrottleTimeMs", "int32"),
         _f("Groups", "[]DescribedGroup", fields=[
             *_ERR, _f("GroupId", "string"), _f("GroupState", "string"), _f("GroupEpoch", "int32"),
             _f("AssignmentEpoch", "int32"),
             _f("Topology", "Topology", nullable="0+", default="null", fields=[
                 _f("Epoch", "int32"),
                 _f("Subtopologies", "[]Subtopology", nullable="0+", default="null", fields=[
                     _f("SubtopologyId", "string"), _f("SourceTopics", "[]string"),
                     _f("RepartitionSinkTopics", "[]string"), _f("StateChangelogTopics", "[]TopicInfo"),
                     _f("RepartitionSourceTopics", "[]TopicInfo")])]),
             _f("Members", "[]Member", fields=[
                 _f("MemberId", "string"), _f("MemberEpoch", "int32"),
                 _f("InstanceId", "string", nullable="0+", default="null"),
                 _f("RackId", "string", nullable="0+", default="null"),
                 _f("ClientId", "string"), _f("ClientHost", "string"), _f("TopologyEpoch", "int32"),
                 _f("ProcessId", "string"), _f("UserEndpoint", "Endpoint", nullable="0+", default="null"),
                 _f("ClientTags", "[]KeyValue"), _f("TaskOffsets", "[]TaskOffset"),
                 _f("TaskEndOffsets", "[]TaskOffset"), _f("Assignment", "Assignment"),
                 _f("TargetAssignment", "Assignment"), _f("IsClassic", "bool")]),
             _f("AuthorizedOperations", "int32", default="-2147483648")])],
     "commonStructs": [_ENDPOINT, _TASK_OFFSET,
                       _struct("Assignment", _f("ActiveTasks", "[]TaskIds"), _f("StandbyTasks", "[]TaskIds"),
                               _f("WarmupTasks", "[]TaskIds")),
                       _TASK_IDS, _KV, _TOPIC_INFO]},
]


# The values of the streams group records in ``__consumer_offsets`` (Kafka 4.2's group coordinator
# record specs, each value version 0; broker/group/streams_records.py writes and reads them with
# these).  Key versions: 17 group metadata, 19 member metadata, 20 target assignment metadata, 21
# target assignment of a member, 22 current assignment of a member, 23 topology.
_TASKS = _struct("TaskIds", _f("SubtopologyId", "string"), _f("Partitions", "[]int32"))
SPEC_NEW += [
    {"apiKey": 17, "type": "data", "name": "StreamsGroupMetadataValue", "validVersions": "0",
     "flexibleVersions": "0+", "fields": [
         _f("Epoch", "int32"), _f("MetadataHash", "int64"),
         _f("ValidatedTopologyEpoch", "int32", taggedVersions="0+", tag=0, default=-1),
         {"name": "LastAssignmentConfigs", "type": "[]LastAssignmentConfig", "taggedVersions": "0+",
          "nullableVersions": "0+", "tag": 1, "default": None}],
     "commonStructs": [_struct("LastAssignmentConfig", _f("Key", "string"), _f("Value", "string"))]},
    {"apiKey": 19, "type": "data", "name": "StreamsGroupMemberMetadataValue", "validVersions": "0",
     "flexibleVersions": "0+", "fields": [
         _f("InstanceId", "string", nullable="0+"), _f("RackId", "string", nullable="0+"),
         _f("ClientId", "string"), _f("ClientHost", "string"), _f("RebalanceTimeoutMs", "int32", default=-1),
         _f("TopologyEpoch", "int32"), _f("ProcessId", "string"),
         _f("UserEndpoint", "Endpoint", nullable="0+", default="null"), _f("ClientTags", "[]KeyValue")],
     "commonStructs": [_ENDPOINT, _KV]},
    {"apiKey": 20, "type": "data", "name": "StreamsGroupTargetAssignmentMetadataValue", "validVersions": "0",
     "flexibleVersions": "0+", "fields": [_f("AssignmentEpoch", "int32")]},
    {"apiKey": 21, "type": "data", "name": "StreamsGroupTargetAssignmentMemberValue", "validVersions": "0",
     "flexibleVersions": "0+", "fields": [
         _f("ActiveTasks", "[]TaskIds"), _f("StandbyTasks", "[]TaskIds"), _f("WarmupTasks", "[]TaskIds")],
     "commonStructs": [_TASKS]},
    {"apiKey": 22, "type": "data", "name": "StreamsGroupCurrentMemberAssignmentValue", "validVersions": "0",
     "flexibleVersions": "0+", "fields": [
         _f("MemberEpoch", "int32"), _f("PreviousMemberEpoch", "int32"), _f("State", "int8"),
         _f("ActiveTasks", "[]TaskIds"), _f("StandbyTasks", "[]TaskIds"), _f("WarmupTasks", "[]TaskIds"),
         _f("ActiveTasksPendingRevocation", "[]TaskIds"), _f("StandbyTasksPendingRevocation", "[]TaskIds"),
         _f("WarmupTasksPendingRevocation", "[]TaskIds")],
     "commonStructs": [_struct("TaskIds", _f("SubtopologyId", "string"), _f("Partitions", "[]int32"),
                               _f("AssignmentEpochs", "[]int32", nullable="0+", taggedVersions="0+", tag=0,
                                  default=None))]},
    {"apiKey": 23, "type": "data", "name": "StreamsGroupTopologyValue", "validVersions": "0",
     "flexibleVersions": "0+", "fields": [
         _f("Epoch", "int32"), _f("Subtopologies", "[]Subtopology", fields=_SUBTOPOLOGY)],
     "commonStructs": [_struct("TopicConfig", _f("key", "string"), _f("value", "string")),
                       _struct("TopicInfo", _f("Name", "string"), _f("Partitions", "int32"),
                               _f("ReplicationFactor", "int16"), _f("TopicConfigs", "[]TopicConfig"))]},
]


def _amend(fields: list, add: dict, prefix: str) -> list:
    out = []
    for f in fields:
        path = prefix + f["name"]
        f = dict(f)
        for key in ("versions", "nullableVersions"):
            if path in add.get(key, {}):
                f[key] = add[key][path]
        if "fields" in f:
            f["fields"] = _amend(f["fields"], add, path + ".")
        out.append(f)
        out.extend(add.get("after", {}).get(path, ()))
    return out


def apply_additions(spec: dict) -> dict:
    add = SPEC_ADDITIONS.get(spec.get("name"))
    if not add:
        return spec
    spec = dict(spec, validVersions=add.get("validVersions", spec["validVersions"]))
    spec["fields"] = _amend(spec["fields"], add, "") + list(add.get("append", ()))
    return spec


def _default(field: dict):
    """The field's default as the spec gives it (string form kept; the codec interprets it)."""
    return field.get("default")


def convert_fields(fields, common: dict, seen_structs: dict):
    """Convert spec fields to table tuples:

    (name, type, versions, nullable_versions, tag, tagged_versions, default, flexible_versions,
     struct_name, subfields)
    ``type`` is the primitive name, 'struct', '[]<primitive>' or '[]struct'.
    """
    out = []
    for f in fields:
        ftype = f["type"]
        is_array = ftype.startswith("[]")
        base = ftype[2:] if is_array else ftype
        struct_name = None
        subfields = None
        if base not in PRIMITIVES:
            struct_name = base
            if "fields" in f:
                subfields = convert_fields(f["fields"], common, seen_structs)
            elif base in common:
                subfields = convert_fields(common[base]["fields"], common, seen_structs)
            else:
                raise ValueError(f"unknown struct type {base}")
            base = "struct"
        tagged = parse_versions(f.get("taggedVersions"))
        versions = parse_versions(f.get("versions")) if "versions" in f else tagged
        out.append((
            snake(f["name"]),
            ("[]" if is_array else "") + base,
            versions,
            parse_versions(f.get("nullableVersions")),
            f.get("tag"),
            tagged,
            _default(f),
            parse_versions(f["flexibleVersions"]) if "flexibleVersions" in f else "inherit",
            struct_name,
            tuple(subfields) if subfields is not None else None,
        ))
    return tuple(out)


PRIMITIVES = {"bool", "int8", "int16", "uint16", "int32", "uint32", "int64", "float64",
              "string", "bytes", "records", "uuid"}


def build_tables(spec_dir: str) -> dict:
    messages = {}
    specs = [apply_additions(load_spec(os.path.join(spec_dir, fn)))
             for fn in sorted(os.listdir(spec_dir)) if fn.endswith(".json")]
    for spec in specs + SPEC_NEW:
        kind = spec["type"]
        if kind not in ("request", "response", "header", "data"):
            continue
        common = {c["name"]: c for c in spec.get("commonStructs", ())}
        entry = {
            "name": spec["name"],
            "api_key": spec.get("apiKey"),
            "kind": kind,
            "valid_versions": parse_versions(spec["validVersions"]),
            "flexible_versions": parse_versions(spec["flexibleVersions"]),
            "deprecated_versions": parse_versions(spec.get("deprecatedVersions")),
            "latest_version_unstable": bool(spec.get("latestVersionUnstable", False)),
            "listeners": tuple(spec.get("listeners", ())),
            "fields": convert_fields(spec["fields"], common, {}),
        }
        messages[spec["name"]] = entry
    return messages


HEADER = ("# Generated by `python -m protocol.generate` from Apache Kafka's JSON message specs\n"
          "# (3.9, with generate.SPEC_ADDITIONS and SPEC_NEW). Facts only: names, types, versions, defaults, tags. Do not edit by hand.\n")


def render_tables(messages: dict) -> str:
    body = pprint.pformat(messages, width=110, sort_dicts=True)
    return HEADER + "# flake8: noqa\n\nMESSAGES = " + body + "\n"


def render_hot(messages: dict) -> str:
    # Imported here so that the generator can run before the codec is importable from tables.
    from protocol import codec
    parts = [HEADER, "# Specialised per-version encode/decode functions for the hot messages.\n",
             "# flake8: noqa\n", codec.HOT_PRELUDE]
    names = []
    for m in sorted(messages.values(), key=lambda m: (m["api_key"] if m["api_key"] is not None else -1,
                                                      m["kind"])):
        if m["api_key"] in HOT_APIS and m["kind"] in ("request", "response"):
            names.append(m["name"])
    parts.append(codec.render_hot_source(messages, names))
    return "".join(parts)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--specs", default=DEFAULT_SPECS)
    ap.add_argument("--check", action="store_true", help="compare with the committed output")
    args = ap.parse_args(argv)
    messages = build_tables(args.specs)
    tables = render_tables(messages)
    outputs = {os.path.join(SCHEMA_DIR, "tables.py"): tables}
    # hot.py is rendered from the freshly built tables, not the committed ones.
    outputs[os.path.join(SCHEMA_DIR, "hot.py")] = render_hot(messages)
    stale = []
    for path, text in outputs.items():
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old != text:
            stale.append(path)
            if not args.check:
                with open(path, "w", encoding="utf-8") as f:
                    f.write(text)
    if args.check:
        for p in stale:
            print(f"stale: {p}", file=sys.stderr)
        return 1 if stale else 0
    print(f"{len(messages)} message specs; wrote {len(stale)} file(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
