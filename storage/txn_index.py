"""Transaction index (``<base>.txnindex``): the aborted transactions whose ABORT marker is in
a segment.

Format (Kafka 3.x, big-endian), one 34-byte entry per aborted transaction, no file header::

    int16 version (0) | int64 producer id | int64 first offset | int64 last offset (the
    ABORT marker) | int64 last stable offset at the moment of the abort

How this works: the file is created lazily by the first ``append`` (most segments never get
one).  Entries are kept in a Python list, loaded on first use; an append writes the 34 bytes
at once with ``os.write`` on an ``O_APPEND`` descriptor opened for that call, so no descriptor
is held (aborts are rare).  ``collect(fetch_offset, upper)`` returns the entries overlapping
``[fetch_offset, upper)`` and whether the search may stop at this segment (an entry's last
stable offset ≥ ``upper`` means no transaction aborted in a later segment can start below
``upper``).  ``truncate_to`` drops entries whose marker is at or after an offset (follower
truncation); ``reset`` empties the index before recovery rebuilds it.

``aborted_entries`` turns the ``CompletedTxn`` list of a producer-state append session into
index entries, computing each one's last stable offset as Kafka does: the first offset of the
oldest other transaction still open when the marker was written, else marker offset + 1.

Not thread-safe; owned by one LogSegment.
"""
from __future__ import annotations

import os
import struct
from typing import NamedTuple

from .errors import CorruptIndexError

ENTRY = struct.Struct(">hqqqq")
ENTRY_SIZE = ENTRY.size
assert ENTRY_SIZE == 34
VERSION = 0


class AbortedTxn(NamedTuple):
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int


def aborted_entries(completed, ongoing_first_offsets) -> list[AbortedTxn]:
    """Index entries for the aborted transactions in ``completed`` (``CompletedTxn``s of one
    append session, in log order).  ``ongoing_first_offsets``: first offsets of transactions
    still open after the append."""
    out = []
    for i, c in enumerate(completed):
        if not c.is_aborted:
            continue
        marker = c.last_offset
        lso = marker + 1
        for f in ongoing_first_offsets:
            if f < lso:
                lso = f
        for later in completed[i + 1:]:
            # still open when this marker was written
            if later.first_offset < marker and later.first_offset < lso:
                lso = later.first_offset
        out.append(AbortedTxn(c.producer_id, c.first_offset, marker, lso))
    return out


class TransactionIndex:
    """One segment's ``.txnindex``."""

    def __init__(self, path: str):
        self.path = path
        self._entries: list[AbortedTxn] | None = None

    def __repr__(self):
        return f"TransactionIndex({self.path!r})"

    # -- loading ----------------------------------------------------------------------------
    @property
    def entries(self) -> list[AbortedTxn]:
        if self._entries is None:
            self._entries = self._load()
        return self._entries

    def _load(self) -> list[AbortedTxn]:
        try:
            with open(self.path, "rb") as f:
                data = f.read()
        except FileNotFoundError:
            return []
        whole = len(data) - len(data) % ENTRY_SIZE
        out = []
        for pos in range(0, whole, ENTRY_SIZE):
            version, pid, first, last, lso = ENTRY.unpack_from(data, pos)
            if version != VERSION:
                raise CorruptIndexError(f"{self.path}: unknown entry version {version}")
            out.append(AbortedTxn(pid, first, last, lso))
        if whole != len(data):
            # a torn final entry (crash mid-write): drop it
            os.truncate(self.path, whole)
        return out

    def __len__(self) -> int:
        return len(self.entries)

    # -- writes -----------------------------------------------------------------------------
    def append(self, txn: AbortedTxn) -> None:
        entries = self.entries
        if entries and txn.last_offset <= entries[-1].last_offset:
            raise ValueError(f"{self.path}: aborted transaction at {txn.last_offset} is not after "
                             f"the last one at {entries[-1].last_offset}")
        data = ENTRY.pack(VERSION, txn.producer_id, txn.first_offset, txn.last_offset,
                          txn.last_stable_offset)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, data)
        finally:
            os.close(fd)
        entries.append(txn)

    def truncate_to(self, offset: int) -> None:
        """Drop entries whose marker is at or after ``offset``."""
        entries = self.entries
        keep = len(entries)
        while keep and entries[keep - 1].last_offset >= offset:
            keep -= 1
        if keep == len(entries):
            return
        del entries[keep:]
        try:
            os.truncate(self.path, keep * ENTRY_SIZE)
        except FileNotFoundError:
            pass

    def reset(self) -> None:
        """Remove every entry and the file (recovery rebuilds the index)."""
        self._entries = []
        self.delete()

    # -- queries ----------------------------------------------------------------------------
    def collect(self, fetch_offset: int, upper: int) -> tuple[list[AbortedTxn], bool]:
        """Entries overlapping [fetch_offset, upper) and whether the search is complete."""
        out = []
        for txn in self.entries:
            if txn.last_offset >= fetch_offset and txn.first_offset < upper:
                out.append(txn)
            if txn.last_stable_offset >= upper:
                return out, True
        return out, False

    # -- files ------------------------------------------------------------------------------
    def exists(self) -> bool:
        return os.path.exists(self.path)

    def flush(self) -> None:
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except FileNotFoundError:
            return
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def rename(self, new_path: str) -> None:
        if os.path.exists(self.path):
            os.replace(self.path, new_path)
        self.path = new_path

    def delete(self) -> None:
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass
