"""Exceptions raised by storage/.

Each carries the Kafka error name the broker should answer with (``kafka_error``), so the broker
can map them without knowing storage internals.  Record-level problems found while appending
(bad CRC, bad header) are raised as ``protocol.records.CorruptRecordError`` /
``InvalidRecordError`` unchanged.
"""
from __future__ import annotations

import errno

# A write refused for want of space leaves the file as it was (the segment truncates its partial
# write back) and works again once space returns.  Any other OSError (EIO, EROFS, ...) means
# the disk itself failed.
TRANSIENT_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})


class StorageError(Exception):
    """Disk trouble (ENOSPC, EIO, ...).  Broker answers KAFKA_STORAGE_ERROR.

    ``dir_failure`` says whether the log dir must be taken offline: True for a failed fsync
    (whatever its errno, the kernel may have dropped the unwritten pages, and a later fsync
    would report success), None to decide by the errno of the OSError behind it."""
    kafka_error = "KAFKA_STORAGE_ERROR"

    def __init__(self, *args, dir_failure: bool | None = None):
        super().__init__(*args)
        self.dir_failure = dir_failure


def is_log_dir_failure(exc: BaseException) -> bool:
    """Whether ``exc``, raised by an operation on a log dir, means that dir has failed (Kafka
    takes it offline: LogDirFailureChannel).  A full disk does not: Odradek answers
    KAFKA_STORAGE_ERROR and goes on once space returns."""
    e: BaseException | None = exc
    while e is not None:
        flag = getattr(e, "dir_failure", None)
        if flag is not None:
            return bool(flag)
        if isinstance(e, OSError):
            return e.errno not in TRANSIENT_ERRNOS
        e = e.__cause__
    return False


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
