"""Exceptions raised by storage/.

Each carries the Kafka error name the broker should answer with (``kafka_error``), so the broker
can map them without knowing storage internals.  Record-level problems found while appending
(bad CRC, bad header) are raised as ``protocol.records.CorruptRecordError`` /
``InvalidRecordError`` unchanged.
"""
from __future__ import annotations


class StorageError(Exception):
    """Disk trouble (ENOSPC, EIO, ...).  Broker answers KAFKA_STORAGE_ERROR."""
    kafka_error = "KAFKA_STORAGE_ERROR"


class LogDirLockedError(StorageError):
    """Another process holds the ``.lock`` of a log dir."""


class CorruptIndexError(StorageError):
    """An index file failed its sanity check; the segment rebuilds it from the .log."""


class OffsetOutOfRangeError(Exception):
    kafka_error = "OFFSET_OUT_OF_RANGE"


class RecordTooLargeError(Exception):
    kafka_error = "MESSAGE_TOO_LARGE"


class InvalidTimestampError(Exception):
    kafka_error = "INVALID_TIMESTAMP"


class UnexpectedAppendOffsetError(Exception):
    """A follower append whose first offset is below the log end offset."""
    kafka_error = "UNKNOWN_SERVER_ERROR"


class OutOfOrderSequenceError(Exception):
    kafka_error = "OUT_OF_ORDER_SEQUENCE_NUMBER"


class InvalidProducerEpochError(Exception):
    kafka_error = "INVALID_PRODUCER_EPOCH"


class UnknownProducerIdError(Exception):
    kafka_error = "UNKNOWN_PRODUCER_ID"


class InvalidTxnStateError(Exception):
    kafka_error = "INVALID_TXN_STATE"


class TransactionCoordinatorFencedError(Exception):
    kafka_error = "TRANSACTION_COORDINATOR_FENCED"
