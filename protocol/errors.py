"""Kafka error codes: every code of the protocol (Kafka 3.9 / 4.x), its name and retriability.

The names are Kafka's own (``Errors`` enum, UPPER_SNAKE); "retriable" follows whether Kafka's Java
exception for the code is a ``RetriableException`` (a client may retry the same request).

* ``ErrorCode`` -- an ``IntEnum`` of all codes (``ErrorCode.NOT_LEADER_OR_FOLLOWER == 6``).
* ``is_retriable(code)``, ``error_name(code)``, ``error_message(code)``.
* ``KafkaError`` -- an exception carrying ``.code``; one subclass per code, named in CamelCase
  with an ``Error`` suffix (``NotLeaderOrFollowerError``, ``InvalidTopicError``); ``error_for(code)`` returns the class,
  ``raise_for(code)`` raises it unless the code is ``NONE``.
* ``code_for_exception(exc)`` -- the code a broker should answer for an exception.
"""
from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple


class ErrorInfo(NamedTuple):
    code: int
    name: str
    retriable: bool
    message: str


# (code, NAME, retriable, short message)
_TABLE = [
    ( -1, 'UNKNOWN_SERVER_ERROR'                 , False, 'The server hit an unexpected error while handling the request.'),
    (  0, 'NONE'                                 , False, 'No error.'),
    (  1, 'OFFSET_OUT_OF_RANGE'                  , False, 'The requested offset is outside the range the server holds for the partition.'),
    (  2, 'CORRUPT_MESSAGE'                      , True , 'A message failed its CRC check, has an invalid size or is otherwise corrupt.'),
    (  3, 'UNKNOWN_TOPIC_OR_PARTITION'           , True , 'This server does not host this topic-partition.'),
    (  4, 'INVALID_FETCH_SIZE'                   , False, 'The requested fetch size is invalid.'),
    (  5, 'LEADER_NOT_AVAILABLE'                 , True , 'The partition has no leader right now (a leader election is under way).'),
    (  6, 'NOT_LEADER_OR_FOLLOWER'               , True , 'This broker is not the leader (or not a replica) of the partition.'),
    (  7, 'REQUEST_TIMED_OUT'                    , True , 'The request timed out.'),
    (  8, 'BROKER_NOT_AVAILABLE'                 , False, 'The broker is not available.'),
    (  9, 'REPLICA_NOT_AVAILABLE'                , True , 'The replica is not available for the partition.'),
    ( 10, 'MESSAGE_TOO_LARGE'                    , False, 'A message is larger than the maximum size the server accepts.'),
    ( 11, 'STALE_CONTROLLER_EPOCH'               , False, 'The request comes from an old controller epoch.'),
    ( 12, 'OFFSET_METADATA_TOO_LARGE'            , False, 'The committed offset metadata is too large.'),
    ( 13, 'NETWORK_EXCEPTION'                    , True , 'The connection was closed before a response arrived.'),
    ( 14, 'COORDINATOR_LOAD_IN_PROGRESS'         , True , 'The coordinator is still loading its state.'),
    ( 15, 'COORDINATOR_NOT_AVAILABLE'            , True , 'The coordinator is not available.'),
    ( 16, 'NOT_COORDINATOR'                      , True , 'This broker is not the coordinator for the group or transaction.'),
    ( 17, 'INVALID_TOPIC_EXCEPTION'              , False, 'The topic name is invalid or the operation is not allowed on it.'),
    ( 18, 'RECORD_LIST_TOO_LARGE'                , False, 'The message batch is larger than the configured segment size.'),
    ( 19, 'NOT_ENOUGH_REPLICAS'                  , True , 'Rejected: fewer in-sync replicas than min.insync.replicas.'),
    ( 20, 'NOT_ENOUGH_REPLICAS_AFTER_APPEND'     , True , 'Written, but to fewer in-sync replicas than required.'),
    ( 21, 'INVALID_REQUIRED_ACKS'                , False, 'The produce request has an invalid acks value.'),
    ( 22, 'ILLEGAL_GENERATION'                   , False, 'The group generation id is not valid.'),
    ( 23, 'INCONSISTENT_GROUP_PROTOCOL'          , False, "The member's protocols do not match those of the group."),
    ( 24, 'INVALID_GROUP_ID'                     , False, 'The group id is invalid.'),
    ( 25, 'UNKNOWN_MEMBER_ID'                    , False, 'The coordinator does not know this member id.'),
    ( 26, 'INVALID_SESSION_TIMEOUT'              , False, 'The session timeout is outside the range the broker allows.'),
    ( 27, 'REBALANCE_IN_PROGRESS'                , False, 'The group is rebalancing; the member must rejoin.'),
    ( 28, 'INVALID_COMMIT_OFFSET_SIZE'           , False, 'The size of the committed offset data is invalid.'),
    ( 29, 'TOPIC_AUTHORIZATION_FAILED'           , False, 'Not authorized to access the topic.'),
    ( 30, 'GROUP_AUTHORIZATION_FAILED'           , False, 'Not authorized to access the group.'),
    ( 31, 'CLUSTER_AUTHORIZATION_FAILED'         , False, 'Not authorized for this cluster operation.'),
    ( 32, 'INVALID_TIMESTAMP'                    , False, 'A message timestamp is outside the accepted range.'),
    ( 33, 'UNSUPPORTED_SASL_MECHANISM'           , False, 'The broker does not support the SASL mechanism.'),
    ( 34, 'ILLEGAL_SASL_STATE'                   , False, 'The request is not valid in the current SASL state.'),
    ( 35, 'UNSUPPORTED_VERSION'                  , False, 'The API version is not supported.'),
    ( 36, 'TOPIC_ALREADY_EXISTS'                 , False, 'The topic already exists.'),
    ( 37, 'INVALID_PARTITIONS'                   , False, 'The number of partitions is invalid.'),
    ( 38, 'INVALID_REPLICATION_FACTOR'           , False, 'The replication factor is invalid or exceeds the available brokers.'),
    ( 39, 'INVALID_REPLICA_ASSIGNMENT'           , False, 'The replica assignment is invalid.'),
    ( 40, 'INVALID_CONFIG'                       , False, 'The configuration is invalid.'),
    ( 41, 'NOT_CONTROLLER'                       , True , 'This broker is not the active controller.'),
    ( 42, 'INVALID_REQUEST'                      , False, 'The request is malformed or not valid for this broker.'),
    ( 43, 'UNSUPPORTED_FOR_MESSAGE_FORMAT'       , False, 'The message format version does not support the request.'),
    ( 44, 'POLICY_VIOLATION'                     , False, 'The request breaks a configured policy.'),
    ( 45, 'OUT_OF_ORDER_SEQUENCE_NUMBER'         , False, 'The broker received an out-of-order sequence number.'),
    ( 46, 'DUPLICATE_SEQUENCE_NUMBER'            , False, 'The broker received a duplicate sequence number.'),
    ( 47, 'INVALID_PRODUCER_EPOCH'               , False, 'The producer epoch is older than the current one.'),
    ( 48, 'INVALID_TXN_STATE'                    , False, 'The transactional operation is not valid in the current state.'),
    ( 49, 'INVALID_PRODUCER_ID_MAPPING'          , False, 'The producer id is not assigned to this transactional id.'),
    ( 50, 'INVALID_TRANSACTION_TIMEOUT'          , False, 'The transaction timeout exceeds transaction.max.timeout.ms.'),
    ( 51, 'CONCURRENT_TRANSACTIONS'              , True , 'Another operation on the same transaction is in progress.'),
    ( 52, 'TRANSACTION_COORDINATOR_FENCED'       , False, 'The transaction coordinator that sent the markers is no longer current.'),
    ( 53, 'TRANSACTIONAL_ID_AUTHORIZATION_FAILED', False, 'Not authorized for the transactional id.'),
    ( 54, 'SECURITY_DISABLED'                    , False, 'Security features are disabled.'),
    ( 55, 'OPERATION_NOT_ATTEMPTED'              , False, 'The operation was not attempted because another part of the batch failed.'),
    ( 56, 'KAFKA_STORAGE_ERROR'                  , True , 'A disk error occurred while accessing the log.'),
    ( 57, 'LOG_DIR_NOT_FOUND'                    , False, 'The log directory is not in the broker configuration.'),
    ( 58, 'SASL_AUTHENTICATION_FAILED'           , False, 'SASL authentication failed.'),
    ( 59, 'UNKNOWN_PRODUCER_ID'                  , False, 'The broker has no state for this producer id.'),
    ( 60, 'REASSIGNMENT_IN_PROGRESS'             , False, 'A partition reassignment is in progress.'),
    ( 61, 'DELEGATION_TOKEN_AUTH_DISABLED'       , False, 'Delegation tokens are not enabled.'),
    ( 62, 'DELEGATION_TOKEN_NOT_FOUND'           , False, 'The delegation token was not found.'),
    ( 63, 'DELEGATION_TOKEN_OWNER_MISMATCH'      , False, 'The principal is not the owner or renewer of the token.'),
    ( 64, 'DELEGATION_TOKEN_REQUEST_NOT_ALLOWED' , False, 'Delegation token requests are not allowed on this channel.'),
    ( 65, 'DELEGATION_TOKEN_AUTHORIZATION_FAILED', False, 'Delegation token authorization failed.'),
    ( 66, 'DELEGATION_TOKEN_EXPIRED'             , False, 'The delegation token has expired.'),
    ( 67, 'INVALID_PRINCIPAL_TYPE'               , False, 'The principal type is not supported.'),
    ( 68, 'NON_EMPTY_GROUP'                      , False, 'The group is not empty.'),
    ( 69, 'GROUP_ID_NOT_FOUND'                   , False, 'The group id does not exist.'),
    ( 70, 'FETCH_SESSION_ID_NOT_FOUND'           , True , 'The fetch session id was not found.'),
    ( 71, 'INVALID_FETCH_SESSION_EPOCH'          , True , 'The fetch session epoch is invalid.'),
    ( 72, 'LISTENER_NOT_FOUND'                   , True , 'The leader has no listener matching the one the request came in on.'),
    ( 73, 'TOPIC_DELETION_DISABLED'              , False, 'Topic deletion is disabled.'),
    ( 74, 'FENCED_LEADER_EPOCH'                  , True , "The leader epoch in the request is older than the broker's."),
    ( 75, 'UNKNOWN_LEADER_EPOCH'                 , True , "The leader epoch in the request is newer than the broker's."),
    ( 76, 'UNSUPPORTED_COMPRESSION_TYPE'         , False, "The client does not support the partition's compression type."),
    ( 77, 'STALE_BROKER_EPOCH'                   , False, 'The broker epoch has changed.'),
    ( 78, 'OFFSET_NOT_AVAILABLE'                 , True , "The new leader's high watermark has not caught up yet."),
    ( 79, 'MEMBER_ID_REQUIRED'                   , False, 'The member must rejoin with the member id it was given.'),
    ( 80, 'PREFERRED_LEADER_NOT_AVAILABLE'       , True , 'The preferred leader is not available.'),
    ( 81, 'GROUP_MAX_SIZE_REACHED'               , False, 'The group has reached its maximum size.'),
    ( 82, 'FENCED_INSTANCE_ID'                   , False, 'Another member registered with the same group.instance.id.'),
    ( 83, 'ELIGIBLE_LEADERS_NOT_AVAILABLE'       , True , 'No eligible leader is available for the partition.'),
    ( 84, 'ELECTION_NOT_NEEDED'                  , True , 'A leader election is not needed for the partition.'),
    ( 85, 'NO_REASSIGNMENT_IN_PROGRESS'          , False, 'No partition reassignment is in progress.'),
    ( 86, 'GROUP_SUBSCRIBED_TO_TOPIC'            , False, 'The group is subscribed to the topic, so its offsets cannot be deleted.'),
    ( 87, 'INVALID_RECORD'                       , False, "A record failed the broker's validation."),
    ( 88, 'UNSTABLE_OFFSET_COMMIT'               , True , 'Unstable offsets must be resolved first.'),
    ( 89, 'THROTTLING_QUOTA_EXCEEDED'            , True , 'The throttling quota has been exceeded.'),
    ( 90, 'PRODUCER_FENCED'                      , False, 'A newer producer with the same transactional id fenced this one.'),
    ( 91, 'RESOURCE_NOT_FOUND'                   , False, 'The request refers to a resource that does not exist.'),
    ( 92, 'DUPLICATE_RESOURCE'                   , False, 'The request refers to the same resource twice.'),
    ( 93, 'UNACCEPTABLE_CREDENTIAL'              , False, 'The requested credential does not meet the acceptance criteria.'),
    ( 94, 'INCONSISTENT_VOTER_SET'               , False, 'The sender or receiver is not one of the expected voters.'),
    ( 95, 'INVALID_UPDATE_VERSION'               , False, 'The update version is invalid.'),
    ( 96, 'FEATURE_UPDATE_FAILED'                , False, 'The finalized features could not be updated.'),
    ( 97, 'PRINCIPAL_DESERIALIZATION_FAILURE'    , False, 'The forwarded request principal could not be deserialized.'),
    ( 98, 'SNAPSHOT_NOT_FOUND'                   , False, 'The requested snapshot was not found.'),
    ( 99, 'POSITION_OUT_OF_RANGE'                , False, 'The requested position is outside the snapshot.'),
    (100, 'UNKNOWN_TOPIC_ID'                     , True , 'This server does not host the topic id.'),
    (101, 'DUPLICATE_BROKER_REGISTRATION'        , False, 'The broker id is already registered.'),
    (102, 'BROKER_ID_NOT_REGISTERED'             , False, 'The broker id is not registered.'),
    (103, 'INCONSISTENT_TOPIC_ID'                , True , "The log's topic id does not match the request."),
    (104, 'INCONSISTENT_CLUSTER_ID'              , False, "The cluster id in the request does not match the server's."),
    (105, 'TRANSACTIONAL_ID_NOT_FOUND'           , False, 'The transactional id was not found.'),
    (106, 'FETCH_SESSION_TOPIC_ID_ERROR'         , True , 'The fetch session used topic ids inconsistently.'),
    (107, 'INELIGIBLE_REPLICA'                   , False, 'The new ISR contains an ineligible replica.'),
    (108, 'NEW_LEADER_ELECTED'                   , False, 'The partition state was updated but the leader has changed.'),
    (109, 'OFFSET_MOVED_TO_TIERED_STORAGE'       , False, 'The requested offset has moved to tiered storage.'),
    (110, 'FENCED_MEMBER_EPOCH'                  , False, 'The member epoch is fenced; the member must rejoin.'),
    (111, 'UNRELEASED_INSTANCE_ID'               , False, 'The instance id is still used by another member.'),
    (112, 'UNSUPPORTED_ASSIGNOR'                 , False, 'The assignor or its version is not supported by the group.'),
    (113, 'STALE_MEMBER_EPOCH'                   , False, 'The member epoch is stale.'),
    (114, 'MISMATCHED_ENDPOINT_TYPE'             , False, 'The request was sent to the wrong type of endpoint.'),
    (115, 'UNSUPPORTED_ENDPOINT_TYPE'            , False, 'The endpoint type is not supported.'),
    (116, 'UNKNOWN_CONTROLLER_ID'                , False, 'The controller id is not known.'),
    (117, 'UNKNOWN_SUBSCRIPTION_ID'              , False, 'The telemetry subscription id is unknown or outdated.'),
    (118, 'TELEMETRY_TOO_LARGE'                  , False, 'The telemetry payload is larger than the broker accepts.'),
    (119, 'INVALID_REGISTRATION'                 , False, 'The controller considers the broker registration invalid.'),
    (120, 'TRANSACTION_ABORTABLE'                , False, 'The transaction hit an error; the client may abort it and continue.'),
    (121, 'INVALID_RECORD_STATE'                 , False, 'The record state is invalid; the acknowledgement failed.'),
    (122, 'SHARE_SESSION_NOT_FOUND'              , True , 'The share session was not found.'),
    (123, 'INVALID_SHARE_SESSION_EPOCH'          , True , 'The share session epoch is invalid.'),
    (124, 'FENCED_STATE_EPOCH'                   , False, 'The share-group state epoch does not match.'),
    (125, 'INVALID_VOTER_KEY'                    , False, "The voter key does not match the replica's key."),
    (126, 'DUPLICATE_VOTER'                      , False, 'The voter is already in the voter set.'),
    (127, 'VOTER_NOT_FOUND'                      , False, 'The voter is not in the voter set.'),
    (128, 'INVALID_REGULAR_EXPRESSION'           , False, 'The regular expression is invalid.'),
    (129, 'REBOOTSTRAP_REQUIRED'                 , False, 'Client metadata is stale; the client must rebootstrap.'),
    (130, 'STREAMS_INVALID_TOPOLOGY'             , False, 'The streams topology is invalid.'),
    (131, 'STREAMS_INVALID_TOPOLOGY_EPOCH'       , False, 'The streams topology epoch is invalid.'),
    (132, 'STREAMS_TOPOLOGY_FENCED'              , False, 'The streams topology epoch is outdated.'),
    (133, 'SHARE_SESSION_LIMIT_REACHED'          , True , 'The broker has reached its share session limit.'),
]

ERRORS: dict[int, ErrorInfo] = {row[0]: ErrorInfo(*row) for row in _TABLE}
MIN_CODE = min(ERRORS)
MAX_CODE = max(ERRORS)

ErrorCode = IntEnum("ErrorCode", [(info.name, code) for code, info in ERRORS.items()])
ErrorCode.__doc__ = "Every Kafka error code, by its Kafka name."
ErrorCode.__module__ = __name__


def _info(code) -> ErrorInfo | None:
    return ERRORS.get(int(code))


def is_retriable(code) -> bool:
    """True if a client may retry after ``code``; unknown codes are not retriable."""
    info = _info(code)
    return bool(info and info.retriable)


def error_name(code) -> str:
    """Kafka's name for ``code`` (``UNKNOWN_ERROR_CODE_<n>`` for a code Kafka does not define)."""
    info = _info(code)
    return info.name if info else f"UNKNOWN_ERROR_CODE_{int(code)}"


def error_message(code) -> str:
    """A one-line description of ``code``."""
    info = _info(code)
    return info.message if info else f"Unknown error code {int(code)}."


class KafkaError(Exception):
    """An error with a Kafka error code; ``str()`` is the given message or the default one."""

    code: int = -1

    def __init__(self, message: str | None = None, *, code: int | None = None):
        if code is not None:
            self.code = int(code)
        self.message = message if message is not None else error_message(self.code)
        super().__init__(self.message)

    @property
    def name(self) -> str:
        return error_name(self.code)

    @property
    def retriable(self) -> bool:
        return is_retriable(self.code)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code})"


