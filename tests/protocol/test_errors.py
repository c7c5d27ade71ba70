"""Kafka error codes: the table, helpers and exception classes."""
import pickle

import pytest

from protocol import errors
from protocol.errors import (ERRORS, ErrorCode, KafkaError, code_for_exception, error_for,
                             error_message, error_name, is_retriable, raise_for)
from protocol.records import CorruptRecordError, InvalidRecordError

# Spot checks against Kafka's Errors enum.
KNOWN = {
    -1: "UNKNOWN_SERVER_ERROR", 0: "NONE", 1: "OFFSET_OUT_OF_RANGE", 2: "CORRUPT_MESSAGE",
    3: "UNKNOWN_TOPIC_OR_PARTITION", 6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT",
    10: "MESSAGE_TOO_LARGE", 15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR",
    17: "INVALID_TOPIC_EXCEPTION", 19: "NOT_ENOUGH_REPLICAS",
    20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND", 22: "ILLEGAL_GENERATION", 25: "UNKNOWN_MEMBER_ID",
    27: "REBALANCE_IN_PROGRESS", 35: "UNSUPPORTED_VERSION", 36: "TOPIC_ALREADY_EXISTS",
    41: "NOT_CONTROLLER", 42: "INVALID_REQUEST", 45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
    46: "DUPLICATE_SEQUENCE_NUMBER", 47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE",
    51: "CONCURRENT_TRANSACTIONS", 56: "KAFKA_STORAGE_ERROR", 58: "SASL_AUTHENTICATION_FAILED",
    59: "UNKNOWN_PRODUCER_ID", 72: "LISTENER_NOT_FOUND", 74: "FENCED_LEADER_EPOCH",
    75: "UNKNOWN_LEADER_EPOCH", 76: "UNSUPPORTED_COMPRESSION_TYPE", 78: "OFFSET_NOT_AVAILABLE",
    79: "MEMBER_ID_REQUIRED", 82: "FENCED_INSTANCE_ID", 87: "INVALID_RECORD",
    89: "THROTTLING_QUOTA_EXCEEDED", 90: "PRODUCER_FENCED", 100: "UNKNOWN_TOPIC_ID",
    103: "INCONSISTENT_TOPIC_ID", 110: "FENCED_MEMBER_EPOCH", 113: "STALE_MEMBER_EPOCH",
    120: "TRANSACTION_ABORTABLE", 129: "REBOOTSTRAP_REQUIRED", 133: "SHARE_SESSION_LIMIT_REACHED",
}

RETRIABLE = {2, 3, 5, 6, 7, 9, 13, 14, 15, 16, 19, 20, 41, 51, 56, 70, 71, 72, 74, 75, 78, 80,
             83, 84, 88, 89, 100, 103, 106, 122, 123, 133}


def test_table_is_contiguous_and_unique():
    assert sorted(ERRORS) == list(range(-1, 134))
    names = [info.name for info in ERRORS.values()]
    assert len(set(names)) == len(names)
    assert all(n == n.upper() and " " not in n for n in names)
    assert all(info.message for info in ERRORS.values())


@pytest.mark.parametrize("code,name", sorted(KNOWN.items()))
def test_known_codes(code, name):
    assert error_name(code) == name
    assert ErrorCode[name] == code


def test_retriable_set_matches_kafka():
    assert {c for c in ERRORS if is_retriable(c)} == RETRIABLE


def test_unknown_code():
    assert error_name(999) == "UNKNOWN_ERROR_CODE_999"
    assert not is_retriable(999)
    assert "999" in error_message(999)
    assert error_for(999) is errors.UnknownServerError
    with pytest.raises(KafkaError) as info:
        raise_for(999, "boom")
    assert info.value.code == 999 and str(info.value) == "boom"


def test_exception_classes():
    assert error_for(6) is errors.NotLeaderOrFollowerError
    assert error_for(ErrorCode.INVALID_TOPIC_EXCEPTION) is errors.InvalidTopicError
    assert errors.NetworkError.code == 13
    exc = errors.NotLeaderOrFollowerError()
    assert exc.code == 6 and exc.retriable and exc.name == "NOT_LEADER_OR_FOLLOWER"
    assert str(exc) == error_message(6)
    assert not errors.InvalidRecordError("bad").retriable
    for code in ERRORS:
        if code:
            cls = error_for(code)
            assert issubclass(cls, KafkaError) and cls.code == code
    with pytest.raises(ValueError):
        error_for(0)
    raise_for(0)    # no-op
    with pytest.raises(errors.MessageTooLargeError):
        raise_for(ErrorCode.MESSAGE_TOO_LARGE)


def test_pickle_round_trip():
    exc = pickle.loads(pickle.dumps(errors.CorruptMessageError("x")))
    assert isinstance(exc, errors.CorruptMessageError) and exc.code == 2


def test_code_for_exception():
    assert code_for_exception(CorruptRecordError("x")) == 2
    assert code_for_exception(InvalidRecordError("x")) == 87
    assert code_for_exception(errors.PolicyViolationError()) == 44
    assert code_for_exception(KafkaError("x", code=77)) == 77
    assert code_for_exception(RuntimeError()) == -1