def _class_name(name: str) -> str:
    base = "".join(part.capitalize() for part in name.split("_"))
    base = base.removesuffix("Exception")
    return base if base.endswith("Error") else base + "Error"


_CLASSES: dict[int, type[KafkaError]] = {}
for _code, _info_row in ERRORS.items():
    if _code == 0:
        continue
    _cls = type(_class_name(_info_row.name), (KafkaError,),
                {"code": _code, "__doc__": _info_row.message, "__module__": __name__})
    _CLASSES[_code] = _cls
    globals()[_cls.__name__] = _cls
del _code, _info_row, _cls


def error_for(code) -> type[KafkaError]:
    """The ``KafkaError`` subclass for ``code`` (``UnknownServerError`` for unknown codes)."""
    code = int(code)
    if code == 0:
        raise ValueError("error code 0 (NONE) is not an error")
    return _CLASSES.get(code, _CLASSES[-1])


def raise_for(code, message: str | None = None) -> None:
    """Raise the exception for ``code``; do nothing for 0 (NONE)."""
    if int(code) != 0:
        cls = error_for(code)
        raise cls(message) if cls.code == int(code) else cls(message, code=code)


def code_for_exception(exc: BaseException) -> int:
    """The error code to answer for ``exc`` (record errors map to CORRUPT_MESSAGE/INVALID_RECORD)."""
    if isinstance(exc, KafkaError):
        return exc.code
    from protocol.records import CorruptRecordError, InvalidRecordError
    if isinstance(exc, CorruptRecordError):
        return ErrorCode.CORRUPT_MESSAGE
    if isinstance(exc, InvalidRecordError):
        return ErrorCode.INVALID_RECORD
    return ErrorCode.UNKNOWN_SERVER_ERROR


__all__ = ["ErrorCode", "ErrorInfo", "ERRORS", "KafkaError", "is_retriable", "error_name",
           "error_message", "error_for", "raise_for", "code_for_exception",
           *(cls.__name__ for cls in _CLASSES.values())]
